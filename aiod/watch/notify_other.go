//go:build !linux

package watch

import (
	"io/fs"
	"log/slog"
)

// inotify record flags; without inotify no record ever carries them.
const (
	inCreate = 1 << iota
	inModify
	inAttrib
	inDelete
	inMovedFrom
	inMovedTo
	inDeleteSelf
	inMoveSelf
	inIsDir
)

// notifier is a stand-in: watching is Linux-only.
type notifier struct{}

func newNotifier(*slog.Logger) (*notifier, error)  { return nil, errUnsupported }
func (*notifier) add(*watcher, string) error       { return errUnsupported }
func (*notifier) drop(*watcher, func(string) bool) {}
func (*notifier) Close()                           {}
func (*notifier) count(*watcher) int               { return 0 }
func (*notifier) seen() int64                      { return 0 }
func (*notifier) paths(*watcher) []string          { return nil }
func inodeOf(fs.FileInfo) *uint64                  { return nil }

// mountTable is a stand-in: no filesystem counts as a pseudo one.
type mountTable struct{}

func (*mountTable) refresh()                     {}
func (*mountTable) sandboxed()                   {}
func (*mountTable) pseudoEntry(fs.DirEntry) bool { return false }
func (*mountTable) pseudoPath(string) bool       { return false }
