package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/hashicorp/go-hclog"
)

// client is a ZooKeeper session under an optional chroot, as in Kafka's
// zookeeper.connect: "host:port[,host:port...][/chroot]".
type client struct {
	zk   *zk.Conn
	root string
}

type zkLogger struct{ log hclog.Logger }

func (l zkLogger) Printf(format string, args ...any) { l.log.Debug(fmt.Sprintf(format, args...)) }

// splitConnect splits a connect string into servers and chroot.
func splitConnect(addr string) (servers []string, root string, err error) {
	hosts := addr
	if i := strings.IndexByte(addr, '/'); i >= 0 {
		hosts, root = addr[:i], strings.TrimSuffix(addr[i:], "/")
	}
	for _, h := range strings.Split(hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			servers = append(servers, h)
		}
	}
	if len(servers) == 0 {
		return nil, "", fmt.Errorf("zookeeper address %q names no server", addr)
	}
	return servers, root, nil
}

// dial opens a session. onEvent, if set, sees every session event and
// must not block.
func dial(addr string, sessionTimeout time.Duration, logger hclog.Logger, onEvent func(zk.Event)) (*client, error) {
	servers, root, err := splitConnect(addr)
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	opts := []func(*zk.Conn){zk.WithLogger(zkLogger{logger}), zk.WithLogInfo(false)}
	if onEvent != nil {
		opts = append(opts, zk.WithEventCallback(onEvent))
	}
	conn, _, err := zk.Connect(servers, sessionTimeout, func(c *zk.Conn) {
		for _, o := range opts {
			o(c)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("zookeeper %s: %w", addr, err)
	}
	return &client{zk: conn, root: root}, nil
}

func (c *client) close() { c.zk.Close() }

// p maps a Kafka path into the chroot.
func (c *client) p(path string) string {
	if c.root == "" {
		return path
	}
	if path == "/" {
		return c.root
	}
	return c.root + path
}

// waitSession waits until the session is established.
func (c *client) waitSession(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for c.zk.State() != zk.StateHasSession {
		select {
		case <-ctx.Done():
			return fmt.Errorf("zookeeper: no session: %w (state %s)", ctx.Err(), c.zk.State())
		case <-t.C:
		}
	}
	return nil
}

// ensurePath creates path and its parents (persistent, empty) where
// missing.
func (c *client) ensurePath(path string) error {
	full := c.p(path)
	var cur string
	for _, part := range strings.Split(strings.Trim(full, "/"), "/") {
		if part == "" {
			continue
		}
		cur += "/" + part
		if _, err := c.zk.Create(cur, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", cur, err)
		}
	}
	return nil
}

// get reads a znode; ok is false when it does not exist.
func (c *client) get(path string) (data []byte, stat *zk.Stat, ok bool, err error) {
	data, stat, err = c.zk.Get(c.p(path))
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("get %s: %w", path, err)
	}
	return data, stat, true, nil
}

// children lists a znode's children, sorted; none when it does not exist.
func (c *client) children(path string) ([]string, error) {
	kids, _, err := c.zk.Children(c.p(path))
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("children %s: %w", path, err)
	}
	sortStrings(kids)
	return kids, nil
}

type getResult struct {
	data []byte
	stat *zk.Stat
	ok   bool
	err  error
}

// getMany reads paths with up to parallel requests in flight on the one
// session (ZooKeeper pipelines them).
func (c *client) getMany(paths []string, parallel int) []getResult {
	out := make([]getResult, len(paths))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(parallel, len(paths)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(paths) {
					return
				}
				d, s, ok, err := c.get(paths[i])
				out[i] = getResult{d, s, ok, err}
			}
		}()
	}
	wg.Wait()
	return out
}
