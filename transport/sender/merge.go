package sender

import (
	"bytes"
	"sort"

	"github.com/ctrlquorum/ctrlquorum/controller"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// numRequests counts the requests of a set.
func numRequests(r *controller.Requests) int {
	n := 0
	if r.LeaderAndIsr != nil {
		n++
	}
	if r.UpdateMetadata != nil {
		n++
	}
	if r.StopReplica != nil {
		n++
	}
	return n
}

// setHeader is the header of a set: the highest controller epoch and
// metadata offset among its requests, and the broker epoch and
// controller id of the request with that epoch.
func setHeader(r *controller.Requests) controller.Header {
	var h controller.Header
	first := true
	for _, x := range []*controller.Header{laiHeader(r), umHeader(r), srHeader(r)} {
		if x == nil {
			continue
		}
		if first || x.ControllerEpoch > h.ControllerEpoch {
			h.ControllerEpoch, h.ControllerID, h.BrokerEpoch = x.ControllerEpoch, x.ControllerID, x.BrokerEpoch
		}
		h.MetadataOffset = max(h.MetadataOffset, x.MetadataOffset)
		first = false
	}
	return h
}

func laiHeader(r *controller.Requests) *controller.Header {
	if r.LeaderAndIsr == nil {
		return nil
	}
	return &r.LeaderAndIsr.Header
}

func umHeader(r *controller.Requests) *controller.Header {
	if r.UpdateMetadata == nil {
		return nil
	}
	return &r.UpdateMetadata.Header
}

func srHeader(r *controller.Requests) *controller.Header {
	if r.StopReplica == nil {
		return nil
	}
	return &r.StopReplica.Header
}

type partKey struct {
	id   rl.TopicID
	name string
	part int32
}

func lessKey(a, b partKey) bool {
	if c := bytes.Compare(a.id[:], b.id[:]); c != 0 {
		return c < 0
	}
	if a.name != b.name {
		return a.name < b.name
	}
	return a.part < b.part
}

// stamped is a partition state with the controller epoch that sent it.
type stamped struct {
	ps     controller.PartitionState
	cepoch int32
}

// supersedes reports whether b, queued after a, replaces it: a newer
// controller epoch wins, then a newer leader epoch, then a newer (or the
// same) partition epoch.
func supersedes(a, b stamped) bool {
	if b.cepoch != a.cepoch {
		return b.cepoch > a.cepoch
	}
	if b.ps.LeaderEpoch != a.ps.LeaderEpoch {
		return b.ps.LeaderEpoch > a.ps.LeaderEpoch
	}
	return b.ps.PartitionEpoch >= a.ps.PartitionEpoch
}

// merge coalesces request sets queued for one broker, oldest first, into
// one set that has the same effect when delivered in the order
// LeaderAndIsr, UpdateMetadata, StopReplica:
//
//   - LeaderAndIsr and UpdateMetadata keep the newest state of each
//     partition (see supersedes); a replica created in any of the sets
//     stays marked new;
//   - UpdateMetadata takes the newest live broker list;
//   - a full UpdateMetadata (a catch-up, which has the broker forget the
//     topics it does not name) keeps the merged request full: it names
//     the topics of the last full one and of every partition state queued
//     after it, less those announced after it with leader
//     LeaderDuringDelete, so a topic deleted after the catch-up is still
//     forgotten and one created after it is kept;
//   - a StopReplica followed by a newer LeaderAndIsr for the same
//     partition is dropped (the replica was brought back), while a
//     LeaderAndIsr followed by a StopReplica keeps both, which the
//     delivery order already gets right; repeated stops keep the newest
//     leader epoch (EpochDuringDelete, the stop of a topic being deleted,
//     wins over any other) and delete if any of them deletes.
//
// The inputs are not modified: UpdateMetadata partition lists are shared
// between brokers.
func merge(sets []controller.Requests) controller.Requests {
	if len(sets) == 1 {
		return sets[0]
	}
	out := controller.Requests{Broker: sets[0].Broker}
	var (
		lai      map[partKey]stamped
		um       map[partKey]stamped
		stop     map[partKey]controller.StopPartition
		leaders  map[int32]controller.LiveBroker
		laiHdr   controller.Header
		umHdr    controller.Header
		srHdr    controller.Header
		live     []controller.LiveBroker
		haveLAI  bool
		haveUM   bool
		haveStop bool
		offset   uint64
		// full is set once a full UpdateMetadata was seen; roster is then
		// the topics the merged one names.
		full   bool
		roster map[controller.TopicName]bool
	)
	name := func(ps *controller.PartitionState) {
		if !full {
			return
		}
		if k := (controller.TopicName{Name: ps.Topic, ID: ps.TopicID}); ps.Leader == controller.LeaderDuringDelete {
			delete(roster, k)
		} else {
			roster[k] = true
		}
	}
	for i := range sets {
		s := &sets[i]
		if h := setHeader(s); h.MetadataOffset > offset {
			offset = h.MetadataOffset
		}
		if r := s.UpdateMetadata; r != nil && r.Full {
			full = true
			roster = make(map[controller.TopicName]bool, len(r.Topics))
			for _, t := range r.Topics {
				roster[t] = true
			}
		}
		if r := s.LeaderAndIsr; r != nil {
			if lai == nil {
				lai = map[partKey]stamped{}
				leaders = map[int32]controller.LiveBroker{}
			}
			haveLAI = true
			laiHdr = newerHeader(laiHdr, r.Header)
			for _, ps := range r.Partitions {
				name(ps)
				k := partKey{ps.TopicID, ps.Topic, ps.Partition}
				n := stamped{*ps, r.ControllerEpoch}
				if old, ok := lai[k]; ok {
					isNew := old.ps.IsNew || ps.IsNew
					if !supersedes(old, n) {
						n = old
					}
					n.ps.IsNew = isNew
				}
				lai[k] = n
				delete(stop, k)
			}
			for _, l := range r.Leaders {
				leaders[l.ID] = l
			}
		}
		if r := s.UpdateMetadata; r != nil {
			if um == nil {
				um = map[partKey]stamped{}
			}
			haveUM = true
			umHdr = newerHeader(umHdr, r.Header)
			live = r.LiveBrokers
			for _, ps := range r.Partitions {
				if !r.Full {
					name(&ps)
				}
				k := partKey{ps.TopicID, ps.Topic, ps.Partition}
				n := stamped{ps, r.ControllerEpoch}
				if old, ok := um[k]; ok && !supersedes(old, n) {
					continue
				}
				um[k] = n
			}
		}
		if r := s.StopReplica; r != nil {
			if stop == nil {
				stop = map[partKey]controller.StopPartition{}
			}
			haveStop = true
			srHdr = newerHeader(srHdr, r.Header)
			for _, sp := range r.Partitions {
				k := partKey{sp.TopicID, sp.Topic, sp.Partition}
				if old, ok := stop[k]; ok {
					sp.Delete = sp.Delete || old.Delete
					if sp.LeaderEpoch == controller.EpochDuringDelete || old.LeaderEpoch == controller.EpochDuringDelete {
						sp.LeaderEpoch = controller.EpochDuringDelete
					} else {
						sp.LeaderEpoch = max(sp.LeaderEpoch, old.LeaderEpoch)
					}
				}
				stop[k] = sp
			}
		}
	}
	if haveLAI {
		laiHdr.MetadataOffset = offset
		req := &controller.LeaderAndIsr{Header: laiHdr}
		seen := map[int32]bool{}
		keys := sortedKeys(lai)
		states := make([]controller.PartitionState, len(keys))
		req.Partitions = make([]*controller.PartitionState, 0, len(keys))
		for i, k := range keys {
			states[i] = lai[k].ps
			ps := &states[i]
			req.Partitions = append(req.Partitions, ps)
			if l, ok := leaders[ps.Leader]; ok && !seen[ps.Leader] {
				seen[ps.Leader] = true
				req.Leaders = append(req.Leaders, l)
			}
		}
		sort.Slice(req.Leaders, func(i, j int) bool { return req.Leaders[i].ID < req.Leaders[j].ID })
		out.LeaderAndIsr = req
	}
	if haveUM {
		umHdr.MetadataOffset = offset
		req := &controller.UpdateMetadata{Header: umHdr, LiveBrokers: live}
		for _, k := range sortedKeys(um) {
			req.Partitions = append(req.Partitions, um[k].ps)
		}
		if full {
			req.Full = true
			req.Topics = make([]controller.TopicName, 0, len(roster))
			for t := range roster {
				req.Topics = append(req.Topics, t)
			}
			sort.Slice(req.Topics, func(i, j int) bool {
				a, b := req.Topics[i], req.Topics[j]
				return lessKey(partKey{id: a.ID, name: a.Name}, partKey{id: b.ID, name: b.Name})
			})
		}
		out.UpdateMetadata = req
	}
	if haveStop && len(stop) > 0 {
		srHdr.MetadataOffset = offset
		req := &controller.StopReplica{Header: srHdr}
		for _, k := range sortedKeys(stop) {
			req.Partitions = append(req.Partitions, stop[k])
		}
		out.StopReplica = req
	}
	return out
}

// newerHeader returns the header of the later request unless it carries
// an older controller epoch.
func newerHeader(cur, next controller.Header) controller.Header {
	if next.ControllerEpoch >= cur.ControllerEpoch {
		return next
	}
	return cur
}

func sortedKeys[V any](m map[partKey]V) []partKey {
	keys := make([]partKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return lessKey(keys[i], keys[j]) })
	return keys
}
