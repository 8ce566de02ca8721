package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/server"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
)

// Dev mode's fixed layout. Ports are offsets from --port (default 19092),
// so a restart finds the quorum it bootstrapped:
//
//	Kafka listeners of voters 1001-1003   port+0 .. port+2   (the bootstrap address is port+0)
//	raft of voters 1001-1003              port+100 .. +102
//	HTTP endpoints of voters 1001-1003    port+200 .. +202
//	broker agents 1-3                     port+300 .. +302
//
// Data: <data>/voter-1001 .. voter-1003, one raft log each.
const (
	devDefaultPort  = 19092
	devFirstVoterID = 1001
	devVoters       = 3
	devBrokers      = 3
)

type devLayout struct {
	host string
	port int
}

func (l devLayout) addr(offset, i int) string {
	return net.JoinHostPort(l.host, strconv.Itoa(l.port+offset+i))
}
func (l devLayout) listener(i int) string { return l.addr(0, i) }
func (l devLayout) raft(i int) string     { return l.addr(100, i) }
func (l devLayout) http(i int) string     { return l.addr(200, i) }
func (l devLayout) broker(i int) string   { return l.addr(300, i) }

func (l devLayout) voters() []server.VoterPeer {
	var out []server.VoterPeer
	for i := 0; i < devVoters; i++ {
		out = append(out, server.VoterPeer{ID: int32(devFirstVoterID + i), Raft: l.raft(i), Listener: l.listener(i)})
	}
	return out
}

