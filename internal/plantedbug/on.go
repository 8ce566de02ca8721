//go:build plantedbugs

package plantedbug

import (
	"fmt"
	"os"
)

// Built reports whether this binary can plant bugs (it was built with
// -tags plantedbugs).
const Built = true

func init() {
	if b := os.Getenv(Env); b != "" {
		fmt.Fprintf(os.Stderr, "PLANTED BUG %q IS ON: a test build (-tags plantedbugs) with %s set\n", b, Env)
	}
}

// On reports whether bug b is switched on: Env names it.
func On(b Bug) bool { return os.Getenv(Env) == string(b) }
