package listener

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/controller"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
	"github.com/ctrlquorum/ctrlquorum/transport/sasl"
)

// SCRAM credential management (KIP-554). The request carries a salted
// password, never the password; the listener derives the verifier's keys
// from it and the log stores only salt, iterations and keys.

func (l *Listener) describeScram(req *kmsg.DescribeUserSCRAMCredentialsRequest) *kmsg.DescribeUserSCRAMCredentialsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	sec := l.securityState()
	users := sec.Users()
	if req.Users != nil {
		users = users[:0:0]
		seen := map[string]int{}
		for _, u := range req.Users {
			seen[u.Name]++
			if seen[u.Name] == 1 {
				users = append(users, u.Name)
			}
		}
		sort.Strings(users)
		for _, u := range users {
			if seen[u] > 1 {
				res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
				msg := "user named more than once in the request"
				res.User, res.ErrorCode, res.ErrorMessage = u, kerr.DuplicateResource.Code, &msg
				resp.Results = append(resp.Results, res)
			}
		}
	}
	for _, u := range users {
		creds := sec.ScramCredentials(u)
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = u
		if len(creds) == 0 {
			if req.Users == nil {
				continue
			}
			msg := "no SCRAM credential for this user"
			res.ErrorCode, res.ErrorMessage = kerr.ResourceNotFound.Code, &msg
		}
		for _, c := range creds {
			info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			info.Mechanism, info.Iterations = int8(c.Mechanism), c.Iterations
			res.CredentialInfos = append(res.CredentialInfos, info)
		}
		resp.Results = append(resp.Results, res)
	}
	return resp
}

func (l *Listener) alterScram(ctx context.Context, c *kafkawire.Conn, req *kmsg.AlterUserSCRAMCredentialsRequest) *kmsg.AlterUserSCRAMCredentialsResponse {
	resp := l.atActive(ctx, c, req, func(ctx context.Context) kmsg.Response {
		return l.alterScramHere(ctx, req)
	})
	return resp.(*kmsg.AlterUserSCRAMCredentialsResponse)
}

func (l *Listener) alterScramHere(ctx context.Context, req *kmsg.AlterUserSCRAMCredentialsRequest) *kmsg.AlterUserSCRAMCredentialsResponse {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var dels []controller.ScramDeletion
	var ups []controller.ScramUpsert
	bad := map[string]error{}
	var order []string
	seen := map[string]bool{}
	note := func(u string) {
		if !seen[u] {
			seen[u] = true
			order = append(order, u)
		}
	}
	for _, d := range req.Deletions {
		note(d.Name)
		dels = append(dels, controller.ScramDeletion{User: d.Name, Mechanism: rl.ScramMechanism(d.Mechanism)})
	}
	for _, u := range req.Upsertions {
		note(u.Name)
		m := rl.ScramMechanism(u.Mechanism)
		if m.KeySize() == 0 {
			if bad[u.Name] == nil {
				bad[u.Name] = kafkaErr(kerr.UnsupportedSaslMechanism, "SCRAM mechanism %d", u.Mechanism)
			}
			continue
		}
		// The derivation checks the iterations and the salted password's size.
		cred, err := sasl.CredentialFromSaltedPassword(m.String(), u.Salt, u.SaltedPassword, int(u.Iterations))
		if err != nil {
			if bad[u.Name] == nil {
				bad[u.Name] = kafkaErr(kerr.UnacceptableCredential, "%v", err)
			}
			continue
		}
		ups = append(ups, controller.ScramUpsert{User: u.Name, Mechanism: m, Iterations: u.Iterations,
			Salt: cred.Salt, StoredKey: cred.StoredKey, ServerKey: cred.ServerKey})
	}
	// A user with a bad entry changes nothing at all.
	keepDels := dels[:0]
	for _, d := range dels {
		if bad[d.User] == nil {
			keepDels = append(keepDels, d)
		}
	}
	keepUps := ups[:0]
	for _, u := range ups {
		if bad[u.User] == nil {
			keepUps = append(keepUps, u)
		}
	}
	ctx, cancel := l.requestContext(ctx, 0)
	defer cancel()
	results := map[string]error{}
	if len(keepDels)+len(keepUps) > 0 {
		results = l.node.Controller.AlterScramCredentials(ctx, keepDels, keepUps)
	}
	for _, u := range order {
		err := bad[u]
		if err == nil {
			err = results[u]
		}
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User, res.ErrorCode, res.ErrorMessage = u, errorCode(err), errorMessage(err)
		resp.Results = append(resp.Results, res)
	}
	return resp
}
