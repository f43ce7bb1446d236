//go:build !linux

package blob

// noFollow is 0 where the open flag is not portable.
const noFollow = 0

// renameNoReplace renames src to dst unless dst exists (then an error
// matching fs.ErrExist), through a hard link and an unlink.
func renameNoReplace(src, dst string) error { return linkNoReplace(src, dst) }
