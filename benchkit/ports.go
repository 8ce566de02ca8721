package benchkit

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// lowAddrs returns n free addresses on 127.0.0.1 at ports below the
// kernel's ephemeral range. A port from the range, free when asked, can
// be taken before the node binds it by the local end of any outgoing
// connection on the host, and a run opens many; a port below the range
// is only ever taken by an explicit bind.
func lowAddrs(n int) ([]string, error) {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 11000 {
				low = v
			}
		}
	}
	var out []string
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for tries := 0; len(out) < n; tries++ {
		if tries > 1000 {
			return nil, fmt.Errorf("no %d free ports below %d", n, low)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", 10000+rand.IntN(low-10000))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		held = append(held, l)
		out = append(out, addr)
	}
	return out, nil
}
