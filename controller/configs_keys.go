package controller

import (
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// topicConfigs lists the topic configuration keys the controller accepts,
// with a check of each value. The controller itself reads only the first
// two; the others are stored for brokers and tools.
var topicConfigs = map[string]func(string) bool{
	"unclean.leader.election.enable": isBool,
	"min.insync.replicas":            isIntAtLeast(1),
	"cleanup.policy": func(v string) bool {
		return v == "delete" || v == "compact" || v == "compact,delete" || v == "delete,compact"
	},
	"retention.ms":                  isIntAtLeast(-1),
	"retention.bytes":               isIntAtLeast(-1),
	"segment.bytes":                 isIntAtLeast(14),
	"segment.ms":                    isIntAtLeast(1),
	"max.message.bytes":             isIntAtLeast(0),
	"min.compaction.lag.ms":         isIntAtLeast(0),
	"delete.retention.ms":           isIntAtLeast(0),
	"compression.type":              oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
	"message.timestamp.type":        oneOf("CreateTime", "LogAppendTime"),
	"flush.messages":                isIntAtLeast(1),
	"flush.ms":                      isIntAtLeast(0),
	"preallocate":                   isBool,
	"local.retention.ms":            isIntAtLeast(-2),
	"local.retention.bytes":         isIntAtLeast(-2),
	"remote.storage.enable":         isBool,
	"message.downconversion.enable": isBool,
}

func isBool(v string) bool { return v == "true" || v == "false" }

func isIntAtLeast(min int64) func(string) bool {
	return func(v string) bool {
		n, err := strconv.ParseInt(v, 10, 64)
		return err == nil && n >= min
	}
}

func oneOf(vals ...string) func(string) bool {
	return func(v string) bool {
		for _, x := range vals {
			if v == x {
				return true
			}
		}
		return false
	}
}

// validateConfigs checks keys and values and returns them sorted by key.
func validateConfigs(in []rl.ConfigEntry) ([]rl.ConfigEntry, error) {
	out := append([]rl.ConfigEntry(nil), in...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	for i, e := range out {
		check, ok := topicConfigs[e.Key]
		if !ok {
			return nil, kafkaErr(kerr.InvalidConfig, "unknown topic config %q", e.Key)
		}
		if !check(e.Value) {
			return nil, kafkaErr(kerr.InvalidConfig, "invalid value %q for topic config %q", e.Value, e.Key)
		}
		if i > 0 && out[i-1].Key == e.Key {
			return nil, kafkaErr(kerr.InvalidConfig, "topic config %q given twice", e.Key)
		}
	}
	return out, nil
}
