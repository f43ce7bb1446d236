// Package blob is the Computer's blob channel: content too large to inline
// in a result is kept in a [Store] behind an opaque handle, and read back
// chunk by chunk through client:get_blob.
//
// A handle is unforgeable (an HMAC under a key that never leaves the
// process) and bound to the scope it was minted for (the Agent it was
// minted for), and it is re-authorised on every read: a handle from
// another scope or a guessed one is refused, and nothing outside the store
// can be read through it. Content is evicted after a time to live or when
// the store is full, after which its handle answers "gone".
package blob
