// Package zookeeper is the ZooKeeper adapter: it imports a ZooKeeper-mode
// Kafka cluster's metadata into the log, and mirrors the image back into
// Kafka's znodes for the tools and brokers that still read ZooKeeper.
// ZooKeeper is never the source of truth here.
//
// # Import (Migrate)
//
// Migrate reads /controller_epoch, /controller, /brokers/ids/<id>,
// /brokers/topics/<topic> (assignment, adding_replicas, removing_replicas,
// topic_id), /brokers/topics/<topic>/partitions/<p>/state,
// /config/topics/<topic>, /admin/delete_topics/<topic> and
// /admin/reassign_partitions, turns them into records and commits them
// through the active controller (controller.Controller.Import), so every
// record passes the FSM's rules. A dry run returns the Plan (counts and a
// readable list) and commits nothing; it also stages each topic's records
// on a Txn over the image, so it reports what the FSM would refuse.
//
// The mapping:
//   - /controller_epoch E: our controller epoch is raised to at least E+1
//     (brokers refuse requests from a lower epoch than one they saw).
//   - /brokers/ids/<id>: RegisterBroker, then unfenced with a fresh session
//     on the active controller: the broker must heartbeat within the
//     session timeout or is fenced like any other. Its incarnation id is
//     derived from the broker id and the registration znode's czxid
//     (Broker.Incarnation), so the same registration always imports as the
//     same incarnation. A broker id the image already has is left alone.
//   - /brokers/topics/<topic>: a Topic with the znode's topic_id (Kafka's
//     URL-safe base64 uuid), or, for a znode without one (Kafka before
//     2.8), an id derived from the name and the znode's czxid, so a second
//     import finds the same id. Configs come from /config/topics/<topic>.
//   - Each partition: Partition (full assignment; during a reassignment the
//     union, as Kafka keeps it), its replicas NewReplica, then
//     PartitionChange steps to the state znode's leader, leader_epoch and
//     ISR, with adding/removing replicas as the reassignment, then
//     OnlinePartition (a leader) or OfflinePartition (leader -1), replicas
//     on live brokers OnlineReplica and the others OfflineReplica.
//   - Leader epochs: the FSM bumps the leader epoch by one on each change
//     of leader, so epoch E is reproduced by E PartitionChange steps that
//     alternate the leader (see leaderWalk); the partition epoch ends at
//     the number of steps (not the state znode's version). Two cases cannot
//     be reproduced and are imported one higher, never lower: epoch 0 with
//     a leader (Kafka's first leader has epoch 0, ours 1) and, with a single
//     replica, the wrong parity. Plan.EpochRaised counts them. The cost is
//     one record per epoch step.
//   - /admin/delete_topics/<topic>: BeginDeleteTopic; the deletion then
//     carries on as any other. /admin/reassign_partitions entries whose
//     topic znode shows no reassignment yet (the pre-2.4 way) start one as
//     Kafka does: assignment target ∪ original, the new replicas
//     NewReplica.
//   - Partitions with no state znode stay NewPartition and are then
//     brought online like new partitions.
//
// After the topics, the import settles them as a ZooKeeper-era controller
// would have on taking over: the broker-failure transitions run for
// brokers that are not live (a partition still led by a broker missing
// from /brokers/ids, as an older ZooKeeper-era controller left it when it
// died together with that broker, gets an Offline election: leader -1 with
// its ISR kept when nobody clean can lead; see docs/statemachines.md, the
// case the controller exists for), leaderless partitions get an election,
// and pending deletions and reassignments are resumed.
//
// Import is idempotent and resumable: brokers and topics (by id) the image
// has are skipped, so running it twice changes nothing; a topic whose name
// the image holds under another id is a conflict and nothing is committed.
//
// # Mirror
//
// StartMirror installs the FSM's commit listener. While the image names
// this node as the controller of record it notes which znodes each batch
// touched (bounded; past the bound it falls back to a full reconcile), and
// a background writer renders them from the image and writes those that
// differ from what ZooKeeper holds, so it never blocks the controller and
// coalesces many changes to one znode into one write. It claims ZooKeeper
// by setting /controller_epoch to its epoch (compare-and-set on the
// znode's version) and leads every multi-op with a check of that version:
// once another node claims a newer epoch, a deposed node's late write
// fails (ErrFenced). On every new session, after any failed write and on
// every claim it reconciles in full (reads every managed znode, writes the
// differences, deletes what the image does not have), so after an outage
// it ends identical to the image whatever it missed.
//
// Znodes written, in Kafka's formats: /controller
// {"version":1,"brokerid":N,"timestamp":"ms"} naming this node (persistent,
// not ephemeral, so ZooKeeper-mode brokers do not contend for it);
// /controller_epoch; /brokers/ids/<id> (version 4) for live brokers;
// /brokers/topics/<topic> (version 3 with topic_id) and its partitions'
// state znodes {"controller_epoch":E,"leader":L,"version":1,
// "leader_epoch":LE,"isr":[…]}; /config/topics/<topic>;
// /admin/delete_topics/<topic> while a deletion is pending;
// /admin/reassign_partitions listing reassignment targets while any is in
// progress. A removed topic's znodes are deleted. As in Kafka, a state
// znode's controller_epoch names the controller that last wrote it: a new
// controller does not rewrite state it did not change, so comparisons
// cover leader, leader epoch and ISR.
package zookeeper
