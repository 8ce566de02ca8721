// Package integration holds process-level tests: they build the ctrlnode
// binary from the tree, run it as a user would, and drive it from outside
// with real signals. Run them with `go test ./integration/...`; they are
// part of `make test`.
package integration
