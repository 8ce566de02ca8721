package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// TestAdminCommandsBothBootstraps runs `ctrlnode dev` and drives the admin
// commands through the brokers (--bootstrap, which forward what only the
// controller answers) and through the controller voters
// (--bootstrap-controller), as Kafka's tools take either: topics, configs,
// partitions, elections, reassignments, brokers, the quorum, feature
// levels, SCRAM users and ACLs. Each change is read back at once through the other route
// (the cluster answers reads with every change already answered).
func TestAdminCommandsBothBootstraps(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	base := freePortBase(t, devPorts...)
	data := t.TempDir()
	dev := startProc(t, "dev", nil, "dev", "--data", data, "--port", strconv.Itoa(base), "--log-level", "warn", "--session-timeout", "2s")
	dev.waitLine(t, activeRE, time.Minute)
	viaBrokers := []string{"--bootstrap", fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", base+300, base+301)}
	viaVoters := []string{"--bootstrap-controller", fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", base+1, base+2)}
	routes := map[string][]string{"--bootstrap": viaBrokers, "--bootstrap-controller": viaVoters}
	other := map[string][]string{"--bootstrap": viaVoters, "--bootstrap-controller": viaBrokers}

	var brokers brokersJSON
	waitFor(t, time.Minute, "three active brokers", func() bool {
		ctlJSON(t, 30*time.Second, &brokers, append([]string{"brokers", "list"}, viaBrokers...)...)
		n := 0
		for _, b := range brokers.Brokers {
			if !b.Fenced {
				n++
			}
		}
		return n == 3
	})

	for _, name := range []string{"--bootstrap", "--bootstrap-controller"} {
		b, o := routes[name], other[name]
		t.Run(strings.TrimPrefix(name, "--"), func(t *testing.T) {
			topic := "via-" + strings.TrimPrefix(name, "--")
			var res itemResults
			ctlJSON(t, 30*time.Second, &res, append([]string{"topics", "create", "--topic", topic, "--replica-assignment", "1:2,2:3"}, b...)...)
			if len(res.Results) != 1 || res.Results[0].Status != "created" || res.Results[0].ID == "" {
				t.Fatalf("topics create %s: %+v", name, res)
			}
			var list topicList
			ctlJSON(t, 30*time.Second, &list, append([]string{"topics", "list"}, o...)...)
			if n, ok := list.find(topic); !ok || n != 2 {
				t.Fatalf("topics list right after the create %s: %s has %d partitions (%v)", name, topic, n, ok)
			}
			ctlJSON(t, 30*time.Second, &res, append([]string{"topics", "alter-config", "--topic", topic, "--set", "retention.ms=5000"}, b...)...)
			ctlJSON(t, 30*time.Second, &res, append([]string{"topics", "add-partitions", "--topic", topic, "--partitions", "3"}, b...)...)
			var desc topicDescribe
			ctlJSON(t, 30*time.Second, &desc, append([]string{"topics", "describe", "--topic", topic}, o...)...)
			if len(desc.Topics) != 1 || len(desc.Topics[0].Partitions) != 3 || desc.Topics[0].Configs["retention.ms"] != "5000" {
				t.Fatalf("topics describe after alter-config and add-partitions %s: %+v", name, desc)
			}
			var elect itemResults
			ctlJSON(t, 30*time.Second, &elect, append([]string{"elect", "--type", "preferred", "--topic", topic}, b...)...)
			if len(elect.Results) != 3 {
				t.Fatalf("elect %s: %+v", name, elect)
			}

			plan := filepath.Join(t.TempDir(), "plan.json")
			ctl(t, nil, append([]string{"reassign", "generate", "--remove-broker", "1", "--topic", topic, "--output", plan}, b...)...)
			if _, err := os.Stat(plan); err != nil {
				t.Fatalf("reassign generate %s wrote no plan: %v", name, err)
			}
			if r := ctl(t, nil, append([]string{"reassign", "execute", "--plan", plan}, b...)...); r.code != 0 {
				t.Fatalf("reassign execute %s: %v", name, r)
			}
			waitFor(t, 30*time.Second, "reassign verify "+name+" to report complete", func() bool {
				return ctl(t, nil, append([]string{"reassign", "verify", "--plan", plan}, b...)...).code == 0
			})
			ctlJSON(t, 30*time.Second, &desc, append([]string{"topics", "describe", "--topic", topic}, o...)...)
			for _, p := range desc.Topics[0].Partitions {
				if slices.Contains(p.Replicas, 1) {
					t.Fatalf("partition %d still on broker 1 after the reassignment %s: %v", p.Partition, name, p.Replicas)
				}
			}
			if r := ctl(t, nil, append([]string{"reassign", "list"}, b...)...); r.code != 0 || !strings.Contains(r.stdout, "no reassignment in progress") {
				t.Fatalf("reassign list %s: %v", name, r)
			}

			var q quorumJSON
			ctlJSON(t, 30*time.Second, &q, append([]string{"quorum", "status"}, b...)...)
			if q.LeaderID < 1001 || q.LeaderID > 1003 || len(q.Voters) != 3 {
				t.Fatalf("quorum status %s: %+v", name, q)
			}
			if r := ctl(t, nil, append([]string{"quorum", "replication"}, b...)...); r.code != 0 {
				t.Fatalf("quorum replication %s: %v", name, r)
			}
			var qd struct {
				LeaderID int32 `json:"leader_id"`
				Voters   []struct {
					ID          int32  `json:"id"`
					DirectoryID string `json:"directory_id"`
				} `json:"voters"`
			}
			ctlJSON(t, 30*time.Second, &qd, append([]string{"quorum", "describe"}, b...)...)
			if len(qd.Voters) != 3 || qd.LeaderID < 1001 || qd.LeaderID > 1003 {
				t.Fatalf("quorum describe %s: %+v", name, qd)
			}
			for _, v := range qd.Voters {
				if v.ID < 1001 || v.ID > 1003 || v.DirectoryID == "" {
					t.Fatalf("quorum describe %s: voter %+v", name, v)
				}
			}
			// A broker reports the finalized level as the voters do.
			var features []struct {
				Feature   string `json:"feature"`
				Finalized int16  `json:"finalized"`
				Epoch     int64  `json:"epoch"`
			}
			ctlJSON(t, 30*time.Second, &features, append([]string{"features", "describe"}, b...)...)
			if len(features) != 1 || features[0].Feature != "metadata.version" || features[0].Finalized != int16(rl.LatestLevel) || features[0].Epoch <= 0 {
				t.Fatalf("features describe %s: %+v", name, features)
			}
			if r := ctl(t, nil, append([]string{"reassign", "cancel", "--all"}, b...)...); r.code != 0 || !strings.Contains(r.stdout, "no reassignment in progress") {
				t.Fatalf("reassign cancel --all %s: %v", name, r)
			}
			ctlJSON(t, 30*time.Second, &brokers, append([]string{"brokers", "list"}, b...)...)
			if len(brokers.Brokers) != 3 {
				t.Fatalf("brokers list %s: %+v", name, brokers)
			}

			pw := filepath.Join(t.TempDir(), "pw")
			if err := os.WriteFile(pw, []byte("secret\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			user := "u-" + strings.TrimPrefix(name, "--")
			if r := ctl(t, nil, append([]string{"scram", "set", "--user", user, "--password-file", pw}, b...)...); r.code != 0 {
				t.Fatalf("scram set %s: %v", name, r)
			}
			if r := ctl(t, nil, append([]string{"scram", "list"}, o...)...); r.code != 0 || !strings.Contains(r.stdout, user) {
				t.Fatalf("scram list right after scram set %s: %v", name, r)
			}
			if r := ctl(t, nil, append([]string{"scram", "delete", "--user", user, "--mechanism", "SCRAM-SHA-512"}, b...)...); r.code != 0 {
				t.Fatalf("scram delete %s: %v", name, r)
			}

			ctlJSON(t, 30*time.Second, &res, append([]string{"topics", "delete", "--topic", topic}, b...)...)
			ctlJSON(t, 30*time.Second, &list, append([]string{"topics", "list"}, o...)...)
			if _, ok := list.find(topic); ok {
				t.Fatalf("topics list right after the delete %s still lists %s", name, topic)
			}
		})
	}

	// ACLs last: the first rule turns authorization on. It allows the
	// anonymous admin everything, so the commands go on working.
	for _, name := range []string{"--bootstrap", "--bootstrap-controller"} {
		b, o := routes[name], other[name]
		if r := ctl(t, nil, append([]string{"acl", "add", "--principal", "User:ANONYMOUS", "--cluster", "--operation", "all"}, b...)...); r.code != 0 {
			t.Fatalf("acl add %s: %v", name, r)
		}
		if r := ctl(t, nil, append([]string{"acl", "list"}, o...)...); r.code != 0 || !strings.Contains(r.stdout, "User:ANONYMOUS") {
			t.Fatalf("acl list right after acl add %s: %v", name, r)
		}
		if r := ctl(t, nil, append([]string{"acl", "remove", "--principal", "User:ANONYMOUS", "--cluster", "--operation", "all"}, b...)...); r.code != 0 {
			t.Fatalf("acl remove %s: %v", name, r)
		}
	}

	if r := ctl(t, nil, append(append([]string{"topics", "list"}, viaBrokers...), viaVoters...)...); r.code != 2 || !strings.Contains(r.stderr, "not both") {
		t.Fatalf("both --bootstrap and --bootstrap-controller: want exit 2 saying not both, got %v", r)
	}
	if err := dev.signal(t, syscall.SIGINT, 30*time.Second); err != nil {
		t.Fatalf("dev exited with %v", err)
	}
}
