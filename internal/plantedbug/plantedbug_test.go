package plantedbug

import "testing"

// TestOnOnlyWithTheTag: Env switches a bug on in a build with the tag and
// does nothing in any other.
func TestOnOnlyWithTheTag(t *testing.T) {
	for _, b := range Bugs {
		t.Setenv(Env, string(b))
		if On(b) != Built {
			t.Errorf("%s set in %s: On = %v", Env, map[bool]string{true: "a plantedbugs build", false: "a build without the tag"}[Built], On(b))
		}
		for _, other := range Bugs {
			if other != b && On(other) {
				t.Errorf("%s=%s switched %s on too", Env, b, other)
			}
		}
	}
	t.Setenv(Env, "")
	for _, b := range Bugs {
		if On(b) {
			t.Errorf("%s on with %s unset", b, Env)
		}
	}
}
