package fsm

import (
	"fmt"
	"sort"
	"strconv"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// BrokerConfigs is the image's dynamic broker configs: each broker's own
// (resource name: the broker id in decimal) and the cluster-wide default
// (resource name ""), as BrokerConfig records set them. Like Security, a
// BrokerConfigs is never changed once installed: apply builds a new one,
// so a snapshot, a Txn and readers share it without copying. There are a
// handful of keys per broker, so rebuilding per record costs little.
type BrokerConfigs struct {
	// byBroker holds each resource's configs sorted by key; a resource
	// with none is absent.
	byBroker map[string][]rl.ConfigEntry
}

var emptyBrokerConfigs = &BrokerConfigs{byBroker: map[string][]rl.ConfigEntry{}}

// ClusterDefault is the broker resource name of the cluster-wide default
// configs (Kafka's empty broker name).
const ClusterDefault = ""

// Configs returns the configs set for the broker resource (ClusterDefault
// for the cluster-wide default), sorted by key. The slice must not be
// changed.
func (c *BrokerConfigs) Configs(broker string) []rl.ConfigEntry { return c.byBroker[broker] }

// Config returns the value the broker resource sets for key.
func (c *BrokerConfigs) Config(broker, key string) (string, bool) {
	cfg := c.byBroker[broker]
	i := sort.Search(len(cfg), func(i int) bool { return cfg[i].Key >= key })
	if i < len(cfg) && cfg[i].Key == key {
		return cfg[i].Value, true
	}
	return "", false
}

// Resources returns the broker resource names that set at least one
// config, sorted (ClusterDefault first).
func (c *BrokerConfigs) Resources() []string {
	out := make([]string, 0, len(c.byBroker))
	for b := range c.byBroker {
		out = append(out, b)
	}
	sort.Strings(out)
	return out
}

// CheckBrokerResource reports what is wrong with a broker config resource
// name, or nil: it is ClusterDefault or a broker id (0 to 2^31-1) in
// plain decimal, so that one broker has one name.
func CheckBrokerResource(name string) error {
	if name == ClusterDefault {
		return nil
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil || id < 0 || strconv.FormatInt(id, 10) != name {
		return fmt.Errorf("broker resource %q is not a broker id", name)
	}
	return nil
}

// BrokerConfigs implements Reader.
func (im *Image) BrokerConfigs() *BrokerConfigs { return im.bcfg }

func (im *Image) brokerConfigs() *BrokerConfigs     { return im.bcfg }
func (im *Image) setBrokerConfigs(c *BrokerConfigs) { im.bcfg = c }

// BrokerConfigs implements Reader.
func (tx *Txn) BrokerConfigs() *BrokerConfigs { return tx.brokerConfigs() }

func (tx *Txn) brokerConfigs() *BrokerConfigs {
	if tx.bcfg != nil {
		return tx.bcfg
	}
	return tx.base.brokerConfigs()
}

func (tx *Txn) setBrokerConfigs(c *BrokerConfigs) { tx.bcfg = c }

func applyBrokerConfig(im store, r *rl.BrokerConfig) error {
	if err := CheckBrokerResource(r.Broker); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidRecord, err)
	}
	if r.Key == "" {
		return fmt.Errorf("%w: empty config key", ErrInvalidRecord)
	}
	old := im.brokerConfigs()
	cur := old.byBroker[r.Broker]
	cfg := make([]rl.ConfigEntry, 0, len(cur)+1)
	for _, e := range cur {
		if e.Key != r.Key {
			cfg = append(cfg, e)
		}
	}
	if !r.Delete {
		cfg = append(cfg, rl.ConfigEntry{Key: r.Key, Value: r.Value})
		sort.SliceStable(cfg, func(i, j int) bool { return cfg[i].Key < cfg[j].Key })
	}
	byBroker := make(map[string][]rl.ConfigEntry, len(old.byBroker)+1)
	for b, c := range old.byBroker {
		byBroker[b] = c
	}
	if len(cfg) == 0 {
		delete(byBroker, r.Broker)
	} else {
		byBroker[r.Broker] = cfg
	}
	im.setBrokerConfigs(&BrokerConfigs{byBroker: byBroker})
	return nil
}

// brokerConfigEntry is one broker resource's configs in a snapshot.
type brokerConfigEntry struct {
	_msgpack struct{} `msgpack:",as_array"`
	Broker   string
	Configs  []rl.ConfigEntry
}

// writeBrokerConfigs appends the broker config section of a snapshot
// body: the resources that set configs, sorted by name, each with its
// configs sorted by key.
func writeBrokerConfigs(c *chunkWriter, bc *BrokerConfigs) {
	names := bc.Resources()
	c.uvarint(uint64(len(names)))
	for _, b := range names {
		c.msgpack(&brokerConfigEntry{Broker: b, Configs: bc.byBroker[b]})
	}
}

// readBrokerConfigs reads what writeBrokerConfigs wrote, with apply's
// checks, and requires the canonical order (which also rules out
// duplicates) and no empty resource.
func readBrokerConfigs(r *reader) *BrokerConfigs {
	bc := &BrokerConfigs{byBroker: map[string][]rl.ConfigEntry{}}
	n := r.count("broker config resource count", 1)
	prev := ""
	for i := 0; i < n && r.err == nil; i++ {
		var e brokerConfigEntry
		r.msgpack("broker configs", &e)
		if r.err != nil {
			break
		}
		if err := CheckBrokerResource(e.Broker); err != nil {
			r.fail("%v", err)
			break
		}
		if i > 0 && e.Broker <= prev {
			r.fail("broker config resources out of order at %q", e.Broker)
			break
		}
		if len(e.Configs) == 0 {
			r.fail("broker resource %q has an empty config list", e.Broker)
			break
		}
		for j, c := range e.Configs {
			if c.Key == "" || j > 0 && c.Key <= e.Configs[j-1].Key {
				r.fail("broker resource %q: config keys empty or out of order at %q", e.Broker, c.Key)
				break
			}
		}
		bc.byBroker[e.Broker] = e.Configs
		prev = e.Broker
	}
	return bc
}
