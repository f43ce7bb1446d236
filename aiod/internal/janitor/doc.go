// Package janitor is the background goroutine a plane owns for its
// housekeeping (idle reclaim, reaping): started with the plane, stopped
// by its Close, never left running.
package janitor
