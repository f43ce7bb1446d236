// Package jsonscan scans JSON strings fast: the one place where the
// project's hand-written JSON readers (the Socket.IO engine's packet
// validator, smcp's one-pass client:put_blob decoder) find where a string
// ends and whether it is well-formed. It is a parser of untrusted input:
// String is fuzzed against a byte-at-a-time reference, HasControl against
// the obvious loop.
package jsonscan
