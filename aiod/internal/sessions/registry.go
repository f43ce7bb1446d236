package sessions

import (
	"sync"
	"time"
)

// Session is what a [Registry] holds.
type Session interface {
	// LastUsed is when the session last finished work (its creation
	// before that); eviction picks the oldest.
	LastUsed() time.Time
	// Expire ends the session if it is not working and has been idle at
	// least idle (0: any idle session), atomically with respect to its
	// own work (a run starting meanwhile wins), and reports whether it
	// ended. The registry calls it outside its lock.
	Expire(idle time.Duration) bool
}

// Tier is one class of sessions in a registry.
type Tier struct {
	// Max caps the tier's sessions, reservations included (0: no cap).
	Max int
	// Idle is how long a session may stay idle before [Registry.Reclaim]
	// ends it (0: never).
	Idle time.Duration
	// Evict: a full tier ends its least recently used idle session to
	// make room; when every session works (or Evict is false) Open
	// refuses with Full.
	Evict bool
	// Full is the refusal of a full tier (a plane's *api.Error).
	Full error
}

type entry[S Session] struct {
	s   S
	seq uint64 // creation order
}

// key names a session: its tier and id.
type key struct{ tier, id string }

// Registry holds sessions by tier and id. Every method is safe for
// concurrent use; none calls a Session method under its lock.
type Registry[S Session] struct {
	mu       sync.Mutex
	tiers    map[string]Tier
	m        map[key]entry[S]
	reserved map[string]int
	seq      uint64
}

// NewRegistry returns a registry with the given tiers.
func NewRegistry[S Session](tiers map[string]Tier) *Registry[S] {
	return &Registry[S]{tiers: tiers, m: map[key]entry[S]{}, reserved: map[string]int{}}
}

// Get returns session id of tier.
func (r *Registry[S]) Get(tier, id string) (S, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[key{tier, id}]
	return e.s, ok
}

// count is the tier's sessions and reservations; r.mu held.
func (r *Registry[S]) count(tier string) int {
	n := r.reserved[tier]
	for k := range r.m {
		if k.tier == tier {
			n++
		}
	}
	return n
}

// room makes room for one more session of tier. On success it returns
// nil with r.mu HELD, so the caller adds the session in the same
// critical section that saw the room (no second request can take it);
// on failure r.mu is not held. Under the cap there is room; a full
// evicting tier ends its least recently used session that agrees to
// expire (each tried once, outside the lock) and looks again.
func (r *Registry[S]) room(tier string) error {
	t := r.tiers[tier]
	tried := map[key]bool{}
	for {
		r.mu.Lock()
		if t.Max <= 0 || r.count(tier) < t.Max {
			return nil // r.mu stays held for the caller
		}
		var victim key
		var v S
		var oldest time.Time
		found := false
		var cands []entry[S]
		var keys []key
		for k, e := range r.m {
			if k.tier == tier && !tried[k] {
				cands, keys = append(cands, e), append(keys, k)
			}
		}
		r.mu.Unlock()
		if !t.Evict || len(cands) == 0 {
			return t.Full
		}
		for i, e := range cands { // LastUsed outside the lock
			if lu := e.s.LastUsed(); !found || lu.Before(oldest) {
				victim, v, oldest, found = keys[i], e.s, lu, true
			}
		}
		tried[victim] = true
		// Expire the candidate itself, not whatever holds its id now: a
		// concurrent eviction or close may have removed it (and a new
		// session may have taken the id) since the snapshot. Expire of a
		// session that has already ended reports whether it is ended, and
		// Remove deletes only this very value.
		if cur, ok := r.Get(victim.tier, victim.id); !ok || any(cur) != any(v) {
			continue // gone meanwhile: the count is looked at again
		}
		if v.Expire(0) {
			r.Remove(victim.tier, victim.id, v)
		}
	}
}

