// Package harness is the black-box suites' shared machinery: it builds the
// real binaries once per test process, starts them on random loopback
// ports, reads their first log line for the address, stops them with
// SIGTERM and checks that they exit cleanly, and turns an external
// scenario script's PASS/FAIL lines into subtests.
package harness
