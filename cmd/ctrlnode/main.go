// Command ctrlnode runs ctrlquorum controller voters.
//
//	ctrlnode dev     three voters and simulated brokers on localhost
//	ctrlnode help    this text
//
// Every command takes --help.
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
		{"dev", "run three voters and three simulated brokers on localhost", runDev},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: ctrlnode <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'ctrlnode <command> --help' for a command's flags.")
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