// Open returns session id of tier, creating it with newS under the
// tier's cap when there is none (created true). A full tier evicts or
// refuses with its Full error (see [Tier]). newS runs under the
// registry's lock: it must only build the value (start processes
// later, outside).
func (r *Registry[S]) Open(tier, id string, newS func() S) (s S, created bool, err error) {
	if s, ok := r.Get(tier, id); ok {
		return s, false, nil
	}
	if err := r.room(tier); err != nil {
		return s, false, err
	}
	defer r.mu.Unlock()                  // held by room
	if e, ok := r.m[key{tier, id}]; ok { // another request created it meanwhile
		return e.s, false, nil
	}
	r.seq++
	s = newS()
	r.m[key{tier, id}] = entry[S]{s: s, seq: r.seq}
	return s, true, nil
}

// Reservation is a slot of a tier held for a session not yet named.
type Reservation[S Session] struct {
	r    *Registry[S]
	tier string
	done bool
}

// Reserve holds a slot of tier under its cap (evicting or refusing as
// Open does) until the reservation is filled or released.
func (r *Registry[S]) Reserve(tier string) (*Reservation[S], error) {
	if err := r.room(tier); err != nil {
		return nil, err
	}
	r.reserved[tier]++
	r.mu.Unlock() // held by room
	return &Reservation[S]{r: r, tier: tier}, nil
}

// Fill turns the slot into session id; false (and the slot released)
// when the id is taken.
func (v *Reservation[S]) Fill(id string, s S) bool {
	r := v.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if v.done {
		return false
	}
	v.done = true
	r.reserved[v.tier]--
	if _, taken := r.m[key{v.tier, id}]; taken {
		return false
	}
	r.seq++
	r.m[key{v.tier, id}] = entry[S]{s: s, seq: r.seq}
	return true
}

// Release frees an unfilled slot; it does nothing after Fill or Release.
func (v *Reservation[S]) Release() {
	r := v.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if !v.done {
		v.done = true
		r.reserved[v.tier]--
	}
}

// Remove forgets session id of tier if it is still s (a later session
// under the same id stays), reporting whether it did. Ending s is the
// caller's.
func (r *Registry[S]) Remove(tier, id string, s S) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := key{tier, id}
	if e, ok := r.m[k]; ok && any(e.s) == any(s) {
		delete(r.m, k)
		return true
	}
	return false
}

// Take removes and returns the sessions match selects (tier "" is every
// tier; match nil selects all of it), oldest first; ending them is the
// caller's.
func (r *Registry[S]) Take(tier string, match func(id string) bool) []S {
	r.mu.Lock()
	defer r.mu.Unlock()
	var es []entry[S]
	for k, e := range r.m {
		if (tier == "" || k.tier == tier) && (match == nil || match(k.id)) {
			es = append(es, e)
			delete(r.m, k)
		}
	}
	return sorted(es)
}

// List returns the sessions of tier ("" for all), oldest first.
func (r *Registry[S]) List(tier string) []S {
	r.mu.Lock()
	defer r.mu.Unlock()
	var es []entry[S]
	for k, e := range r.m {
		if tier == "" || k.tier == tier {
			es = append(es, e)
		}
	}
	return sorted(es)
}

// Len is the number of sessions of tier, reservations not counted.
func (r *Registry[S]) Len(tier string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count(tier) - r.reserved[tier]
}

func sorted[S Session](es []entry[S]) []S {
	for i := 1; i < len(es); i++ { // few sessions: insertion sort by creation
		for j := i; j > 0 && es[j].seq < es[j-1].seq; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
	out := make([]S, len(es))
	for i, e := range es {
		out[i] = e.s
	}
	return out
}

// Reclaim ends the sessions idle past their tier's Idle and forgets
// them, returning those it ended. The owner calls it periodically.
func (r *Registry[S]) Reclaim() []S {
	type cand struct {
		k key
		s S
	}
	r.mu.Lock()
	var cs []cand
	for k, e := range r.m {
		if r.tiers[k.tier].Idle > 0 {
			cs = append(cs, cand{k, e.s})
		}
	}
	r.mu.Unlock()
	var ended []S
	for _, c := range cs {
		if c.s.Expire(r.tiers[c.k.tier].Idle) {
			r.Remove(c.k.tier, c.k.id, c.s)
			ended = append(ended, c.s)
		}
	}
	return ended
}
