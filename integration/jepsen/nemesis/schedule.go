// Package nemesis injects the faults of a jepsen-style run: a schedule
// generated from a seed (the same seed gives the same faults at the same
// offsets), a runner that applies and heals each fault against a Cluster
// and records it on a timeline, and the network namespace the runs use
// for partitions (iptables rules between 127.0.0.x addresses, inside a
// namespace created for the run and deleted after it).
//
// Hosts are numbered from 1: host i is 127.0.0.i, and voter i runs there.
// Broker agents share those hosts; a partition cuts hosts, so it cuts the
// agents on them too. Only 127.0.0.0/8 addresses are ever used.
package nemesis

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"
)

// Kind is a kind of fault.
type Kind string

const (
	// Kill: kill -9 a voter (a chosen one, or the active controller),
	// restart it at the heal.
	Kill Kind = "kill"
	// Pause: SIGSTOP a voter, SIGCONT at the heal.
	Pause Kind = "pause"
	// PartitionLeader: cut the active controller's host off from the
	// others, both ways.
	PartitionLeader Kind = "partition-leader"
	// PartitionMajority: split the hosts into a minority and a majority,
	// cut both ways between them.
	PartitionMajority Kind = "partition-majority-minority"
	// PartitionOneWay: drop packets from one host to another (or from the
	// active controller to everyone) in one direction only.
	PartitionOneWay Kind = "partition-one-way"
	// PartitionBridge: one host sees both sides; the two sides do not see
	// each other.
	PartitionBridge Kind = "partition-bridge"
	// BrokerCrash: kill -9 a broker agent, restart it at the heal.
	BrokerCrash Kind = "broker-crash"
	// HeartbeatFlap: a broker agent's heartbeats stop and resume every
	// flap period until the heal, so its session expires and comes back.
	HeartbeatFlap Kind = "heartbeat-flap"
	// PowerLoss: cut the power of a voter's disk (a lossyfs mount under
	// its data directory: what it has not synced is lost, or a prefix of
	// it kept) and kill -9 the voter; at the heal the disk is mounted
	// again on what survived and the voter restarted.
	PowerLoss Kind = "power-loss"
	// ReplaceVoter: a voter's disk is lost: kill -9 the voter, wipe its
	// data directory, format it again (a new directory id) and start it;
	// the quorum must refuse it as the voter it was. At the heal the
	// voter of the old directory is removed and the node added under its
	// new one, through the membership API (RemoveRaftVoter, AddRaftVoter).
	ReplaceVoter Kind = "replace-voter"
)

// AllKinds is every kind, in a fixed order.
var AllKinds = []Kind{Kill, Pause, PartitionLeader, PartitionMajority, PartitionOneWay, PartitionBridge, BrokerCrash, HeartbeatFlap, PowerLoss, ReplaceVoter}

// Network reports whether the kind needs the network namespace and
// iptables (root).
func (k Kind) Network() bool {
	switch k {
	case PartitionLeader, PartitionMajority, PartitionOneWay, PartitionBridge:
		return true
	}
	return false
}

// Disk reports whether the kind needs the voters' data directories on
// lossy file systems (FUSE: root and /dev/fuse).
func (k Kind) Disk() bool { return k == PowerLoss }

// Broker reports whether the kind targets broker agents.
func (k Kind) Broker() bool { return k == BrokerCrash || k == HeartbeatFlap }

var groups = map[string][]Kind{
	"all":       AllKinds,
	"none":      nil,
	"process":   {Kill, Pause, PowerLoss, ReplaceVoter},
	"partition": {PartitionLeader, PartitionMajority, PartitionOneWay, PartitionBridge},
	"broker":    {BrokerCrash, HeartbeatFlap},
}

// ParseKinds reads the -nemesis flag: a comma-separated list of kinds and
// groups (all, none, process, partition, broker). "" means all.
func ParseKinds(s string) ([]Kind, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return slices.Clone(AllKinds), nil
	}
	var out []Kind
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if g, ok := groups[part]; ok {
			for _, k := range g {
				if !slices.Contains(out, k) {
					out = append(out, k)
				}
			}
			continue
		}
		if !slices.Contains(AllKinds, Kind(part)) {
			names := make([]string, 0, len(AllKinds)+len(groups))
			for _, k := range AllKinds {
				names = append(names, string(k))
			}
			for g := range groups {
				names = append(names, g)
			}
			sort.Strings(names)
			return nil, fmt.Errorf("unknown nemesis %q (known: %s)", part, strings.Join(names, ", "))
		}
		if !slices.Contains(out, Kind(part)) {
			out = append(out, Kind(part))
		}
	}
	return out, nil
}

