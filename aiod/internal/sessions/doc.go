// Package sessions is the planes' one execution context and one session
// registry.
//
// # Execution context
//
// [Exec] resolves what a request asks of a process the same way on
// every plane: the account ([Exec.Account]: the request's user, else the
// daemon's default user, through aiod/internal/account), the working
// directory ([Exec.Dir]: relative to a base, which must be a
// directory), the environment ([Exec.Env]: the daemon's minus its
// secrets and the plane's hidden names, plus the account's HOME, USER,
// LOGNAME) and timeouts in seconds ([Seconds]). It decides; the plane
// words the refusal (its published messages differ), so its errors
// carry the cause, not a client sentence.
//
// # Registry
//
// [Registry] holds a plane's named sessions in tiers (the code plane's
// kernel and native sessions; one tier for commands or terminals), each
// with a cap, an idle limit and a full-tier policy: refuse with the
// tier's error, or evict the least recently used idle session. A
// session is created under the cap in one step ([Registry.Open]), so two
// requests naming a new id get one session and a full tier is never
// overshot; [Registry.Reserve] holds a slot for a session whose id comes
// later (an anonymous session, a watcher being set up). [Registry.Reclaim]
// ends sessions idle past their tier's limit: the owner calls it from a
// janitor (aiod/internal/janitor). A session decides itself whether it
// is idle ([Session.Expire]), atomically with its own work, so a run
// that starts as the janitor looks is never cut.
//
// # Adoption
//
// The code plane uses both (two tiers, kernel and native); the watch
// plane keeps its running watchers in a one-tier registry capped at
// MaxWatchers, a create reserving its slot while it walks the tree
// (watchers never expire: their Expire says no). Commands and terminals adopt them in two
// steps, each keeping their answers: (1) their cwd checks, environment
// filtering and account lookups call [Exec] (commands keeps its
// "cannot use cwd" wording around [DirError]); (2) their session maps
// become a Registry with one tier: commands' "sessions full, evict the
// idle one, else 400" is Tier{Max, Evict: true, Full: <its ErrBusy
// refusal>} with the route override api.AsStatus(api.ErrBusy, 400);
// their session types implement [Session] (Expire holding their run
// lock, as the code plane's does), and CloseSession removes from the
// registry and then ends the process outside its lock.
package sessions
