// Package launch starts and supervises the programs behind aiod's
// browser and desktop planes when the daemon is asked to run them itself
// (aiod --browser, aiod --desktop): Debian's Chromium, headless or on
// the X display, with DevTools over its pipe (no TCP port; [CDPMux]
// serves it at /cdp and to the browser plane) and a private profile; Xvfb, a
// window manager and the computer-use worker. Each program is restarted
// when it dies and ended with its owner, in the sandbox under isolation.
package launch
