package raftlog

import (
	"strings"
	"testing"
)

// TestTopicIDPrintsAsKafkaUuid checks String against the form Kafka's
// Uuid.toString prints, and that ParseTopicID reads it back, and reads the
// older forms a user may paste, and refuses what is not an id.
func TestTopicIDPrintsAsKafkaUuid(t *testing.T) {
	var id TopicID
	for i := range id {
		id[i] = byte(0xf0 + i) // 0xf8, 0xfb, ... give '-' and '_' in URL-safe base64
	}
	const want = "8PHy8_T19vf4-fr7_P3-_w"
	if got := id.String(); got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	for _, s := range []string{
		want,
		"8PHy8_T19vf4-fr7_P3-_w==",
		"8PHy8/T19vf4+fr7/P3+/w==",
		"8PHy8/T19vf4+fr7/P3+/w",
		"f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff",
		"f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfeff",
		" " + want + "\n",
	} {
		got, err := ParseTopicID(s)
		if err != nil || got != id {
			t.Errorf("ParseTopicID(%q) = %v, %v; want %v", s, got, err, id)
		}
	}
	for _, s := range []string{"", "abc", want[:21], want + "A", "8PHy8_T19vf4+fr7_P3-_w", strings.Repeat("g", 32), "f0f1f2f3f4f5-f6f7-f8f9-fafbfcfdfeff"} {
		if got, err := ParseTopicID(s); err == nil {
			t.Errorf("ParseTopicID(%q) = %v, want an error", s, got)
		}
	}
}
