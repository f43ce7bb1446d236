// Package serde reproduces the validation error texts of Rust's serde_json
// and serde_urlencoded, as aiod (the Rust sandbox daemon) reports them in its
// 422 answers. Clients match on that text, so the Go port must produce it
// byte for byte.
//
// Decode models serde_json::from_slice of a #[derive(Deserialize)] struct
// (no deny_unknown_fields, optional fields are Option<T>); DecodeQuery models
// serde_urlencoded::from_str of the same kind of struct.
package serde
