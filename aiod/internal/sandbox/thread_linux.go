package sandbox

import "runtime"

// init keeps the main goroutine on the process's main thread for the
// life of every binary that can run a sandbox. The sandbox's threads
// join its mount namespace (see enter), and a locked goroutine may
// otherwise be scheduled onto the main thread, which Go never ends: the
// main thread would stay in the sandbox's namespaces, and with it the
// process's own /proc/self view (/proc/self/mountinfo, /proc/self/cgroup
// describe the thread group leader), which the daemon reads on the host.
// Locking the main goroutine to it in an init function keeps every
// other goroutine, the sandbox's included, off it.
func init() {
	runtime.LockOSThread()
}
