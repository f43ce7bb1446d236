// Package account resolves the account a request names (`user`, or
// AIO_DEFAULT_USER) for every aiod plane: whom a command, a terminal or a
// kernel runs as, and who owns the files a write creates. One place
// decides the rules and their wording: the daemon's own account needs no
// switch; any other needs a daemon running as root.
package account
