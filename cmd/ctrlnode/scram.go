package main

import (
	"crypto/rand"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
	"github.com/ctrlquorum/ctrlquorum/transport/sasl"
)

// SCRAM credentials (DescribeUserScramCredentials,
// AlterUserScramCredentials) are managed on the active controller. The
// password never leaves this process: the request carries a random salt
// and the salted password computed here, from which the controller
// derives the stored verifier.

// envSCRAMPassword holds the password of `scram set` when no
// --password-file is given.
const envSCRAMPassword = "CTRLNODE_SCRAM_PASSWORD"

// defaultScramIterations is the PBKDF2 iteration count of `scram set`.
const defaultScramIterations = 8192

func runSCRAM(args []string, stdout, stderr io.Writer) int {
	return dispatch("scram", "Manage the users' SCRAM credentials over the Kafka protocol, like kafka-configs.sh --entity-type users.", []subcommand{
		{"set", "create or replace a user's credential for one mechanism", scramSet},
		{"list", "list the users' credentials (mechanism and iterations, never secrets)", scramList},
		{"delete", "delete a user's credential for one mechanism", scramDelete},
	}, args, stdout, stderr)
}

// parseScramMechanism reads SCRAM-SHA-256 or SCRAM-SHA-512,
// case-insensitively.
func parseScramMechanism(s string) (rl.ScramMechanism, error) {
	switch canonicalMechanism(s) {
	case sasl.ScramSHA256:
		return rl.ScramSHA256, nil
	case sasl.ScramSHA512:
		return rl.ScramSHA512, nil
	}
	return 0, usageErr("--mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", s)
}

// scramSetSpec is a parsed `scram set`.
type scramSetSpec struct {
	user       string
	mechanism  rl.ScramMechanism
	iterations int
	password   string
}

func parseScramSet(user, mechanism string, iterations int, passwordFile string) (scramSetSpec, error) {
	if user == "" {
		return scramSetSpec{}, usageErr("--user is required")
	}
	m, err := parseScramMechanism(mechanism)
	if err != nil {
		return scramSetSpec{}, err
	}
	if iterations < sasl.MinIterations || iterations > sasl.MaxIterations {
		return scramSetSpec{}, usageErr("--iterations %d: want %d to %d", iterations, sasl.MinIterations, sasl.MaxIterations)
	}
	pass, err := passwordFromFileOrEnv("--password-file", passwordFile, envSCRAMPassword)
	if err != nil {
		return scramSetSpec{}, err
	}
	if pass == "" {
		return scramSetSpec{}, usageErr("--password-file (or $%s) is required and the password may not be empty", envSCRAMPassword)
	}
	return scramSetSpec{user: user, mechanism: m, iterations: iterations, password: pass}, nil
}

// scramResult is one user's outcome of `scram set` or `scram delete`.
type scramResult struct {
	User      string `json:"user"`
	Mechanism string `json:"mechanism"`
	Status    string `json:"status"`
	Error     string `json:"error,omitempty"`
}

func scramSet(args []string, stdout, stderr io.Writer) int {
	c := newCLI("scram set", "--user NAME [--mechanism SCRAM-SHA-512] [--iterations 8192] --password-file FILE [flags]",
		"Creates or replaces a user's SCRAM credential for one mechanism. The password\n"+
			"is the first line of --password-file, or $"+envSCRAMPassword+"; only a random salt\n"+
			"and the salted password are sent.", stdout, stderr)
	user := c.fs.String("user", "", "user name")
	mechanism := c.fs.String("mechanism", sasl.ScramSHA512, "SCRAM-SHA-256 or SCRAM-SHA-512")
	iterations := c.fs.Int("iterations", defaultScramIterations,
		fmt.Sprintf("PBKDF2 iterations (%d to %d)", sasl.MinIterations, sasl.MaxIterations))
	passwordFile := c.fs.String("password-file", "", "file whose first line is the user's new password (else $"+envSCRAMPassword+")")
	if code, done := c.parse(args); done {
		return code
	}
	spec, err := parseScramSet(*user, *mechanism, *iterations, *passwordFile)
	if err != nil {
		return c.fail(err)
	}
	salt := make([]byte, sasl.DefaultSaltSize)
	if _, err := rand.Read(salt); err != nil {
		return c.fail(err)
	}
	salted, err := sasl.SaltedPassword(spec.mechanism.String(), spec.password, salt, spec.iterations)
	if err != nil {
		return c.fail(err)
	}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations = spec.user, int8(spec.mechanism), int32(spec.iterations)
	up.Salt, up.SaltedPassword = salt, salted
	req.Upsertions = append(req.Upsertions, up)
	return c.alterScram(req, "set", []scramResult{{User: spec.user, Mechanism: spec.mechanism.String()}})
}

