// Package redistest starts real redis-server processes (a single server,
// or a Redis Cluster of three masters) on loopback ports for the tests of
// the packages that talk to Redis (the server's cluster side). Each
// process belongs to the test that started it and stops with it. It is
// for tests only.
package redistest
