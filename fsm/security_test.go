package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"testing"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

func scramRecord(user string, m rl.ScramMechanism) *rl.ScramCredential {
	n := m.KeySize()
	return &rl.ScramCredential{User: user, Mechanism: m, Iterations: 4096, Salt: []byte("salt-" + user),
		StoredKey: bytes.Repeat([]byte{1}, n), ServerKey: bytes.Repeat([]byte{2}, n)}
}

func rule(principal string, op rl.AclOperation) rl.AclRule {
	return rl.AclRule{Principal: principal, Host: "*", ResourceType: rl.ResourceTopic, ResourceName: "orders",
		PatternType: rl.PatternLiteral, Operation: op, Permission: rl.PermissionAllow}
}

func TestScramCredentialsApply(t *testing.T) {
	tf := newTestFSM(t)
	tf.mustCommit(scramRecord("alice", rl.ScramSHA512))
	tf.mustCommit(scramRecord("alice", rl.ScramSHA256))
	replaced := scramRecord("alice", rl.ScramSHA256)
	replaced.Iterations = 8192
	tf.mustCommit(replaced)
	tf.View(func(im *Image) {
		c := im.Security().ScramCredentials("alice")
		if len(c) != 2 || c[0].Mechanism != rl.ScramSHA256 || c[0].Iterations != 8192 || c[1].Mechanism != rl.ScramSHA512 {
			t.Fatalf("credentials: %+v", c)
		}
	})
	tf.mustCommit(&rl.DeleteScramCredential{User: "alice", Mechanism: rl.ScramSHA256})
	tf.mustCommit(&rl.DeleteScramCredential{User: "alice", Mechanism: rl.ScramSHA512})
	tf.View(func(im *Image) {
		if users := im.Security().Users(); len(users) != 0 {
			t.Fatalf("users after deleting every credential: %v", users)
		}
	})
}

func TestSecurityRecordsRejected(t *testing.T) {
	short := scramRecord("alice", rl.ScramSHA256)
	short.StoredKey = short.StoredKey[:31]
	lowIter := scramRecord("alice", rl.ScramSHA256)
	lowIter.Iterations = 4095
	badMech := scramRecord("alice", rl.ScramSHA256)
	badMech.Mechanism = 9
	noSalt := scramRecord("alice", rl.ScramSHA256)
	noSalt.Salt = nil
	noUser := scramRecord("", rl.ScramSHA256)
	clusterName := rule("User:a", rl.OpAlter)
	clusterName.ResourceType = rl.ResourceCluster
	anyOp := rule("User:a", rl.OpAny)
	badPrincipal := rule("alice", rl.OpRead)
	matchPattern := rule("User:a", rl.OpRead)
	matchPattern.PatternType = rl.PatternMatch
	noHost := rule("User:a", rl.OpRead)
	noHost.Host = ""
	existing := rule("User:carol", rl.OpRead)
	cases := []struct {
		name string
		rec  rl.Record
		want error
	}{
		{"short stored key", short, ErrInvalidRecord},
		{"too few iterations", lowIter, ErrInvalidRecord},
		{"unknown mechanism", badMech, ErrInvalidRecord},
		{"no salt", noSalt, ErrInvalidRecord},
		{"no user", noUser, ErrInvalidRecord},
		{"delete missing credential", &rl.DeleteScramCredential{User: "bob", Mechanism: rl.ScramSHA256}, ErrUnknownCredential},
		{"cluster resource misnamed", &rl.AclChange{Add: []rl.AclRule{clusterName}}, ErrInvalidRecord},
		{"filter operation stored", &rl.AclChange{Add: []rl.AclRule{anyOp}}, ErrInvalidRecord},
		{"principal without type", &rl.AclChange{Add: []rl.AclRule{badPrincipal}}, ErrInvalidRecord},
		{"filter pattern stored", &rl.AclChange{Add: []rl.AclRule{matchPattern}}, ErrInvalidRecord},
		{"empty host", &rl.AclChange{Add: []rl.AclRule{noHost}}, ErrInvalidRecord},
		{"rule added twice", &rl.AclChange{Add: []rl.AclRule{existing}}, ErrRuleExists},
		{"same rule twice in one change", &rl.AclChange{Add: []rl.AclRule{rule("User:d", rl.OpRead), rule("User:d", rl.OpRead)}}, ErrRuleExists},
		{"remove missing rule", &rl.AclChange{Remove: []rl.AclRule{rule("User:zed", rl.OpRead)}}, ErrUnknownRule},
		{"empty change", &rl.AclChange{}, ErrInvalidRecord},
	}
	tf := newTestFSM(t)
	tf.mustCommit(scramRecord("alice", rl.ScramSHA512), &rl.AclChange{Add: []rl.AclRule{existing}})
	before, _ := tf.StateHash()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := tf.commit(c.rec).Err()
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if h, _ := tf.StateHash(); h != before {
				t.Fatal("a rejected record changed the image")
			}
		})
	}
}