func runDev(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data", "./ctrlnode-data", "folder for the voters' data; kept between runs")
	host := fs.String("host", "127.0.0.1", "loopback address the voters and brokers bind")
	port := fs.Int("port", devDefaultPort, "first port: Kafka listeners at port..port+2, raft at +100, HTTP at +200, brokers at +300")
	logLevel := fs.String("log-level", "info", "log level: trace, debug, info, warn, error")
	session := fs.Duration("session-timeout", 9*time.Second, "broker session timeout")
	pprof := fs.Bool("pprof", false, "serve Go's profiler under /debug/pprof/ on the voters' HTTP endpoints")
	zkMirror := fs.String("zookeeper-mirror", "", "mirror the image to Kafka's znodes in this ZooKeeper (host:port[/chroot]) from the active voter")
	useTLS := fs.Bool("tls", false, "run everything over mutual TLS, with certificates made by `ctrlnode certs` in <data>/tls (made on the first --tls start, kept after)")
	useSASL := fs.Bool("sasl", false, "require clients to log in with SCRAM (and PLAIN with --tls): user admin, a super user, with the password in <data>/sasl-admin.password (made on the first --sasl start)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: ctrlnode dev [flags]")
		fmt.Fprint(fs.Output(), `
Runs three controller voters (ids 1001-1003) and three simulated brokers
(ids 1-3) in this process on localhost, with the voters' data in --data.
Ctrl-C stops them cleanly; starting again resumes from the data folder.
Admin commands find the cluster at the default --bootstrap (127.0.0.1:19092).

`)
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	if ip := net.ParseIP(*host); ip == nil || !ip.IsLoopback() {
		fmt.Fprintf(stderr, "ctrlnode dev: --host %q is not a loopback address\n", *host)
		return 2
	}
	if *port < 1 || *port+302 > 65535 {
		fmt.Fprintf(stderr, "ctrlnode dev: --port %d: want 1 to 65233 (ports up to --port+302 are used)\n", *port)
		return 2
	}
	if *session < 100*time.Millisecond {
		fmt.Fprintf(stderr, "ctrlnode dev: --session-timeout %v is below 100ms\n", *session)
		return 2
	}
	switch *logLevel {
	case "trace", "debug", "info", "warn", "error":
	default:
		fmt.Fprintf(stderr, "ctrlnode dev: --log-level %q is not one of trace, debug, info, warn, error\n", *logLevel)
		return 2
	}
	if st, err := os.Stat(*dataDir); err == nil && !st.IsDir() {
		fmt.Fprintf(stderr, "ctrlnode dev: --data %s is a file, not a folder\n", *dataDir)
		return 2
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "ctrlnode", Level: hclog.LevelFromString(*logLevel), Output: stderr})
	lay := devLayout{host: *host, port: *port}
	if _, err := os.Stat(filepath.Join(*dataDir, "voter-1")); err == nil {
		fmt.Fprintf(stdout, "note: %s holds data of the older dev layout (voter-1..3); it is left alone and not used\n", *dataDir)
	}

	var certs *devCerts
	if *useTLS {
		var err error
		if certs, err = devTLS(filepath.Join(*dataDir, "tls"), *host, logger, stdout, stderr); err != nil {
			fmt.Fprintf(stderr, "ctrlnode dev: --tls: %v\n", err)
			return 1
		}
	}

	var dsec devSecurity
	if *useSASL {
		var err error
		if dsec, err = devSASL(*dataDir, *useTLS); err != nil {
			fmt.Fprintf(stderr, "ctrlnode dev: --sasl: %v\n", err)
			return 1
		}
	}

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sigs)

	var voters, brokers []*server.Server
	stopAll := func(ctx context.Context) {
		var wg sync.WaitGroup
		for _, b := range brokers {
			wg.Add(1)
			go func() { defer wg.Done(); _ = b.Stop(ctx) }()
		}
		wg.Wait()
		// Every voter stops: no leadership to hand over.
		for _, v := range voters {
			_ = v.Close()
		}
	}
	for i, vp := range lay.voters() {
		dir := filepath.Join(*dataDir, fmt.Sprintf("voter-%d", vp.ID))
		s, err := server.Start(server.Config{
			NodeID: vp.ID, Voter: true, RaftAddr: vp.Raft, Listener: vp.Listener, ListenerAdvertise: vp.Listener,
			Voters: lay.voters(), DataDir: dir, SessionTimeout: *session, HTTPAddr: lay.http(i), Pprof: *pprof, ZooKeeperMirror: *zkMirror,
			Logger: logger, TLS: certs.voter(vp.ID), Security: dsec.listener, SASL: dsec.login,
		})
		if err != nil {
			fmt.Fprintf(stderr, "ctrlnode dev: voter %d: %v\n", vp.ID, err)
			stopAll(context.Background())
			return 1
		}
		voters = append(voters, s)
	}
	fmt.Fprintf(stdout, "ctrlquorum dev: three voters, data in %s\n", *dataDir)
	for i, vp := range lay.voters() {
		fmt.Fprintf(stdout, "  voter %d  raft %s  kafka %s  http http://%s\n", vp.ID, vp.Raft, vp.Listener, lay.http(i))
	}
	hb := min(*session/4, 2*time.Second)
	for i := 0; i < devBrokers; i++ {
		id := int32(i + 1)
		s, err := server.Start(server.Config{
			NodeID: id, Broker: true, BrokerID: id, BrokerListener: lay.broker(i), Voters: lay.voters(),
			SessionTimeout: *session, HeartbeatInterval: hb, Logger: logger.Named(fmt.Sprintf("broker-%d", id)),
			TLS: certs.broker(id), SASL: dsec.login,
		})
		if err != nil {
			fmt.Fprintf(stderr, "ctrlnode dev: broker %d: %v\n", id, err)
			stopAll(context.Background())
			return 1
		}
		brokers = append(brokers, s)
		fmt.Fprintf(stdout, "  broker %d  %s\n", id, s.Agent.Addr())
	}
	simCtx, simCancel := context.WithCancel(context.Background())
	var simWG sync.WaitGroup
	for _, b := range brokers {
		simWG.Add(1)
		go func() {
			defer simWG.Done()
			simulateReplication(simCtx, b.Agent, hb)
		}()
	}
	boot := lay.listener(0)
	fmt.Fprintf(stdout, "\nbootstrap: %s\n", boot)
	flagBoot := ""
	if *port != devDefaultPort || *host != "127.0.0.1" {
		flagBoot = " --bootstrap " + boot
	}
	if certs != nil {
		fmt.Fprintf(stdout, "TLS: every connection is mutual TLS; the CA is %s and the admin client certificate %s (key %s)\n",
			certs.client.CA, certs.client.Cert, certs.client.Key)
		fmt.Fprintln(stdout, "admin commands need it: add --tls-ca, --tls-cert and --tls-key, as below")
		flagBoot += fmt.Sprintf(" --tls-ca %s --tls-cert %s --tls-key %s", certs.client.CA, certs.client.Cert, certs.client.Key)
	}
	if *useSASL {
		fmt.Fprintf(stdout, "SASL: clients log in; the super user admin's password is in %s\n", dsec.passwordFile)
		fmt.Fprintf(stdout, "admin commands need it: add --sasl-mechanism SCRAM-SHA-512 --sasl-user admin --sasl-password-file %s, as below\n", dsec.passwordFile)
		flagBoot += " --sasl-mechanism SCRAM-SHA-512 --sasl-user admin --sasl-password-file " + dsec.passwordFile
	}
	fmt.Fprintln(stdout, "try:")
	fmt.Fprintf(stdout, "  ctrlnode topics create%s --topic demo --partitions 6 --replication-factor 3\n", flagBoot)
	fmt.Fprintf(stdout, "  ctrlnode topics describe%s --topic demo\n", flagBoot)
	fmt.Fprintf(stdout, "  ctrlnode quorum status%s\n", flagBoot)
	fmt.Fprintf(stdout, "  curl -s http://%s/metrics | grep ^kafka_controller\n", lay.http(0))
	fmt.Fprintln(stdout, "Ctrl-C stops; starting again keeps the state.")

	ctx, cancel := context.WithCancel(context.Background())
	go reportDevLeader(ctx, voters, stdout)
	sig := <-sigs
	cancel()
	simCancel()
	simWG.Wait()
	fmt.Fprintf(stdout, "stopping (%v)…\n", sig)
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer stopCancel()
	go func() {
		select {
		case <-sigs:
			fmt.Fprintln(stderr, "ctrlnode dev: second signal: stopping now")
			os.Exit(1)
		case <-stopCtx.Done():
		}
	}()
	stopAll(stopCtx)
	fmt.Fprintln(stdout, "stopped")
	return 0
}

