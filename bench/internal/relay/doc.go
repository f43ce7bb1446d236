// Package relay drives the Agents of the relay benchmarks (bench/a2c/load
// and bench/a2c/cluster): each sends client:tool_call back to back, its
// next call from the callback of the previous answer, on the client's
// reader goroutine, so the client adds no goroutine hand-off of its own.
package relay
