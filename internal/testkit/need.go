package testkit

import (
	"fmt"
	"os"
	"strconv"
	"testing"
)

// CI reports whether the tests run in CI: the environment variable CI is
// true (CI=true, as GitHub Actions and GitLab set it; CI=1 too). There
// everything a test needs is installed first (make deps), so a need that
// is still missing is a broken CI host, not a reason to skip.
func CI() bool {
	v, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && v
}

// Need ends the test when something it needs is missing here: err says
// why (nil: it is there, and Need returns). Outside CI the test skips
// saying so; with CI=true it fails with the same message, so a CI run
// cannot pass by silently skipping.
func Need(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		Missing(t, what, err.Error())
	}
}

// Missing ends the test because what it needs is missing, for why: it
// skips, or with CI=true fails. It does not return.
func Missing(t testing.TB, what, why string) {
	t.Helper()
	if CI() {
		t.Fatalf("%s", missingMessage(what, why))
	}
	t.Skipf("%s", missingMessage(what, why))
}

// NeedInCI is for a test that can still run without what it needs, doing
// less (a fault-injection run without its network faults, say): with
// CI=true a missing need (err != nil) fails the test; otherwise NeedInCI
// logs it and returns false, and the caller goes on without it.
func NeedInCI(t testing.TB, what string, err error) bool {
	t.Helper()
	if err == nil {
		return true
	}
	if CI() {
		t.Fatalf("%s", missingMessage(what, err.Error()))
	}
	t.Logf("%s is missing, going on without it: %v", what, err)
	return false
}

// missingMessage is what a skip says, and with CI=true a failure:
// "CI=true and <what> is missing: <why>".
func missingMessage(what, why string) string {
	msg := fmt.Sprintf("%s is missing: %s", what, why)
	if CI() {
		return fmt.Sprintf("CI=%s and %s", os.Getenv("CI"), msg)
	}
	return msg
}