// WithoutNetwork splits kinds into those that need no network namespace
// and those that do.
func WithoutNetwork(kinds []Kind) (kept, dropped []Kind) { return without(kinds, Kind.Network) }

// WithoutDisk splits kinds into those that need no lossy file system and
// those that do.
func WithoutDisk(kinds []Kind) (kept, dropped []Kind) { return without(kinds, Kind.Disk) }

// without splits kinds into those that need is false for and those it is
// true for.
func without(kinds []Kind, need func(Kind) bool) (kept, dropped []Kind) {
	for _, k := range kinds {
		if need(k) {
			dropped = append(dropped, k)
		} else {
			kept = append(kept, k)
		}
	}
	return kept, dropped
}

// Cut drops the packets from host From to host To (one direction).
type Cut struct {
	From int `json:"from"`
	To   int `json:"to"`
}

func (c Cut) String() string { return fmt.Sprintf("%s→%s", HostIP(c.From), HostIP(c.To)) }

// HostIP is host i's address, 127.0.0.i.
func HostIP(host int) string { return fmt.Sprintf("127.0.0.%d", host) }

// both is the cuts between two groups of hosts, in both directions.
func both(a, b []int) []Cut {
	var out []Cut
	for _, x := range a {
		for _, y := range b {
			out = append(out, Cut{x, y}, Cut{y, x})
		}
	}
	return out
}

// Fault is one scheduled fault.
type Fault struct {
	ID   int  `json:"id"`
	Kind Kind `json:"kind"`
	// At is the fault's start, from the start of the run; For is how long
	// it lasts before the heal.
	At  time.Duration `json:"at"`
	For time.Duration `json:"for"`
	// Leader: the target is the active controller's host, found when the
	// fault starts (Resolve).
	Leader bool `json:"leader,omitempty"`
	// Hosts are the voters' hosts a process fault hits.
	Hosts []int `json:"hosts,omitempty"`
	// Brokers are the broker agents a broker fault hits.
	Brokers []int `json:"brokers,omitempty"`
	// Cuts are a partition's dropped links.
	Cuts []Cut `json:"cuts,omitempty"`
	// FlapPeriod is how often a heartbeat flap toggles.
	FlapPeriod time.Duration `json:"flap_period,omitempty"`
	// KeepPrefix: a power loss keeps a prefix of the unsynced changes
	// (drawn from CutSeed) instead of dropping them all.
	KeepPrefix bool `json:"keep_prefix,omitempty"`
	// CutSeed seeds a power loss's random source.
	CutSeed uint64 `json:"cut_seed,omitempty"`
}

// CutMode names a power loss's outcome: keep-prefix or drop-unsynced.
func (f Fault) CutMode() string {
	if f.KeepPrefix {
		return "keep-prefix"
	}
	return "drop-unsynced"
}

// Resolve fills in a leader-targeted fault for the active controller on
// host leader, among hosts 1..hosts.
func (f Fault) Resolve(leader, hosts int) Fault {
	if !f.Leader {
		return f
	}
	others := make([]int, 0, hosts-1)
	for h := 1; h <= hosts; h++ {
		if h != leader {
			others = append(others, h)
		}
	}
	switch f.Kind {
	case Kill, Pause, PowerLoss, ReplaceVoter:
		f.Hosts = []int{leader}
	case PartitionLeader:
		f.Hosts = []int{leader}
		f.Cuts = both([]int{leader}, others)
	case PartitionOneWay:
		f.Hosts = []int{leader}
		f.Cuts = nil
		for _, o := range others {
			f.Cuts = append(f.Cuts, Cut{leader, o})
		}
	}
	return f
}

func (f Fault) String() string {
	s := fmt.Sprintf("fault %d %s at +%s for %s", f.ID, f.Kind, f.At.Round(time.Millisecond), f.For.Round(time.Millisecond))
	if f.Leader && len(f.Hosts) == 0 {
		s += " on the leader"
	}
	if len(f.Hosts) > 0 {
		s += fmt.Sprintf(" hosts %v", f.Hosts)
	}
	if len(f.Brokers) > 0 {
		s += fmt.Sprintf(" brokers %v", f.Brokers)
	}
	if f.Kind == PowerLoss {
		s += fmt.Sprintf(" %s seed %d", f.CutMode(), f.CutSeed)
	}
	if len(f.Cuts) > 0 {
		cs := make([]string, len(f.Cuts))
		for i, c := range f.Cuts {
			cs[i] = c.String()
		}
		s += " dropping " + strings.Join(cs, " ")
	}
	return s
}