func reportDevLeader(ctx context.Context, voters []*server.Server, out io.Writer) {
	var last int32 = -1
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, v := range voters {
			if ok, epoch := v.Node.Controller.Active(); ok && epoch != last {
				last = epoch
				fmt.Fprintf(out, "active controller: voter %d, controller epoch %d\n", v.Cfg().NodeID, epoch)
			}
		}
	}
}

// simulateReplication stands in for the replication a real broker does:
// the simulated followers are always caught up, so for every partition
// the agent leads, each replica on a live broker that is missing from the
// ISR is added to it (AlterPartition), as a leader does once a follower
// has caught up. That is what lets reassignments complete and ISRs grow
// back after a broker returns.
func simulateReplication(ctx context.Context, a *broker.Agent, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		live := map[int32]bool{}
		for _, b := range a.Brokers() {
			live[b.ID] = true
		}
		for _, p := range a.Partitions() {
			if p.Leader != a.BrokerID() {
				continue
			}
			isr := append([]int32(nil), p.ISR...)
			for _, r := range p.Replicas {
				if live[r] && !slices.Contains(isr, r) {
					isr = append(isr, r)
				}
			}
			if len(isr) == len(p.ISR) {
				continue
			}
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, _ = a.AlterPartition(actx, p.Topic, p.Partition, isr)
			cancel()
		}
	}
}

// devCerts are dev mode's certificates, nil without --tls.
type devCerts struct {
	voters  map[int32]*tlsconfig.Reloader
	brokers map[int32]*tlsconfig.Reloader
	client  tlsconfig.Files
}

func (d *devCerts) voter(id int32) *tlsconfig.Reloader {
	if d == nil {
		return nil
	}
	return d.voters[id]
}

func (d *devCerts) broker(id int32) *tlsconfig.Reloader {
	if d == nil {
		return nil
	}
	return d.brokers[id]
}

// devTLS loads dev mode's certificates from dir, making them with the
// certs command first when dir holds no CA yet.
func devTLS(dir, host string, logger hclog.Logger, stdout, stderr io.Writer) (*devCerts, error) {
	if !exists(filepath.Join(dir, "ca.crt")) {
		var voters, brokers []string
		for i := 0; i < devVoters; i++ {
			voters = append(voters, strconv.Itoa(devFirstVoterID+i))
		}
		for i := 0; i < devBrokers; i++ {
			brokers = append(brokers, strconv.Itoa(i+1))
		}
		hosts := "127.0.0.1,localhost"
		if host != "127.0.0.1" {
			hosts = host + "," + hosts
		}
		args := []string{"--out", dir, "--voters", strings.Join(voters, ","), "--brokers", strings.Join(brokers, ","),
			"--clients", "admin", "--hosts", hosts}
		if code := runCerts(args, stdout, stderr); code != exitOK {
			return nil, fmt.Errorf("making certificates in %s failed", dir)
		}
	}
	files := func(name string) tlsconfig.Files {
		return tlsconfig.Files{CA: filepath.Join(dir, "ca.crt"), Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key")}
	}
	d := &devCerts{voters: map[int32]*tlsconfig.Reloader{}, brokers: map[int32]*tlsconfig.Reloader{}, client: files("client-admin")}
	for i := 0; i < devVoters; i++ {
		id := int32(devFirstVoterID + i)
		r, err := tlsconfig.NewReloader(files(fmt.Sprintf("voter-%d", id)), tlsconfig.Options{Logger: logger.With("voter", id), Expect: tlsconfig.Voters(id)})
		if err != nil {
			return nil, fmt.Errorf("%w (delete %s to make new certificates)", err, dir)
		}
		d.voters[id] = r
	}
	for i := 0; i < devBrokers; i++ {
		id := int32(i + 1)
		r, err := tlsconfig.NewReloader(files(fmt.Sprintf("broker-%d", id)), tlsconfig.Options{Logger: logger.With("broker", id), Expect: tlsconfig.Broker(id)})
		if err != nil {
			return nil, fmt.Errorf("%w (delete %s to make new certificates)", err, dir)
		}
		d.brokers[id] = r
	}
	if !exists(d.client.Cert) || !exists(d.client.Key) {
		return nil, fmt.Errorf("%s has no admin client certificate (delete the folder to make new certificates)", dir)
	}
	return d, nil
}
