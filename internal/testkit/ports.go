package testkit

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

// BindOutsideEphemeral opens something that listens on host at a port
// below the kernel's ephemeral range, trying random ports until open
// succeeds. A test that stops a node and starts it again on the same
// address needs this: a port from the ephemeral range (what ":0" gives)
// can be taken in between as the local port of any outgoing connection on
// the host, for as long as that connection lives, while a port below the
// range is only ever taken by an explicit bind.
func BindOutsideEphemeral[T any](t testing.TB, host string, open func(addr string) (T, error)) T {
	t.Helper()
	low := ephemeralLow()
	var lastErr error
	for range 200 {
		port := 10000 + rand.IntN(low-10000)
		v, err := open(fmt.Sprintf("%s:%d", host, port))
		if err == nil {
			return v
		}
		lastErr = err
	}
	t.Fatalf("no free port below %d on %s: %v", low, host, lastErr)
	panic("unreachable")
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// default when it cannot be read).
func ephemeralLow() int {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 10100 {
				low = n
			}
		}
	}
	return low
}
