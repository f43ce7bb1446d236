package a2c

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsole drives the hub's web console in Debian's Chromium (see
// server/console).
func TestConsole(t *testing.T) {
	_ = chromedp.NewContext
	t.Skip("the console's browser tests are not written yet")
}
