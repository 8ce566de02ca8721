package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
)

// matrixClients are the clients of the matrix, the columns of its table.
func matrixClients() []matrixClient {
	return []matrixClient{kadmClient(), saramaClient(), kafkajsClient(), kcatClient()}
}

// runDriver runs an external driver with the run as its only argument
// and reads its JSON lines of results. A driver that exits non-zero or
// prints something else is an error, with its stderr.
func runDriver(ctx context.Context, name string, r matrixRun, argv ...string) ([]opResult, error) {
	arg, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, argv[0], append(argv[1:], string(arg))...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	runErr := cmd.Run()
	var res []opResult
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var x opResult
		if err := json.Unmarshal([]byte(line), &x); err != nil || x.Op == "" {
			return res, fmt.Errorf("%s printed %q", name, line)
		}
		res = append(res, x)
	}
	if runErr != nil {
		return res, fmt.Errorf("%s: %v: %s", name, runErr, lastLines(errb.String(), 5))
	}
	return res, nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " / ")
}

// saramaDriver builds integration/clients/sarama/matrix, in the module
// of its own that keeps sarama out of the project's go.mod, once.
var saramaDriver = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "ctrlquorum-sarama-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "sarama-matrix")
	cmd := exec.Command("go", "build", "-o", bin, "./matrix")
	cmd.Dir = filepath.Join("clients", "sarama")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build in %s: %v\n%s", cmd.Dir, err, out)
	}
	return bin, nil
})

func saramaClient() matrixClient {
	return matrixClient{
		name:   "sarama",
		offers: matrixRows(),
		need: func(t *testing.T) {
			if _, err := saramaDriver(); err != nil {
				t.Fatal(err)
			}
		},
		run: func(ctx context.Context, _ *testing.T, r matrixRun) []opResult {
			bin, _ := saramaDriver()
			res, err := runDriver(ctx, "sarama", r, bin)
			return withRunError(res, err)
		},
	}
}

// withRunError keeps a failed run's error as a result of its own, which
// the matrix shows against the operations left without one.
func withRunError(res []opResult, err error) []opResult {
	if err != nil {
		res = append(res, opResult{Op: runErrorOp, Err: err.Error()})
	}
	return res
}

// runErrorOp is the pseudo-operation carrying a driver's own failure.
const runErrorOp = "(run)"

// kafkajs runs integration/clients/kafkajs/matrix.js under node, with
// kafkajs 2.2.4 from its package-lock.json (.ci/deps.sh runs npm ci).
func kafkajsClient() matrixClient {
	dir := filepath.Join("clients", "kafkajs")
	return matrixClient{
		name: "kafkajs",
		offers: []string{opDescribeCluster, opCreateTopics, opListTopics, opDescribeTopics, opAddPartitions,
			opDescribeTopicConfigs, opAlterTopicLegacy, opReassignStart, opReassignList, opProduce, opConsume, opDeleteTopics,
			opCreateACLs, opDescribeACLs, opDeleteACLs, opDescribeBroker, opAlterBrokerLegacy,
			opLoginSCRAM256, opLoginSCRAM512, opWrongPasswordSCRA256, opWrongPasswordSCRAM, opLoginPlain, opWrongPasswordPlain, opNoLogin},
		need: func(t *testing.T) {
			_, err := exec.LookPath("node")
			testkit.Need(t, "node (Node.js, for kafkajs)", err)
			_, err = os.Stat(filepath.Join(dir, "node_modules", "kafkajs", "package.json"))
			testkit.Need(t, "kafkajs in "+dir+"/node_modules (npm ci there; make deps does it)", err)
		},
		run: func(ctx context.Context, _ *testing.T, r matrixRun) []opResult {
			res, err := runDriver(ctx, "kafkajs", r, "node", filepath.Join(dir, "matrix.js"))
			return withRunError(res, err)
		},
	}
}