// Rules are kept in canonical order, so two voters that received the same
// rules in different changes have the same state hash.
func TestAclRulesCanonical(t *testing.T) {
	a, b := newTestFSM(t), newTestFSM(t)
	r1, r2, r3 := rule("User:a", rl.OpRead), rule("User:b", rl.OpWrite), rule("User:c", rl.OpAlter)
	a.mustCommit(&rl.AclChange{Add: []rl.AclRule{r1, r2, r3}})
	b.mustCommit(&rl.AclChange{Add: []rl.AclRule{r3}})
	b.mustCommit(&rl.AclChange{Add: []rl.AclRule{r2, r1}})
	ha, _ := a.StateHash()
	hb, _ := b.StateHash()
	if ha != hb {
		t.Fatal("the same rules added in another order give another state hash")
	}
	// Replacing a rule in one change: remove and add together.
	r4 := rule("User:a", rl.OpDescribe)
	a.mustCommit(&rl.AclChange{Remove: []rl.AclRule{r1}, Add: []rl.AclRule{r4}})
	a.View(func(im *Image) {
		if im.Security().HasRule(r1) || !im.Security().HasRule(r4) || len(im.Security().Rules()) != 3 {
			t.Fatalf("rules after replace: %v", im.Security().Rules())
		}
	})
}

// A Txn sees its own staged security changes; the image does not until
// they commit.
func TestTxnStagesSecurity(t *testing.T) {
	tf := newTestFSM(t)
	tf.View(func(im *Image) {
		tx := NewTxn(im, 1)
		if err := tx.Apply(scramRecord("alice", rl.ScramSHA256)); err != nil {
			t.Fatal(err)
		}
		child := tx.Child()
		if err := child.Stage(&rl.AclChange{Add: []rl.AclRule{rule("User:alice", rl.OpRead)}}); err != nil {
			t.Fatal(err)
		}
		tx.Merge(child)
		if len(tx.Security().ScramCredentials("alice")) != 1 || len(tx.Security().Rules()) != 1 {
			t.Fatal("Txn does not see its staged security records")
		}
		if len(im.Security().Users()) != 0 || len(im.Security().Rules()) != 0 {
			t.Fatal("staging changed the committed image")
		}
		if tx.Empty() {
			t.Fatal("a Txn with staged security records reports Empty")
		}
	})
}

// A format-1 snapshot (written before the security section existed) still
// restores, with no credentials and no rules.
func TestRestoreFormat1Snapshot(t *testing.T) {
	src := newTestFSM(t)
	src.seed(2, 1, 2)
	var buf bytes.Buffer
	if err := src.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	// A level 1 image is written in format 2: drop the empty security
	// section (two zero counts) and re-seal as format 1.
	if data[len(snapshotMagic)] != 2 {
		t.Fatalf("snapshot of a level 1 image in format %d, want 2", data[len(snapshotMagic)])
	}
	body := append([]byte(nil), data[:len(data)-4-2]...)
	if !bytes.Equal(data[len(data)-6:len(data)-4], []byte{0, 0}) {
		t.Fatalf("empty security section is not two zero counts: % x", data[len(data)-6:len(data)-4])
	}
	body[len(snapshotMagic)] = 1
	old := binary.BigEndian.AppendUint32(body, crc32.Checksum(body, castagnoli))
	dst := newTestFSM(t)
	if err := dst.Restore(io.NopCloser(bytes.NewReader(old))); err != nil {
		t.Fatal(err)
	}
	hs, _ := src.StateHash()
	hd, _ := dst.StateHash()
	if hs != hd {
		t.Fatal("format-1 snapshot restored to another state")
	}
}
