package watch

import "sort"

// history is a watcher's numbered events: the last max of them in a
// ring, plus the seqs skipped for lost events (holes).
type history struct {
	buf     []FileWatchEvent
	head    int // index of the oldest kept event once buf is full
	max     int
	latest  uint64   // the last seq handed out (events and holes)
	trimmed uint64   // the highest seq no longer kept
	holes   []uint64 // seqs that stand for lost events, above trimmed
}

func (h *history) len() int { return len(h.buf) }

func (h *history) at(i int) *FileWatchEvent { return &h.buf[(h.head+i)%len(h.buf)] }

// add numbers e and keeps it, dropping the oldest event past max.
func (h *history) add(e FileWatchEvent) {
	h.latest++
	e.Seq = h.latest
	if len(h.buf) < h.max {
		h.buf = append(h.buf, e)
		return
	}
	h.trimmed = h.buf[h.head].Seq
	h.buf[h.head] = e
	h.head = (h.head + 1) % len(h.buf)
	for len(h.holes) > 0 && h.holes[0] <= h.trimmed {
		h.holes = h.holes[1:]
	}
}

// lose spends one seq on events that were lost.
func (h *history) lose() {
	h.latest++
	h.holes = append(h.holes, h.latest)
}

// since returns up to limit events after cursor, the cursor to pass
// next, and whether events between cursor and that next cursor were lost
// (trimmed or never recorded). A cursor past the latest seq counts as
// the latest.
func (h *history) since(cursor uint64, limit int) ([]FileWatchEvent, uint64, bool) {
	cursor = min(cursor, h.latest)
	n := h.len()
	i := sort.Search(n, func(i int) bool { return h.at(i).Seq > cursor })
	j := min(n, i+max(limit, 1))
	evs := make([]FileWatchEvent, 0, j-i)
	for k := i; k < j; k++ {
		evs = append(evs, *h.at(k))
	}
	next := h.latest
	if j < n {
		next = h.at(j - 1).Seq
	}
	overflow := cursor < h.trimmed
	for _, s := range h.holes {
		if s > cursor && s <= next {
			overflow = true
		}
	}
	return evs, next, overflow
}