// kcat (librdkafka) offers no admin operation: it lists the cluster's
// metadata (-L), which the matrix checks as describe cluster, list
// topics and describe topics, and logs in.
func kcatClient() matrixClient {
	return matrixClient{
		name: "kcat",
		offers: []string{opDescribeCluster, opListTopics, opDescribeTopics, opProduce, opConsume,
			opLoginSCRAM256, opLoginSCRAM512, opWrongPasswordSCRA256, opWrongPasswordSCRAM, opLoginPlain, opWrongPasswordPlain, opNoLogin},
		need: func(t *testing.T) {
			_, err := exec.LookPath("kcat")
			testkit.Need(t, "kcat (Debian package kcat)", err)
		},
		run: runKcat,
	}
}

// kcatMetadata is kcat -L -J's answer.
type kcatMetadata struct {
	ControllerID int32 `json:"controllerid"`
	Brokers      []struct {
		ID   int32  `json:"id"`
		Name string `json:"name"`
	} `json:"brokers"`
	Topics []struct {
		Topic      string `json:"topic"`
		Error      string `json:"error"`
		Partitions []struct {
			Partition int32  `json:"partition"`
			Leader    int32  `json:"leader"`
			Error     string `json:"error"`
			Replicas  []struct {
				ID int32 `json:"id"`
			} `json:"replicas"`
			ISRs []struct {
				ID int32 `json:"id"`
			} `json:"isrs"`
		} `json:"partitions"`
	} `json:"topics"`
}

