package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ctrlquorum/ctrlquorum/internal/gcpace"
	"github.com/ctrlquorum/ctrlquorum/server"
	"github.com/ctrlquorum/ctrlquorum/server/devcluster"
)

func runDev(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data", "./ctrlnode-data", "folder for the voters' data; kept between runs")
	host := fs.String("host", "127.0.0.1", "loopback address the voters and brokers bind")
	port := fs.Int("port", devcluster.DefaultPort, "first port: Kafka listeners at port..port+2, raft at +100, HTTP at +200, brokers at +300")
	logLevel := fs.String("log-level", "info", "log level: trace, debug, info, warn, error")
	session := fs.Duration("session-timeout", 9*time.Second, "broker session timeout")
	pprof := fs.Bool("pprof", false, "serve Go's profiler under /debug/pprof/ on the voters' HTTP endpoints")
	zkMirror := fs.String("zookeeper-mirror", "", "mirror the image to Kafka's znodes in this ZooKeeper (host:port[/chroot]) from the active voter")
	useTLS := fs.Bool("tls", false, "run everything over mutual TLS, with certificates made by `ctrlnode certs` in <data>/tls (made on the first --tls start, kept after)")
	simulated := fs.Bool("simulated-brokers", false, "run brokers that keep no data and only remember what the controller told them (for trying the controller alone)")
	useSASL := fs.Bool("sasl", false, "require clients to log in with SCRAM (and PLAIN with --tls): user admin, a super user, with the password in <data>/sasl-admin.password (made on the first --sasl start)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: ctrlnode dev [flags]")
		fmt.Fprint(fs.Output(), `
Runs three controller voters (ids 1001-1003) and three brokers (ids 1-3)
in this process on localhost, with the voters' data and the brokers'
partition data in --data. Kafka producers and consumers work against the
brokers (kcat -P / -C, as printed).
Ctrl-C stops them cleanly; starting again resumes from the data folder.
Admin commands reach the voters by default (--bootstrap-controller
127.0.0.1:19092); --bootstrap 127.0.0.1:19392 goes through the brokers.

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
	if *port < 1 || *port+devcluster.PortSpan > 65535 {
		fmt.Fprintf(stderr, "ctrlnode dev: --port %d: want 1 to %d (ports up to --port+%d are used)\n", *port, 65535-devcluster.PortSpan, devcluster.PortSpan)
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
	lay := devcluster.Layout{Host: *host, Port: *port}
	if devcluster.OldLayout(*dataDir) {
		fmt.Fprintf(stdout, "note: %s holds data of the older dev layout (voter-1..3); it is left alone and not used\n", *dataDir)
	}

	var certs *devcluster.Certs
	if *useTLS {
		var err error
		if certs, err = devcluster.LoadCerts(filepath.Join(*dataDir, "tls"), *host, logger, printWritten(stdout)); err != nil {
			var ie *devcluster.IssueError
			if errors.As(err, &ie) {
				fmt.Fprintf(stderr, "ctrlnode certs: %v\n", ie.Err)
			}
			fmt.Fprintf(stderr, "ctrlnode dev: --tls: %v\n", err)
			return 1
		}
	}

	var dsec devcluster.Security
	if *useSASL {
		var err error
		if dsec, err = devcluster.SASL(*dataDir, *useTLS); err != nil {
			fmt.Fprintf(stderr, "ctrlnode dev: --sasl: %v\n", err)
			return 1
		}
	}

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sigs)

	dc := devcluster.New(devcluster.Config{Layout: lay, DataDir: *dataDir, SessionTimeout: *session, Pprof: *pprof,
		ZooKeeperMirror: *zkMirror, Logger: logger, Certs: certs, Security: dsec, SimulatedBrokers: *simulated})
	if err := dc.StartVoters(); err != nil {
		fmt.Fprintf(stderr, "ctrlnode dev: %v\n", err)
		dc.Stop(context.Background())
		return 1
	}
	fmt.Fprintf(stdout, "ctrlquorum dev: three voters, data in %s\n", *dataDir)
	for i, vp := range lay.Voters() {
		fmt.Fprintf(stdout, "  voter %d  raft %s  kafka %s  http http://%s\n", vp.ID, vp.Raft, vp.Listener, lay.HTTP(i))
	}
	if err := dc.StartBrokers(func(s *server.Server) { fmt.Fprintf(stdout, "  broker %d  %s\n", s.Cfg().BrokerID, s.Agent.Addr()) }); err != nil {
		fmt.Fprintf(stderr, "ctrlnode dev: %v\n", err)
		dc.Stop(context.Background())
		return 1
	}
	boot := lay.Listener(0)
	fmt.Fprintf(stdout, "\nbootstrap: %s\n", boot)
	flagBoot := ""
	if *port != devcluster.DefaultPort || *host != "127.0.0.1" {
		flagBoot = " --bootstrap-controller " + boot
	}
	if certs != nil {
		fmt.Fprintf(stdout, "TLS: every connection is mutual TLS; the CA is %s and the admin client certificate %s (key %s)\n",
			certs.Client.CA, certs.Client.Cert, certs.Client.Key)
		fmt.Fprintln(stdout, "admin commands need it: add --tls-ca, --tls-cert and --tls-key, as below")
		flagBoot += fmt.Sprintf(" --tls-ca %s --tls-cert %s --tls-key %s", certs.Client.CA, certs.Client.Cert, certs.Client.Key)
	}
	if *useSASL {
		fmt.Fprintf(stdout, "SASL: clients log in; the super user admin's password is in %s\n", dsec.PasswordFile)
		fmt.Fprintf(stdout, "admin commands need it: add --sasl-mechanism SCRAM-SHA-512 --sasl-user admin --sasl-password-file %s, as below\n", dsec.PasswordFile)
		flagBoot += " --sasl-mechanism SCRAM-SHA-512 --sasl-user admin --sasl-password-file " + dsec.PasswordFile
	}
	fmt.Fprintln(stdout, "try:")
	fmt.Fprintf(stdout, "  ctrlnode topics create%s --topic demo --partitions 6 --replication-factor 3\n", flagBoot)
	fmt.Fprintf(stdout, "  ctrlnode topics describe%s --topic demo\n", flagBoot)
	fmt.Fprintf(stdout, "  ctrlnode quorum status%s\n", flagBoot)
	if !*simulated && certs == nil {
		fmt.Fprintf(stdout, "  echo hello | kcat -P -b %s -t demo -p 0 -X acks=all\n", lay.Broker(0))
		fmt.Fprintf(stdout, "  kcat -C -b %s -t demo -p 0 -o beginning -e\n", lay.Broker(0))
	}
	fmt.Fprintf(stdout, "  curl -s http://%s/metrics | grep ^kafka_controller\n", lay.HTTP(0))
	fmt.Fprintln(stdout, "Ctrl-C stops; starting again keeps the state.")

	ctx, cancel := context.WithCancel(context.Background())
	gcpace.Start(ctx, gcpace.Config{Logger: logger})
	go dc.WatchActive(ctx, func(voter, epoch int32) {
		fmt.Fprintf(stdout, "active controller: voter %d, controller epoch %d\n", voter, epoch)
	})
	sig := <-sigs
	cancel()
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
	dc.Stop(stopCtx)
	fmt.Fprintln(stdout, "stopped")
	return 0
}