// Config is what a schedule is generated from.
type Config struct {
	Seed     uint64
	Duration time.Duration
	Kinds    []Kind
	// Hosts is the number of voters (and hosts), at least 3 for
	// partitions.
	Hosts int
	// Brokers are the broker agents' ids, for broker faults.
	Brokers []int
	// Quiet time between faults, and each fault's length, drawn
	// uniformly. Defaults: 2–5 s quiet, 3–8 s faults, 1 s flap period.
	MinQuiet, MaxQuiet time.Duration
	MinFault, MaxFault time.Duration
	FlapPeriod         time.Duration
	// Settle is the fault-free time at the end of the run, for the
	// cluster to heal before the final reads. Default: 5 s.
	Settle time.Duration
}

func (c *Config) defaults() {
	if c.MinQuiet <= 0 {
		c.MinQuiet = 2 * time.Second
	}
	if c.MaxQuiet < c.MinQuiet {
		c.MaxQuiet = max(5*time.Second, c.MinQuiet)
	}
	if c.MinFault <= 0 {
		c.MinFault = 3 * time.Second
	}
	if c.MaxFault < c.MinFault {
		c.MaxFault = max(8*time.Second, c.MinFault)
	}
	if c.FlapPeriod <= 0 {
		c.FlapPeriod = time.Second
	}
	if c.Settle <= 0 {
		c.Settle = 5 * time.Second
	}
	if c.Hosts == 0 {
		c.Hosts = 3
	}
}

// Generate draws the schedule: faults one after another (never two at
// once), each with its start, length and targets, the last one healed
// Settle before the end. The same Config gives the same schedule.
func Generate(cfg Config) ([]Fault, error) {
	cfg.defaults()
	if cfg.Duration <= 0 {
		return nil, errors.New("nemesis: the duration must be positive")
	}
	for _, k := range cfg.Kinds {
		if k.Network() && cfg.Hosts < 3 {
			return nil, fmt.Errorf("nemesis: %s needs at least 3 hosts, have %d", k, cfg.Hosts)
		}
		if k.Broker() && len(cfg.Brokers) == 0 {
			return nil, fmt.Errorf("nemesis: %s needs broker agents", k)
		}
		if !slices.Contains(AllKinds, k) {
			return nil, fmt.Errorf("nemesis: unknown kind %q", k)
		}
	}
	if len(cfg.Kinds) == 0 {
		return nil, nil
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6e656d65))
	between := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
	}
	hosts := make([]int, cfg.Hosts)
	for i := range hosts {
		hosts[i] = i + 1
	}
	var out []Fault
	at := between(cfg.MinQuiet, cfg.MaxQuiet)
	for {
		length := between(cfg.MinFault, cfg.MaxFault)
		if at+length > cfg.Duration-cfg.Settle {
			break
		}
		f := Fault{ID: len(out) + 1, Kind: cfg.Kinds[rng.IntN(len(cfg.Kinds))], At: at, For: length}
		shuffled := slices.Clone(hosts)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		switch f.Kind {
		case Kill, Pause, PowerLoss, ReplaceVoter:
			// Half the time the active controller, to force a failover.
			if rng.IntN(2) == 0 {
				f.Leader = true
			} else {
				f.Hosts = []int{shuffled[0]}
			}
			if f.Kind == PowerLoss {
				f.KeepPrefix = rng.IntN(2) == 0
				f.CutSeed = rng.Uint64()
			}
		case PartitionLeader:
			f.Leader = true
		case PartitionMajority:
			minority := shuffled[:1+rng.IntN((cfg.Hosts-1)/2)]
			f.Hosts = slices.Sorted(slices.Values(minority))
			f.Cuts = both(minority, shuffled[len(minority):])
		case PartitionOneWay:
			if rng.IntN(2) == 0 {
				f.Leader = true
			} else {
				f.Hosts = []int{shuffled[0]}
				f.Cuts = []Cut{{shuffled[0], shuffled[1]}}
			}
		case PartitionBridge:
			bridge, rest := shuffled[0], shuffled[1:]
			half := len(rest) / 2
			f.Hosts = []int{bridge}
			f.Cuts = both(rest[:half], rest[half:])
		case BrokerCrash, HeartbeatFlap:
			f.Brokers = []int{cfg.Brokers[rng.IntN(len(cfg.Brokers))]}
			if f.Kind == HeartbeatFlap {
				f.FlapPeriod = cfg.FlapPeriod
			}
		}
		out = append(out, f)
		at += length + between(cfg.MinQuiet, cfg.MaxQuiet)
	}
	return out, nil
}
