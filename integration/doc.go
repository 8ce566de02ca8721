// Package integration holds process-level tests: they build the ctrlnode
// binary from the tree, run it as a user would, and drive it from outside
// with real signals. Run them with `go test ./integration/...`; they are
// part of `make test`. The tests run four at once (TestMain; -parallel
// overrides it), each on ports reserved for it (freePortBase) and in its
// own directories: a new test must take its ports from freePortBase too.
package integration
