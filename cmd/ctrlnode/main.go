// Command ctrlnode runs ctrlquorum nodes and administers a cluster.
//
//	ctrlnode dev         three voters and three brokers (with partition data) on localhost
//	ctrlnode format      write a node's identity into its data directory before its first start
//	ctrlnode run         one node from a config file, the environment and flags
//	ctrlnode topics      create, list, describe, delete, add-partitions, alter-config
//	ctrlnode elect       preferred or unclean leader election
//	ctrlnode reassign    execute, list, cancel, verify, generate partition reassignments
//	ctrlnode brokers     list the brokers with their fenced and shutting-down state
//	ctrlnode quorum      the controller quorum's leader, epoch, commit index and lag
//	ctrlnode features    describe, upgrade or downgrade feature levels (metadata.version)
//	ctrlnode state-hash  each voter's state hash, compared
//	ctrlnode acl         add, list, remove authorization rules
//	ctrlnode scram       set, list, delete users' SCRAM credentials
//	ctrlnode log         dump or verify a data directory's raft log and snapshots, offline
//	ctrlnode bench       the controller's benchmark scenarios, as one table
//
// Every command takes --help. Admin commands speak the Kafka protocol to
// brokers (--bootstrap) or to the controller voters
// (--bootstrap-controller) and print a table, or JSON with --json. On a cluster that
// requires SASL they log in with --sasl-mechanism, --sasl-user and the
// password of --sasl-password-file or $CTRLNODE_SASL_PASSWORD.
package main

import (
	"fmt"
	"io"
	"os"
)

type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"dev", "run three voters and three brokers with partition data on localhost", runDev},
		{"format", "write a new node's identity (cluster id, node id, directory id) into its data directory", runFormat},
		{"run", "run one node (voter, broker or both) from a config file, the environment and flags", runRun},
		{"topics", "create, list, describe, delete, add-partitions, alter-config", runTopics},
		{"elect", "preferred or unclean leader election for all or listed partitions", runElect},
		{"reassign", "execute, list, cancel, verify or generate partition reassignments", runReassign},
		{"brokers", "list the brokers with their fenced and shutting-down state", runBrokers},
		{"quorum", "the quorum's leader, epoch, commit index and per-voter lag", runQuorum},
		{"features", "describe, upgrade or downgrade feature levels (metadata.version)", runFeatures},
		{"state-hash", "each voter's state hash and index, compared", runStateHash},
		{"state-changes", "the committed replica and partition transitions, from any voter (--follow to stream)", runStateChanges},
		{"acl", "add, list or remove authorization rules (ACLs)", runACL},
		{"scram", "set, list or delete users' SCRAM credentials", runSCRAM},
		{"bench", "the benchmark scenarios as one table, with the raw-raft floor", runBench},
		{"log", "dump or verify a voter's data directory offline: its raft log and snapshots", runLog},
		{"migrate", "import a ZooKeeper-mode Kafka cluster's metadata into the quorum", runMigrate},
		{"certs", "write a throwaway CA and voter, broker and client certificates", runCerts},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: ctrlnode <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'ctrlnode <command> --help' for a command's flags.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Exit codes of the admin commands:")
	fmt.Fprintln(w, "  0  success")
	fmt.Fprintln(w, "  1  the cluster refused all or part of the request (each failure is printed)")
	fmt.Fprintln(w, "  2  bad usage: unknown command or flag, missing or invalid argument")
	fmt.Fprintln(w, "  3  the cluster could not be reached or did not answer in time")
	fmt.Fprintln(w, "  4  not there yet: reassign verify found reassignments in progress,")
	fmt.Fprintln(w, "     state-hash found voters at different indexes")
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "--help", "-help":
		if len(args) > 1 {
			for _, c := range commands() {
				if c.name == args[1] {
					return c.run([]string{"--help"}, stdout, stdout)
				}
			}
		}
		usage(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "ctrlnode: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}
