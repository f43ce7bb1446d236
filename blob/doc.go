// Package blob is the Computer's blob channel, both ways.
//
// Downloads (client:get_blob): content too large to inline in a result is
// kept in a [Store] behind an opaque handle, and read back chunk by chunk.
// A handle is unforgeable (an HMAC under a key that never leaves the
// process) and bound to the scope it was minted for (the Agent it was
// minted for), and it is re-authorised on every read: a handle from
// another scope or a guessed one is refused, and nothing outside the store
// can be read through it. Content is evicted after a time to live or when
// the store is full, after which its handle answers "gone".
//
// Uploads (client:put_blob, A2C-SMCP 0.4.0): a [Landing] receives an
// Agent's file chunk by chunk into a landing root on disk, checks its size
// and SHA-256, and moves it, never replacing a file, to
// <root>/<upload_id>[_<name>]. Its sessions are bounded in size, number
// and idle time; every refusal is a 4019 ErrorPayload whose
// details.reason says why (see [Landing.Accept] and [Pending.Finish]).
package blob
