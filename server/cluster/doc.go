// Package cluster lets any number of `a2c server` processes (nodes) act
// as one hub, coordinated through Redis (or Valkey, or a Redis Cluster).
// A client cannot tell a cluster from one server: the office rules hold
// cluster-wide, requests and answers cross nodes unchanged, and a node's
// death or a Redis outage ends in the answers the single server gives.
//
// # Nodes and liveness
//
// Each node has an id (Config.NodeID, random by default) and, while it
// lives, a lease: the key a2c:{N}:lease, written with a TTL of
// Config.LeaseTTL (5 s) and renewed every Config.Heartbeat (1 s). The
// lease holds the node's epoch: a counter (a2c:{N}:ep) that goes up each
// time the node registers (at start, and whenever it finds its lease
// gone), and every member record the node writes carries the epoch it was
// seated under. The registry set a2c:nodes lists the node ids; each
// renewal adds the node again, so a node that a sweeper forgot during a
// pause is found again by the next sweep. A node is dead when its lease
// has expired. Every node runs a sweeper that every Config.SweepEvery
// (1 s) reads the registry and judges each node in one script that reads,
// atomically, whether the lease lives and the node's last epoch. For a
// dead node it runs the sweep script on each office of the dead node's
// index, removing that node's members of the judged epoch and below, then
// forgets the node (deletes its index) in one script that does so only
// if the lease is still absent and the epoch unchanged. A node that
// comes back from a pause during the sweep registers under the next
// epoch and re-seats its members under it: the sweep removes none of
// them, and its index is kept, so when it dies later it is swept too.
// So a node killed with kill -9 has all its members removed, and a
// departure published for each, within Config.RemovalBound: LeaseTTL +
// SweepEvery + 2 × OpTimeout = 8 s with the defaults (the promise to
// users is ≤ 15 s). The sweep script only removes members that are still
// there, so several sweepers racing on one dead node publish each
// departure once.
//
// The node's standing with Redis (live, cut off, settling after a lost
// lease) is one state machine owned by one goroutine, the keeper (see
// state.go): it renews the lease, and the other goroutines only report
// what they ran into (a failed command, a lost lease, a re-made
// subscription); one transition, the re-assert, repairs whatever may have
// diverged.
//
// # What is stored where
//
// Every key of one office carries the office's hash tag ({O}, or {~hex}
// when O holds a brace or starts with '~'), so on a Redis Cluster they
// share one slot and one script may touch them all:
//
//	a2c:{O}:m      hash sid -> "role|node|epoch|a2c_version|name": the members
//	a2c:{O}:s      hash seat -> sid: "a" the Agent seat, "c:<name>" a Computer name
//	a2c:{O}:v      the office's version, +1 per change
//	a2c:{O}:ev     channel: the office's membership events and broadcasts
//	a2c:{N}:idx    set: the offices where node N holds members
//	a2c:{N}:lease  node N's lease: its current epoch, with a TTL
//	a2c:{N}:ep     counter: node N's last epoch
//	a2c:{N}:ch     channel: frames for node N
//	a2c:nodes      set: registered node ids
//	a2c:cn:{name}  set: the offices holding a Computer of that name
//
// A node adds an office to its index before it takes a seat there, in a
// script that does so only while the lease holds the node's epoch and
// lives longer than the join's command deadline: the join script that
// follows thus runs before a sweeper can judge the node dead, so whatever
// the moment of a crash or a pause the index covers every seat the node
// holds and the sweep finds them all. It removes the office when its last
// member there has left (in Redis) and no join of its is under way, so the
// index, and the sweep of a dead node (pipelined, 256 offices per round
// trip), stays the size of what the node holds. The name index only tells "not in
// your office" (4104) from "not found" (404) on a request that cannot be
// routed; it is updated after the seat scripts, best effort.
//
// # The office rules
//
// A connection lives on one node, so whatever depends on the connection
// alone is decided there without Redis, as server/rooms.go decides it: a
// connection keeps the role of its first join; rejoining the seat it holds
// is a no-op success; an Agent in an office must leave before joining
// another; a member may not take a second name in its own office. What
// depends on the other members is decided by ONE Lua script per change,
// atomic in Redis: the join script refuses the Agent seat if another sid
// holds it ("Room already has an agent") and a Computer name held by
// another sid ("Computer name already in use in this office"), else writes
// the member and its seat, adds one to the version and publishes the
// entry on the office channel, all in one step. The leave script removes a
// member (only the caller's own, by node) the same way. Two clients racing
// for one seat on two nodes: Redis runs the two scripts one after the
// other, the first wins, the second gets the usual refusal. A Computer
// switching offices takes the new seat first, then leaves the old office
// (two scripts: on a Redis Cluster the two offices may live on different
// shards); nothing crosses offices, so no one can observe the order, and a
// refused switch leaves it where it was. [Node.Join] returns a [Decision]
// that mirrors server/rooms.go's joinDecision (Refuse/refuse,
// Already/already, SwitchOffice/switchOffice) with the same refusal texts.
// A seat held by a member of a node whose lease has expired but which no
// sweeper has reached yet is freed on the spot: the joining node sweeps
// that office for the dead node and tries once more.
//
// # The membership copy
//
// A node follows every office where it holds a member: it subscribes to
// the office channel first, changes the office, then reads a snapshot
// (one script: the version and every member). Each event carries the
// office's version after the change. The copy changes only by
// snapshots: an event whose version the copy has not reached is a hint,
// and the office is reloaded (a burst of events is one reload); older
// ones are ignored. The events come from scripts inside Redis and carry
// no seal, so a forged one must not change anything by itself. A
// subscription whose connection broke and was made again may have missed
// events with no later one to show it: every office it carries is
// reloaded. Reloads run on a loader goroutine
// of their own, never on the goroutine that receives frames. Changes
// found by a reload are reported as events too, so the server learns of
// a member that vanished while it was not listening. Requests are routed, list_room answered and broadcast
// destinations chosen from this copy ([Node.Lookup], [Node.Members],
// [Node.Nodes]) with no Redis command. The node stops following an office
// when it holds nobody there. The copy may lag a change made on another
// node a moment ago (its event is on the way): where that would show,
// the server reloads the office first ([Node.Refresh]): a request for a
// Computer missing from the copy, and server:list_room.
//
// # Traffic between nodes
//
// A request from an Agent on node A to a Computer on node B travels as one
// [Frame] of kind [KindRequest] that A publishes on B's channel
// a2c:{B}:ch; B checks that it holds that sid as a Computer of the frame's
// office, relays the request to the socket with the frame's deadline, and
// publishes the answer (or its own timeout or "disconnected" answer) as a
// [KindAnswer] frame on A's channel. That is two PUBLISH commands per
// cross-node call and nothing else: the target comes from A's copy. If B
// no longer holds the sid it answers [KindGone] and A answers "Computer
// disconnected" at once. A keeps its own deadline for the call (the same
// as on one node), so a frame lost with a dying node still ends in the
// usual timeout answer; a sweep of the target ([Event].Swept: its node
// died) ends A's waiting calls to it with the usual "Computer
// disconnected" answer at once. A plain leave does not: as on one server,
// a Computer that left its office may still answer on its connection (B
// answers KindGone if the connection closes, after any answer, on the
// same ordered queue). [Calls] keeps A's side: each call ends exactly
// once, by its answer (accepted only from the node the call went to and
// for its target; call ids start at random in each process, so a process
// that takes over a node id never takes a late answer to its
// predecessor's call), a gone frame, its target's sweep, its deadline or
// the node's shutdown. A request between two members of one node
// never reaches this package: it touches Redis zero times.
//
// notify:* events and server:tool_call_cancel go to the sender's own
// node's members directly, and as [KindBroadcast] frames to the other
// nodes; the receiving node delivers one to its members of that office
// except the sender. A notify:update_* is one frame on the office's
// channel ([Node.PublishOffice]), which every node following the office
// receives, so it reaches a member that joined on another node a moment
// ago. A cancel is one frame to each node of the sender's copy, on the
// same ordered queue as the requests to that node, so it never overtakes
// the call it cancels (a node not in the copy cannot have that call). Enter and leave
// notifications are not frames: each node turns the office events of
// other nodes' members into notify:enter_office / notify:leave_office for
// its own members of that office.
//
// On a Redis Cluster the node channel is a shard channel (SPUBLISH,
// SSUBSCRIBE) whose hash tag is the node id, and office events are
// published with SPUBLISH on the office's shard channel by the scripts
// (the channel shares the office's slot).
//
// # Subscriptions
//
// The node receives its channel and its offices' channels through its
// own subscription client (subscriber.go, with its own RESP reader,
// resp.go, which bounds every length it reads from Redis): one
// connection to a single Redis; on a Redis Cluster one connection per
// master that owns the slot of a followed channel, carrying all of them
// (a shard channel is served by its slot's master), so a node holds at
// most as many subscription connections as there are masters. A message
// is handed to the node with no allocation where it was read: with
// [Config].Poller (the server passes its Socket.IO event loop) a plain
// TCP connection is read on that loop, so a frame from another node is
// read, checked and written to its WebSocket by the goroutine that
// serves the WebSockets, with no goroutine to wake (the replies to the
// node's PUBLISH commands are read there too; see bench/RESULTS.md for
// what it saves); otherwise (rediss://, or no loop) on the connection's
// reader goroutine. A silent connection is pinged after 2 s and given up after
// 10 s; a broken one is made again and its channels subscribed again,
// after which the node reloads the offices they carry (their events in
// between are lost). A slot that moves to another master (Redis sends
// sunsubscribe, or answers -MOVED) is subscribed on its new master and
// reloaded the same way.
//
// # Frames
//
// A frame is binary: the byte 0xA1, the kind, four strings (from node,
// to sid, office, event) each prefixed by its length as a uvarint and at
// most [MaxField] bytes, the call id and the timeout in milliseconds as
// uvarints, then the payload to the end (the Socket.IO arguments, relayed
// byte for byte). [DecodeFrame] checks every length and every field and
// never trusts Redis content: From must be a node id and To a sid (1 to
// 128 letters, digits, '-', '_', '.'; To may be empty on a broadcast
// only), a request and a broadcast must name an office and an event, and
// every string is valid UTF-8 without control characters, so a hostile
// frame cannot make a node keep state under names of its choosing. It and
// the event parser are fuzzed.
//
// Between nodes that share a key ([Config].Key), every frame is sealed:
//
//	0xA2 kind from to office event call timeout_ms payload... boot seq ms mac
//
// the version byte 0xA2 and a fixed 40-byte trailer: the sender's boot id
// (8 random bytes drawn at the node's start), its sequence number (8
// bytes big-endian, +1 per frame, from 1), its clock in unix milliseconds
// (8 bytes) and a 16-byte MAC, HMAC-SHA256 with the key truncated to 128
// bits, over the channel the frame is published on (its length as a
// uvarint, then its bytes) followed by every byte before the MAC. The
// receiver checks the seal before it parses anything, and drops the frame
// unless the MAC matches (compared in constant time), the time is within
// 30 s of its own clock either way, and the sequence number is new for
// that boot id on that channel: a sliding window of 4096 numbers per
// sender and channel (a sender numbers all its frames with one counter,
// and two channels may deliver out of order), a number seen or older
// than the window is refused; at most 8192 windows are kept, the one
// used least recently forgotten first. Binding the
// channel stops a frame sealed for one node (or office) from being
// replayed on another's. A frame written again by the publisher (a retry
// after a broken connection, or one that waited more than a second in
// its backlog) is sealed again, with a new number and time. With a key an
// unsealed (0xA1) frame is refused; without one only unsealed frames are
// accepted. Every refusal is counted by reason ([Node.Refused]: mac,
// stale, replay, unsealed, malformed) and logged at Warn at most once per
// 10 s per reason, with no byte of the frame. Sealing and opening a frame
// of 200 bytes costs about 0.7 µs together, with no allocation.
//
// # Security
//
// Redis is the cluster's trust boundary, and there are two walls. The
// first is the cluster key: whoever may PUBLISH on the Redis but does not
// have the key cannot make a node deliver anything (a forged, altered,
// replayed or redirected frame is refused, and a captured frame is
// worthless 30 s later). What the key does not cover: office events and
// the stored membership are written by Lua scripts inside Redis, which
// cannot hold the key. A node therefore takes an office event only as a
// hint to read the office's keys again (see the membership copy): a
// forged event costs a reload and changes nothing. A client with write
// access to the a2c:* keys can still fake or erase memberships (enter and
// leave notifications, routing to a sid the target node then refuses to
// serve). The key gives integrity, not confidentiality or availability:
// whoever may SUBSCRIBE reads the frames (tool arguments and results),
// and whoever may PUBLISH can make Redis drop a node's subscription (a
// message over its client-output-buffer-limit pubsub), losing the frames
// meanwhile. A receiver that restarted less than 30 s ago has no replay
// window for its senders yet. A Redis Cluster node's -MOVED and CLUSTER
// SLOTS answers are followed with the same credentials. The second wall is Redis itself: a user of its own for the nodes
// (ACL SETUSER a2c on >PASSWORD resetkeys ~a2c:* resetchannels &a2c:*
// +@all -@dangerous, plus +cluster|slots on a Redis Cluster), TLS
// (rediss://), and no other client that may write a2c:*.
//
// # Backlogs
//
// Every frame waiting to be published to another node counts against one
// bound per node, [Config].MaxBacklog (64 MiB by default), by
// [FrameCost] (its bytes plus a fixed 256 for what holds it): the
// publisher's backlog and unanswered frames ([Node.Send] counts them
// itself), and the server's own queues through [Node.Reserve] and
// [Node.Release]. A frame that would pass the bound fails at once with
// [ErrBacklogFull] (which wraps [ErrUnavailable]); the server answers the
// Agent's call with a 500 ("Cluster backlog full: the hub's Redis is not
// keeping up; try again later").
//
// # Failures
//
// A node dies: see liveness above. Its clients reconnect through the load
// balancer to another node and join again.
//
// Redis unreachable (a command fails, or the lease cannot be renewed):
// the node is cut off. It keeps relaying between the members it holds
// and routing by its copy; frames to other nodes fail and those calls end
// in the usual answers. A join is refused with [RefuseUnavailable]
// instead of guessing at the office rules ([Node.Join] returns
// [ErrUnavailable]); a leave is applied locally at once. When the lease
// is renewed again, the node re-asserts: it runs the join script for
// every member it holds under its epoch (a no-op for those still seated),
// removes its records for members it no longer holds, and reloads every
// office it follows. If another client took a seat in the meantime
// (because this node's lease expired and it was swept), the member here
// is evicted ([Handler].Evicted): the server drops its membership, as if
// it had left.
//
// Lease lost (Redis restarted empty, or the node was cut off or paused
// for longer than its lease and may have been swept): the node registers
// again under a new epoch and re-asserts as above, so the cluster-wide
// state is rebuilt by the nodes themselves within a heartbeat or two. The
// other nodes may re-assert a little later, so the node settles for
// LeaseTTL: it refuses joins (a newcomer could take the seat of a live
// member not re-asserted yet), ignores office events and defers its
// reloads (a snapshot would show those members as gone), and sweeps
// nobody; then it reloads every office it follows. A join takes its seat
// only under a live lease of the node's epoch (the index script), so a
// join that arrives before the keeper has noticed a lost lease is refused
// too. A sweeper judges nobody while cut off from Redis, for two
// heartbeats after it is back, or when its own lease ran out as well
// (every lease expired during the outage, live nodes' included).
//
// A subscription re-made after its connection broke: the offices it
// carries are reloaded (see the membership copy). Frames published on the
// node channel while it was down are lost: those calls end at their
// deadline, as with a frame lost with a dying node.
//
// Upgrading from a release whose member records had no epoch
// ("role|node|a2c_version|name"): stop every node, then start the new
// release; the two formats do not mix in one cluster.
package cluster