// kcat runs kcat -L -J against the run's bootstrap, logging in with mech
// (empty: none), and decodes its answer.
func kcat(ctx context.Context, r matrixRun, mech, password string, args ...string) (kcatMetadata, error) {
	argv := []string{"-L", "-J", "-b", r.Bootstrap, "-m", "10"}
	if r.Phase == phaseLogin {
		argv[len(argv)-1] = "4"
	}
	tlsOn := r.TLSCA != ""
	if tlsOn {
		argv = append(argv, "-X", "ssl.ca.location="+r.TLSCA, "-X", "ssl.certificate.location="+r.TLSCert,
			"-X", "ssl.key.location="+r.TLSKey)
	}
	if mech != "" {
		argv = append(argv, "-X", "sasl.mechanisms="+mech, "-X", "sasl.username="+r.User, "-X", "sasl.password="+password)
	}
	var proto string
	switch {
	case mech != "" && tlsOn:
		proto = "SASL_SSL"
	case mech != "":
		proto = "SASL_PLAINTEXT"
	case tlsOn:
		proto = "SSL"
	default:
		proto = "PLAINTEXT"
	}
	argv = append(append(argv, "-X", "security.protocol="+proto), args...)
	cmd := exec.CommandContext(ctx, "kcat", argv...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	var md kcatMetadata
	if err := cmd.Run(); err != nil {
		return md, fmt.Errorf("kcat: %v: %s", err, lastLines(errb.String(), 3))
	}
	if err := json.Unmarshal(out.Bytes(), &md); err != nil {
		return md, fmt.Errorf("kcat printed %q: %v", out.String(), err)
	}
	return md, nil
}

func runKcat(ctx context.Context, _ *testing.T, r matrixRun) []opResult {
	var rs results
	if r.Phase == phaseLogin {
		for _, mech := range r.Mechanisms {
			rs.do(loginOp(mech), func() error {
				md, err := kcat(ctx, r, mech, r.Password)
				if err != nil {
					return err
				}
				for _, t := range md.Topics {
					if t.Topic == r.LoginTopic {
						return nil
					}
				}
				return fmt.Errorf("lists %d topics, not %s", len(md.Topics), r.LoginTopic)
			})
			rs.do(wrongPasswordOp(mech), func() error {
				_, err := kcat(ctx, r, mech, r.Password+"-wrong")
				// librdkafka: "SASL authentication error: <the broker's message>".
				if err == nil || !strings.Contains(err.Error(), "SASL authentication error") {
					return fmt.Errorf("got %v, want a SASL authentication error", err)
				}
				return nil
			})
		}
		if loginOpOf(opNoLogin, r.Mechanisms) {
			rs.do(opNoLogin, func() error {
				md, err := kcat(ctx, r, "", "")
				var listed []string
				for _, t := range md.Topics {
					listed = append(listed, t.Topic)
				}
				// kcat creates nothing: only what it lists counts.
				return noLoginSeen(r.LoginTopic, listed, err, errors.New("kcat creates no topic"))
			})
		}
		return rs
	}
	if r.Phase != phaseTopics {
		return nil
	}
	rs.do(opDescribeCluster, func() error {
		md, err := kcat(ctx, r, "", "")
		if err != nil {
			return err
		}
		var ids []int32
		for _, b := range md.Brokers {
			ids = append(ids, b.ID)
		}
		// kcat shows no cluster id.
		return checkBrokersOnly("-", md.ControllerID, ids, r.Brokers)
	})
	// kcat creates nothing: the topic it lists is made with kadm.
	topic := r.Prefix + "-a"
	setup := func() error {
		adm, err := newKadm(r, "", "", "")
		if err != nil {
			return err
		}
		defer adm.Close()
		res, err := adm.CreateTopics(ctx, 3, 3, nil, topic)
		if err == nil {
			err = res[topic].Err
		}
		if err != nil {
			return fmt.Errorf("creating %s with kadm: %w", topic, err)
		}
		return nil
	}
	setupErr := setup()
	check := func(args ...string) error {
		if setupErr != nil {
			return setupErr
		}
		md, err := kcat(ctx, r, "", "", args...)
		if err != nil {
			return err
		}
		for _, t := range md.Topics {
			if t.Topic != topic {
				continue
			}
			td := kadm.TopicDetail{Topic: topic, Partitions: kadm.PartitionDetails{}}
			if t.Error != "" {
				return fmt.Errorf("%s: %s", topic, t.Error)
			}
			for _, p := range t.Partitions {
				pd := kadm.PartitionDetail{Topic: topic, Partition: p.Partition, Leader: p.Leader}
				if p.Error != "" {
					pd.Err = errors.New(p.Error)
				}
				for _, x := range p.Replicas {
					pd.Replicas = append(pd.Replicas, x.ID)
				}
				for _, x := range p.ISRs {
					pd.ISR = append(pd.ISR, x.ID)
				}
				td.Partitions[p.Partition] = pd
			}
			return checkPartitions(td, 3, 3, r.Brokers)
		}
		return fmt.Errorf("lists %d topics, not %s", len(md.Topics), topic)
	}
	rs.do(opListTopics, func() error { return check() })
	rs.do(opDescribeTopics, func() error { return check("-t", topic) })
	rs.do(opProduce, func() error {
		if setupErr != nil {
			return setupErr
		}
		cmd := exec.CommandContext(ctx, "kcat", "-P", "-b", r.Bootstrap, "-t", topic, "-p", "0", "-X", "acks=all")
		cmd.Stdin = strings.NewReader(r.Prefix + "\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("kcat -P: %v: %s", err, lastLines(string(out), 3))
		}
		return nil
	})
	rs.do(opConsume, func() error {
		if setupErr != nil {
			return setupErr
		}
		cmd := exec.CommandContext(ctx, "kcat", "-C", "-b", r.Bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-c", "1", "-e", "-J")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("kcat -C: %v: %s", err, lastLines(errb.String(), 3))
		}
		var m struct {
			Offset  int64  `json:"offset"`
			Payload string `json:"payload"`
		}
		if err := json.Unmarshal(out.Bytes(), &m); err != nil {
			return fmt.Errorf("kcat -C printed %q: %v", out.String(), err)
		}
		if m.Payload != r.Prefix || m.Offset != 0 {
			return fmt.Errorf("first record %q at offset %d, want %q at 0", m.Payload, m.Offset, r.Prefix)
		}
		return nil
	})
	return rs
}