func scramDelete(args []string, stdout, stderr io.Writer) int {
	c := newCLI("scram delete", "--user NAME --mechanism SCRAM-SHA-256|SCRAM-SHA-512 [flags]",
		"Deletes a user's SCRAM credential for one mechanism; the user can no longer\nlog in with it.", stdout, stderr)
	var users listFlag
	c.fs.Var(&users, "user", "user name (repeat or comma-separate for several)")
	mechanism := c.fs.String("mechanism", "", "SCRAM-SHA-256 or SCRAM-SHA-512")
	if code, done := c.parse(args); done {
		return code
	}
	if len(users) == 0 {
		return c.fail(usageErr("--user is required"))
	}
	if *mechanism == "" {
		return c.fail(usageErr("--mechanism is required (SCRAM-SHA-256 or SCRAM-SHA-512)"))
	}
	m, err := parseScramMechanism(*mechanism)
	if err != nil {
		return c.fail(err)
	}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	var results []scramResult
	for _, u := range users {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = u, int8(m)
		req.Deletions = append(req.Deletions, d)
		results = append(results, scramResult{User: u, Mechanism: m.String()})
	}
	return c.alterScram(req, "deleted", results)
}

// alterScram sends req to the active controller and prints each user's
// outcome: status for success, the Kafka error otherwise.
func (c *cli) alterScram(req *kmsg.AlterUserSCRAMCredentialsRequest, status string, results []scramResult) int {
	ctx, cancel := c.context()
	defer cancel()
	r, err := c.toController(ctx, req, func(r kmsg.Response) error {
		for _, x := range r.(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
			if err := kafkaclient.NotController(x.ErrorCode); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return c.fail(err)
	}
	byUser := map[string]kmsg.AlterUserSCRAMCredentialsResponseResult{}
	for _, x := range r.(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
		byUser[x.User] = x
	}
	failed := 0
	for i := range results {
		x, ok := byUser[results[i].User]
		results[i].Status = status
		switch {
		case !ok:
			results[i].Status, results[i].Error = "failed", "no answer for this user"
		default:
			if err := kerr.ErrorForCode(x.ErrorCode); err != nil {
				msg := ""
				if x.ErrorMessage != nil {
					msg = *x.ErrorMessage
				}
				results[i].Status, results[i].Error = "failed", itemError(err, msg)
			}
		}
		if results[i].Error != "" {
			failed++
		}
	}
	if c.json {
		c.printJSON(map[string]any{"results": results})
	} else {
		var rows [][]string
		for _, x := range results {
			rows = append(rows, []string{x.User, x.Mechanism, x.Status, orDash(x.Error)})
		}
		c.table([]string{"USER", "MECHANISM", "RESULT", "ERROR"}, rows)
	}
	if failed > 0 {
		fmt.Fprintf(c.stderr, "ctrlnode %s: %d of %d failed\n", c.name, failed, len(results))
		return exitFailed
	}
	return exitOK
}

// scramCredential is one credential in `scram list`.
type scramCredential struct {
	User       string `json:"user"`
	Mechanism  string `json:"mechanism,omitempty"`
	Iterations int32  `json:"iterations,omitempty"`
	Error      string `json:"error,omitempty"`
}

func scramList(args []string, stdout, stderr io.Writer) int {
	c := newCLI("scram list", "[--user NAME]... [flags]",
		"Lists the users' SCRAM credentials: mechanism and iteration count (salts and\n"+
			"keys are never shown). Without --user, every user that has one.", stdout, stderr)
	var users listFlag
	c.fs.Var(&users, "user", "only these users (repeat or comma-separate); a user without a credential is an error")
	if code, done := c.parse(args); done {
		return code
	}
	ctx, cancel := c.context()
	defer cancel()
	req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, u := range users {
		ru := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		ru.Name = u
		req.Users = append(req.Users, ru)
	}
	r, err := c.toController(ctx, req, func(r kmsg.Response) error {
		return kafkaclient.NotController(r.(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode)
	})
	if err != nil {
		return c.fail(err)
	}
	resp := r.(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = *resp.ErrorMessage
		}
		return c.fail(fmt.Errorf("DescribeUserScramCredentials: %s", itemError(err, msg)))
	}
	out := []scramCredential{}
	failed := 0
	for _, res := range resp.Results {
		if err := kerr.ErrorForCode(res.ErrorCode); err != nil {
			msg := ""
			if res.ErrorMessage != nil {
				msg = *res.ErrorMessage
			}
			out = append(out, scramCredential{User: res.User, Error: itemError(err, msg)})
			failed++
			continue
		}
		for _, ci := range res.CredentialInfos {
			out = append(out, scramCredential{User: res.User, Mechanism: rl.ScramMechanism(ci.Mechanism).String(),
				Iterations: ci.Iterations})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].User != out[j].User {
			return out[i].User < out[j].User
		}
		return out[i].Mechanism < out[j].Mechanism
	})
	if c.json {
		c.printJSON(map[string]any{"credentials": out})
	} else {
		var rows [][]string
		for _, x := range out {
			if x.Error == "" {
				rows = append(rows, []string{x.User, x.Mechanism, strconv.Itoa(int(x.Iterations))})
			}
		}
		c.table([]string{"USER", "MECHANISM", "ITERATIONS"}, rows)
	}
	for _, x := range out {
		if x.Error != "" {
			fmt.Fprintf(c.stderr, "ctrlnode %s: user %s: %s\n", c.name, x.User, x.Error)
		}
	}
	if failed > 0 {
		fmt.Fprintf(c.stderr, "ctrlnode %s: %d of %d users failed\n", c.name, failed, len(users))
		return exitFailed
	}
	return exitOK
}
