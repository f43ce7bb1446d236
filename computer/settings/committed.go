package settings

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// The local scope (.tfrobot/settings.local.json) is the operator's own
// because git ignores it: it may approve the working directory's
// servers, enable plugins as the operator and set landingRoot. A
// repository that commits the file would approve itself, so a local
// file that git tracks is read as the project's (its trusted keys
// dropped with an error), and [Layer.Committed] says so.

// committedCache remembers tracked answers by file, size and time, so
// that the Projector's loads do not run git each time.
var committedCache sync.Map // key string → bool

// gitTracked reports whether git tracks the file path (false where there
// is no git, no repository, or git does not answer within 5 s).
func gitTracked(path string) bool {
	st, err := os.Stat(path)
	if err != nil {
		return false
	}
	key := path + "\x00" + strconv.FormatInt(st.ModTime().UnixNano(), 10) + "\x00" + strconv.FormatInt(st.Size(), 10)
	if v, ok := committedCache.Load(key); ok {
		return v.(bool)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "-C", filepath.Dir(path), "ls-files", "--error-unmatch", "--", filepath.Base(path))
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0")
	tracked := cmd.Run() == nil
	committedCache.Store(key, tracked)
	return tracked
}
