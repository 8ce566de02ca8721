package integration

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ctrlquorum/ctrlquorum/transport/zookeeper/zktest"
)

// TestDevMirrorsToZooKeeperAndMigrate runs `ctrlnode dev --zookeeper-mirror`
// against a real ZooKeeper: a topic created through the admin command shows
// up as Kafka's znodes, and `ctrlnode migrate --dry-run` against the same
// ZooKeeper finds everything already imported (it changes nothing).
func TestDevMirrorsToZooKeeperAndMigrate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	srv := zktest.Start(t)
	base := freePortBase(t, devPorts...)
	boot := fmt.Sprintf("127.0.0.1:%d", base)
	var httpArgs []string
	for i := 0; i < 3; i++ {
		httpArgs = append(httpArgs, "--http", fmt.Sprintf("127.0.0.1:%d", base+200+i))
	}
	dev := startProc(t, "dev", nil, "dev", "--data", t.TempDir(), "--port", strconv.Itoa(base), "--log-level", "warn",
		"--session-timeout", "2s", "--zookeeper-mirror", srv.Addr()+"/kafka")
	dev.waitLine(t, activeRE, time.Minute)

	if r := ctl(t, nil, "topics", "create", "--bootstrap", boot, "--topic", "mirrored", "--partitions", "2", "--replication-factor", "3"); r.code != 0 {
		waitFor(t, 30*time.Second, "topic creation", func() bool {
			r = ctl(t, nil, "topics", "create", "--bootstrap", boot, "--topic", "mirrored", "--partitions", "2", "--replication-factor", "3")
			return r.code == 0 || strings.Contains(r.stderr, "TOPIC_ALREADY_EXISTS")
		})
	}

	conn, _, err := zk.Connect([]string{srv.Addr()}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stateRE := regexp.MustCompile(`^\{"controller_epoch":\d+,"leader":[1-3],"version":1,"leader_epoch":\d+,"isr":\[[1-3](,[1-3]){0,2}\]\}$`)
	var state []byte
	waitFor(t, 60*time.Second, "the partition state znode in ZooKeeper", func() bool {
		state, _, err = conn.Get("/kafka/brokers/topics/mirrored/partitions/1/state")
		return err == nil && stateRE.Match(state)
	})
	if _, _, err := conn.Get("/kafka/controller_epoch"); err != nil {
		t.Fatalf("/controller_epoch: %v", err)
	}

	// Importing what the mirror wrote finds nothing new.
	var r result
	waitFor(t, 30*time.Second, "migrate --dry-run", func() bool {
		r = ctl(t, nil, append([]string{"migrate", "--zookeeper", srv.Addr() + "/kafka", "--dry-run"}, httpArgs...)...)
		return r.code != 3 // 3: no voter reachable or active yet
	})
	if r.code != 0 {
		t.Fatalf("migrate --dry-run: %s", r)
	}
	if !strings.Contains(r.stdout, "mirrored") && !strings.Contains(strings.ToLower(r.stdout), "skipped") {
		t.Fatalf("migrate --dry-run output says nothing about the existing topic:\n%s", r)
	}
	if err := dev.signal(t, syscall.SIGINT, 60*time.Second); err != nil {
		t.Fatalf("dev did not stop cleanly: %v", err)
	}
}
