//go:build unix

package transfer

import (
	"io/fs"
	"syscall"
)

// openFlags keeps opening a FIFO from blocking before its type is seen.
const openFlags = syscall.O_NONBLOCK

// inode is fi's inode number, 0 when unknown.
func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}

// ownerOf is fi's owner, nil when unknown.
func ownerOf(fi fs.FileInfo) *owner {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return &owner{uid: int(st.Uid), gid: int(st.Gid)}
	}
	return nil
}
