//go:build !plantedbugs

package plantedbug

// Built reports whether this binary can plant bugs (it was built with
// -tags plantedbugs).
const Built = false

// On reports whether bug b is switched on: never, in a build without the
// plantedbugs tag, whatever Env says.
func On(Bug) bool { return false }
