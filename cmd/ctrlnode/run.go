package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ctrlquorum/ctrlquorum/internal/gcpace"
	"github.com/ctrlquorum/ctrlquorum/server"
)

func runRun(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath, setFlags := runFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: ctrlnode run [--config FILE] [flags]")
		fmt.Fprintln(fs.Output(), `
Runs one node: a controller voter, a broker agent, or both.

Every setting can be given in a config file (key = value lines), as an
environment variable (CTRLNODE_ and the key in upper case with dots as
underscores: node.id is CTRLNODE_NODE_ID) or as a flag (the key with dots
as dashes: --node-id). A flag wins over the environment, which wins over
the file. An invalid setting is refused before anything is written, with a
message naming it.

A voter's data.dir must be formatted first (ctrlnode format): a directory
that is not, or is another node's or cluster's, is refused. A new cluster's
first start bootstraps the quorum from the initial voters written at format;
later starts resume from the data folder. A data.dir written by a release
without meta.properties is adopted (the file is written for it). SIGTERM or SIGINT stops
the node gracefully: a broker goes through a controlled shutdown, a voter
that is the active controller hands leadership to another voter first.
A second signal stops it at once.

Each Kafka listener has its own wire limits, logged at start: listener.*
for the voter's, broker.listener.* for the broker agent's (frame size,
idle, read and write timeouts, connections, requests in flight). Each
listener may have TLS files of its own (raft.tls.*, listener.tls.*,
broker.listener.tls.*) in place of the node-wide tls.* ones; SIGHUP
reloads every set. A node's listeners are all TLS or all plain TCP.

raft.snapshot.threshold, raft.snapshot.interval and raft.trailing.logs
are raft's snapshot settings, hashicorp/raft's defaults unless set.

Example (voter 1001 of three; 1002 and 1003 alike):

  ctrlnode format --node-id 1001 --data-dir /var/lib/ctrlnode \
    --cluster-id MkU3OEVBNTcwNTJENDM2Qg \
    --initial-voters 1001@10.0.0.1:9093:Xl9rEOEoRkSAi3lxfHTvIQ,1002@10.0.0.2:9093:…,1003@10.0.0.3:9093:…
  ctrlnode run --node-id 1001 --data-dir /var/lib/ctrlnode \
    --raft-listener 10.0.0.1:9093 --listener 10.0.0.1:9092 \
    --voters 1001@10.0.0.1:9093,1002@10.0.0.2:9093,1003@10.0.0.3:9093 \
    --voter-listeners 1001@10.0.0.1:9092,1002@10.0.0.2:9092,1003@10.0.0.3:9092 \
    --http-listener 10.0.0.1:9100

Settings:`)
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	var fileVals server.SettingValues
	if *configPath != "" {
		var err error
		if fileVals, err = server.ParseSettingsFile(*configPath); err != nil {
			fmt.Fprintf(stderr, "ctrlnode run: invalid config: %v\n", err)
			return 2
		}
	}
	vals, err := server.ResolveSettings(fileVals, os.Environ(), setFlags())
	if err != nil {
		fmt.Fprintf(stderr, "ctrlnode run: invalid config: %v\n", err)
		return 2
	}
	nc, err := server.BuildNodeConfig(vals)
	if err != nil {
		fmt.Fprintf(stderr, "ctrlnode run: invalid config: %v\n", err)
		return 2
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "ctrlnode", Level: hclog.LevelFromString(nc.LogLevel), Output: stderr})
	nc.Config.Logger = logger
	nc.LogLimits(logger)
	if err := nc.LoadTLS(logger); err != nil {
		fmt.Fprintf(stderr, "ctrlnode run: invalid config: %v\n", err)
		return 2
	}

	// Signals are caught before anything starts so that one arriving
	// during start-up still stops the node gracefully.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sigs)
	// SIGHUP too: by default it would kill the process. One that arrives
	// during start-up is handled once the node runs.
	hups := make(chan os.Signal, 1)
	signal.Notify(hups, syscall.SIGHUP)
	defer signal.Stop(hups)

	s, err := server.Start(nc.Config)
	if err != nil {
		fmt.Fprintf(stderr, "ctrlnode run: %v\n", err)
		return 1
	}
	var roles []string
	if nc.Voter {
		roles = append(roles, "voter")
	}
	if nc.Broker {
		roles = append(roles, "broker")
	}
	fmt.Fprintf(stdout, "ctrlnode run: node %d (%s)\n", nc.NodeID, strings.Join(roles, ", "))
	if s.Node != nil {
		fmt.Fprintf(stdout, "  raft      %s\n", s.Node.Voter.Addr())
		fmt.Fprintf(stdout, "  listener  %s\n", s.Listener.Addr())
		fmt.Fprintf(stdout, "  data      %s\n", nc.DataDir)
	}
	if s.Agent != nil {
		fmt.Fprintf(stdout, "  broker    %d at %s\n", nc.BrokerID, s.Agent.Addr())
	}
	if s.HTTP != nil {
		fmt.Fprintf(stdout, "  http      http://%s/metrics\n", s.HTTP.Addr())
	}

	tlsSets := nc.TLSSets()
	switch {
	case len(nc.OwnTLSFiles) == 0 && nc.TLS != nil:
		fmt.Fprintf(stdout, "  tls       %s (CA %s); SIGHUP reloads\n", nc.TLSFiles.Cert, nc.TLSFiles.CA)
	case len(tlsSets) > 0:
		for i, set := range tlsSets {
			end := ""
			if i == len(tlsSets)-1 {
				end = "; SIGHUP reloads"
			}
			fmt.Fprintf(stdout, "  tls       %-9s %s (CA %s)%s\n", set.Label, set.Files.Cert, set.Files.CA, end)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gcpace.Start(ctx, gcpace.Config{Logger: logger})
	if s.Node != nil {
		go reportLeadership(ctx, s, stdout)
	}
	var sig os.Signal
	for sig == nil {
		select {
		case <-hups:
			if len(tlsSets) == 0 {
				logger.Info("SIGHUP: nothing to reload (no TLS configured)")
			} else if err := s.ReloadTLS(); err != nil {
				logger.Error("SIGHUP: TLS reload failed; where it failed the certificate loaded before stays in use", "error", err)
			} else {
				for _, set := range tlsSets {
					logger.Info("SIGHUP: TLS certificate reloaded", "listener", set.Label, "cert", set.Files.Cert, "not_after", set.Certs.Leaf().NotAfter.UTC().Format(time.RFC3339))
				}
			}
		case sig = <-sigs:
		}
	}
	fmt.Fprintf(stdout, "ctrlnode run: %v: stopping gracefully\n", sig)
	stopCtx, stopCancel := context.WithTimeout(context.Background(), nc.ShutdownTimeout)
	defer stopCancel()
	go func() {
		select {
		case sig := <-sigs:
			fmt.Fprintf(stderr, "ctrlnode run: second %v: stopping now\n", sig)
			stopCancel()
			time.Sleep(2 * time.Second)
			os.Exit(1)
		case <-ctx.Done():
		}
	}()
	err = s.Stop(stopCtx)
	cancel()
	if to := s.HandedOverTo(); to != "" {
		fmt.Fprintf(stdout, "ctrlnode run: leadership handed over to voter %s before stopping\n", to)
	}
	if err != nil {
		fmt.Fprintf(stderr, "ctrlnode run: stop: %v\n", err)
		fmt.Fprintln(stdout, "ctrlnode run: stopped with errors")
		return 1
	}
	fmt.Fprintln(stdout, "ctrlnode run: stopped")
	return 0
}

// runFlags defines one flag per setting plus --config on fs, and returns
// a function giving the flags that were set, by key.
func runFlags(fs *flag.FlagSet) (configPath *string, setFlags func() map[string]string) {
	configPath = fs.String("config", "", "config file of `key = value` lines (see the settings below)")
	vals := map[string]*string{}
	keys := map[string]string{}
	for _, s := range server.Settings() {
		vals[s.Key] = fs.String(server.FlagName(s.Key), s.Default, s.Doc)
		keys[server.FlagName(s.Key)] = s.Key
	}
	return configPath, func() map[string]string {
		out := map[string]string{}
		fs.Visit(func(f *flag.Flag) {
			if k, ok := keys[f.Name]; ok {
				out[k] = *vals[k]
			}
		})
		return out
	}
}

// reportLeadership prints a line each time this node becomes or stops
// being the active controller.
func reportLeadership(ctx context.Context, s *server.Server, out io.Writer) {
	var wasActive bool
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		active, epoch := s.Node.Controller.Active()
		if active != wasActive {
			wasActive = active
			if active {
				fmt.Fprintf(out, "active controller: this node, controller epoch %d\n", epoch)
			} else {
				fmt.Fprintln(out, "no longer the active controller")
			}
		}
	}
}
