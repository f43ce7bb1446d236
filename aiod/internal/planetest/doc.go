// Package planetest serves an aiod plane for the planes' own tests: on a
// real loopback HTTP server, closed with the plane when the test ends,
// and talked to by a JSON client.
package planetest
