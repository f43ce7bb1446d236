package harness

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Playwright runs test/interop/a2c/node/cdp_title.js: Playwright's
// connectOverCDP to cdpURL (with key as x-api-key, when given), which
// opens page and prints its title as JSON. It returns that answer and
// the script's exit error; node or playwright-core missing is a missing
// peer.
func Playwright(t *testing.T, cdpURL, page string, key ...string) (map[string]string, error) {
	t.Helper()
	dir := filepath.Join(Root(), "test", "interop", "a2c", "node")
	if _, err := exec.LookPath("node"); err != nil {
		MissingPeer(t, "node (Debian package nodejs)")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core")); err != nil {
		MissingPeer(t, "playwright-core (npm ci in test/interop/a2c/node)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"cdp_title.js", cdpURL, page}, key...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1")
	out, err := cmd.Output()
	var res map[string]string
	if jerr := json.Unmarshal(out, &res); jerr != nil {
		t.Fatalf("cdp_title.js printed %q (%v, exit %v)", out, jerr, err)
	}
	return res, err
}
