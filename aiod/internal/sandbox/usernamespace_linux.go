package sandbox

// InUserNamespace reports whether the process runs in a user namespace
// of its own (ReexecUnprivileged): there one account exists, and every
// sandbox's processes run as it.
func InUserNamespace() bool {
	_, ok := userNSHost()
	return ok
}
