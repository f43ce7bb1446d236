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
func inodeOf(fs.FileInfo) *uint64                  { return nil }
