// Package cli implements the a2c command: flag parsing, wiring and output
// for each subcommand. cmd/a2c only calls [Main].
package cli
