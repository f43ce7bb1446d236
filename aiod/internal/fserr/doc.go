// Package fserr is aiod's structured file error: the object every failed
// file operation answers with (errno, errno_name, error_type,
// exception_type, message, operation, path, retryable), its taxonomy of
// error_type values, the Rust std::io wording of its messages, and the
// HTTP status each error_type maps to on /v2/fs (v1 answers 200 with
// success false).
package fserr
