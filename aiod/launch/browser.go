package launch

import (
	"os"
	"os/exec"
)

// EnvBrowserExecutable names the Chromium executable to use
// (BROWSER_EXECUTABLE_PATH).
const EnvBrowserExecutable = "BROWSER_EXECUTABLE_PATH"

// wellKnownBrowsers are where Debian's and Google's packages install a
// Chromium, in the order they are tried.
var wellKnownBrowsers = []string{"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome", "/opt/google/chrome/chrome"}

// browserNames are looked up on PATH last.
var browserNames = []string{"chromium", "chromium-browser", "google-chrome", "chrome"}

// Where a browser executable was found ([Browser.Source]), as
// capabilities.browser.executable_source says it.
const (
	SourceEnv       = "env"
	SourceWellKnown = "wellknown"
	SourcePath      = "path"
)

// Browser is a Chromium executable found by [FindBrowser].
type Browser struct {
	Path   string
	Source string // SourceEnv, SourceWellKnown or SourcePath
}

// BrowserPackage is the Debian package that provides Chromium.
const BrowserPackage = "chromium"

// MissingError is a program the daemon needs that is not installed. Its
// text names the Debian package that provides it.
type MissingError struct {
	Program string // "Chromium", "Xvfb"
	Package string // "chromium", "xvfb"
	Detail  string // what was looked at
}

func (e *MissingError) Error() string {
	s := "no " + e.Program + " executable"
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s + "; install it with: apt-get install " + e.Package
}

// FindBrowser is the one rule for finding Chromium, shared by the
// capability probe, aiod doctor and aiod --browser: BROWSER_EXECUTABLE_PATH
// when set (and then only it: a named executable that is missing is an
// error, never silently replaced), else the first of [wellKnownBrowsers]
// that exists, else chromium, chromium-browser, google-chrome or chrome
// on PATH. Nothing found is a *[MissingError] naming the package.
func FindBrowser(getenv func(string) string) (Browser, error) {
	if e := getenv(EnvBrowserExecutable); e != "" {
		if executable(e) {
			return Browser{Path: e, Source: SourceEnv}, nil
		}
		return Browser{}, &MissingError{Program: "Chromium", Package: BrowserPackage,
			Detail: EnvBrowserExecutable + "=" + e + " is not an executable file"}
	}
	for _, p := range wellKnownBrowsers {
		if executable(p) {
			return Browser{Path: p, Source: SourceWellKnown}, nil
		}
	}
	for _, n := range browserNames {
		if p, err := exec.LookPath(n); err == nil {
			return Browser{Path: p, Source: SourcePath}, nil
		}
	}
	return Browser{}, &MissingError{Program: "Chromium", Package: BrowserPackage,
		Detail: "looked for " + EnvBrowserExecutable + ", /usr/bin/chromium and chromium on PATH"}
}

// executable reports whether p is a regular file someone may execute.
func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// BrowserOptions shape Chromium's command line ([BrowserArgs]).
type BrowserOptions struct {
	// Profile is the --user-data-dir.
	Profile string
	// Headful runs it on the X display of its DISPLAY instead of
	// headless.
	Headful bool
	// NoDevShm keeps Chromium's shared memory out of /dev/shm, which a
	// sandbox's view does not have.
	NoDevShm bool
}

// BrowserArgs is Chromium's command line (without the program): DevTools
// over the pipe of its fds 3 and 4 (--remote-debugging-pipe, served by a
// [CDPMux]) and no TCP port, a private profile, a 1280x720 window,
// no first-run work, no background traffic to Google (component updates,
// sync, safe-browsing lists, metrics), and about:blank as the first tab.
// --no-sandbox: Chromium's own sandbox needs user namespaces or a setuid
// helper that a container or aiod's sandbox does not give it; aiod's
// isolation is what contains it.
func BrowserArgs(o BrowserOptions) []string {
	args := []string{
		"--no-sandbox",
		"--remote-debugging-pipe",
		"--user-data-dir=" + o.Profile,
		"--window-size=1280,720",
		"--no-first-run",
		"--no-default-browser-check",
		"--disable-background-networking",
		"--disable-component-update",
		"--disable-sync",
		"--disable-breakpad",
		"--disable-domain-reliability",
		"--metrics-recording-only",
		"--password-store=basic",
		"--use-mock-keychain",
	}
	if !o.Headful {
		args = append(args, "--headless=new")
	}
	if o.NoDevShm {
		args = append(args, "--disable-dev-shm-usage")
	}
	return append(args, "about:blank")
}
