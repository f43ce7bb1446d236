package watch

// Event types: the FileWatchEventType enum.
const (
	TypeCreate = "create"
	TypeWrite  = "write"
	TypeRemove = "remove"
	TypeRename = "rename"
	TypeChmod  = "chmod"
)

// eventTypes lists the enum in its published order.
var eventTypes = []string{TypeCreate, TypeWrite, TypeRemove, TypeRename, TypeChmod}

// Watcher statuses (the published API leaves them open).
const (
	StatusActive   = "active"   // running
	StatusReleased = "released" // DELETE released one subscriber; others remain
	StatusStopped  = "stopped"  // the watcher ended
)

// FileWatchEvent is one change. Seq counts from 1 per watcher; the
// attributes are the path's at the time the event was emitted and null
// when it no longer exists (always for a remove). OldPath is set on
// renames only. Timestamp and Mtime are Unix seconds.
type FileWatchEvent struct {
	Seq          uint64   `json:"seq"`
	Type         string   `json:"type"`
	Path         string   `json:"path"`
	RelativePath *string  `json:"relative_path"`
	OldPath      *string  `json:"old_path"`
	IsDir        bool     `json:"is_dir"`
	Timestamp    float64  `json:"timestamp"`
	Mtime        *float64 `json:"mtime"`
	Size         *uint64  `json:"size"`
	Inode        *uint64  `json:"inode"`
}

// CreateWatchRequest is the body of POST /v2/watch and POST
// /v1/file/watch. Absent fields take their defaults: Recursive true,
// Debounce 300 ms (50–5000), Exclude [DefaultExclude] (a given list, even
// an empty one, replaces it), IncludePatterns none (report everything).
type CreateWatchRequest struct {
	Path            string    `json:"path" serde:"required"`
	Recursive       *bool     `json:"recursive"`
	Exclude         *[]string `json:"exclude"`
	Debounce        *uint64   `json:"debounce"`
	IncludePatterns []string  `json:"include_patterns"`
}

// WatcherCreatedResult answers a create. InitialCursor is where "events
// from now on" start: 0 for a new watcher, its latest seq when reused.
type WatcherCreatedResult struct {
	WatcherID     string  `json:"watcher_id"`
	Path          string  `json:"path"`
	Status        string  `json:"status"`
	CreatedAt     float64 `json:"created_at"`
	Reused        bool    `json:"reused"`
	InitialCursor uint64  `json:"initial_cursor"`

	// warning, when set, is the envelope's message: the watcher runs but
	// does not watch its whole tree (the published result has no field
	// for it).
	warning string
}

// WatcherInfo is one entry of the watcher list. EventCount is how many
// events the watcher keeps now.
type WatcherInfo struct {
	WatcherID       string  `json:"watcher_id"`
	Path            string  `json:"path"`
	Recursive       bool    `json:"recursive"`
	Status          string  `json:"status"`
	SubscriberCount int     `json:"subscriber_count"`
	EventCount      int     `json:"event_count"`
	LatestSeq       uint64  `json:"latest_seq"`
	CreatedAt       float64 `json:"created_at"`
}

// PollWatchRequest is a poll: the query of GET /v2/watch/{id}/poll and
// the body of POST /v1/file/watch/{id}/poll. Cursor 0 replays the kept
// history, a cursor past the latest seq counts as the latest; Limit
// 1–1000 (100); Timeout 0–60 s (0), how long to wait for the first event.
// A limit or timeout out of range is a 400.
type PollWatchRequest struct {
	Cursor  *uint64 `json:"cursor"`
	Limit   *uint64 `json:"limit"`
	Timeout *uint64 `json:"timeout"`
}

// PollWatchResult answers a poll: the events after the cursor, the
// cursor to pass next, and whether events in between were lost.
type PollWatchResult struct {
	Events   []FileWatchEvent `json:"events"`
	Cursor   uint64           `json:"cursor"`
	Overflow bool             `json:"overflow"`
}

// WatcherStoppedResult answers a DELETE.
type WatcherStoppedResult struct {
	WatcherID string `json:"watcher_id"`
	Status    string `json:"status"`
}

// WaitWatchRequest is POST /v1/file/watch/wait: wait up to Timeout
// seconds (30) for one event of EventTypes (all when empty) on Path, a
// file (which need not exist yet) or a directory (an event on it or on
// an entry directly in it).
type WaitWatchRequest struct {
	Path       string   `json:"path" serde:"required"`
	Timeout    *uint64  `json:"timeout"`
	EventTypes []string `json:"event_types"`
}

// WaitWatchResult answers a wait with the event that ended it.
type WaitWatchResult struct {
	Event FileWatchEvent `json:"event"`
}
