// Package controller is the active controller of a cluster: it decides
// broker registration and fencing, replica and partition state
// transitions, leader elections, the topic lifecycle, reassignments,
// topic configs and security rules, writes every decision to the raft log
// as records, and sends brokers the control requests those records call
// for once they have committed. docs/architecture.md places it among the
// packages and follows a request, a broker failure and a failover through
// it; docs/controller.md describes the loop and the managers, and
// docs/statemachines.md the state machines, elections and broker
// lifecycle they implement.
//
// # Architecture
//
// As Kafka's QuorumController, it is a thin driver, the event loop, over
// managers that each own a slice of the metadata image and the requests
// about it:
//
//	quorum.go          quorumManager: the controller epoch
//	features.go        featuresManager: the finalized feature levels
//	                   (metadata.version), UpdateFeatures
//	cluster*.go        clusterManager: registration, heartbeats and sessions,
//	                   fencing (on a session's expiry, or at once when a
//	                   crashed broker's listener refuses connections:
//	                   cluster_refusal.go), controlled shutdown, unregistration
//	replication*.go    replicationManager: replica and partition state machines,
//	                   elections, topic creation and deletion, partitions,
//	                   AlterPartition, reassignment, preferred-leader balance,
//	                   the partition side of a broker's fence, return and shutdown
//	configs*.go        configManager: topic configs
//	security.go        securityManager: SCRAM credentials and ACL rules
//	election.go, assignment.go, brokerset.go
//	                   pure decisions the replication manager calls: the
//	                   election strategies and replica placement
//	controller.go, activate.go, loop.go, round.go
//	                   the driver: events, activation, the loop, group commit
//	work.go            what a handler gets and returns (work, result, effects)
//	plan.go, requests.go
//	                   control requests: what a round plans, what brokers get
//
// The Controller's methods (RegisterBroker, CreateTopics, ...) are the
// API: each checks what needs no image, queues an event whose compute
// calls the handlers, and waits for its answer. They decide nothing else.
//
// # The manager contract
//
// A handler is a method of a manager:
//
//	func (m *xManager) handle(w *work, req Request) (Response, error)
//	func (m *xManager) handle(w *work, req Request) (result[Response], error)
//
// It reads w.img(), the view: the committed image, plus what the round's
// earlier events staged, plus what it staged itself (an fsm.Txn, so an
// event sees the not-yet-committed changes before it). It decides at
// w.now, the controller's clock as the loop read it before computing the
// event. Its outputs are:
//
//   - records, staged in w's Txn (w.stage, w.stageEach, w.stageChange),
//     each checked by the FSM's own apply as it is staged, so a record a
//     handler stages is one every voter will accept, and a later step of
//     the handler reads what an earlier one decided (a fence, then the
//     elections it calls for). w.records() lists them;
//   - the plan, w.plan: which partitions go to which broker in which
//     control request once the records have committed. It holds no
//     partition contents: those are read from the committed image when the
//     requests are built, so a request only ever carries committed state;
//   - the response, or an error, which fails the event: the loop then
//     drops its records and plan whole;
//   - effects (result's embedded effects), for the handlers that change
//     state that is not in the image: see below.
//
// A handler does not touch queues, futures, timers, the activation or the
// Controller, does not block, reads no clock but w.now and does no I/O.
// The clock enters a decision only as w.now, and randomness only through
// the request or as a value the handler draws and carries in the records
// it stages: createTopic draws the new topic's id from crypto/rand and
// puts it in the Topic record. Given the same view, time, manager state
// and request a handler decides the same, createTopic's id aside. What
// must be deterministic is the FSM that applies the committed records, on
// every voter and again on every restart, and it is: it reads nothing but
// the records, their log index and the image.
//
// A handler may call another manager's methods with the same work: the
// cluster manager hands the replication manager the partitions of a broker
// it fences, unfences or shuts down, and the config manager has it elect
// leaders when unclean election is turned on (cluster → replication,
// configs → replication; quorum and security stand alone). Work that
// only rides along with an event (a broker's return, an ISR change that
// completes a reassignment) runs in w.atomically, which keeps it only if
// it stages cleanly.
//
// # State outside the image
//
// Almost everything a handler decides from is in the image. The
// exception is the brokers' sessions, which are wall-clock and local to
// the active node (docs/statemachines.md, broker lifecycle): their
// deadlines, the marks of the brokers whose first heartbeat since
// activation (their catch-up) is still to come, and the index of the
// activation entry, below which a heartbeat means a broker missed
// something (the loop records it once that entry has committed). The
// cluster manager owns them; its handlers read them and never write them:
// they return the changes as effects, data the loop applies.
//
//   - effects.sessions are applied as the event joins its round, the
//     point at which its records join the round's Txn: the round's later
//     events, and a round computed over it, see them (a session check
//     after a heartbeat of the same round sees the renewed deadline);
//   - effects.committed are applied once the event's records have
//     committed: a broker's catch-up mark goes when the round that sends
//     its catch-up has committed, so a heartbeat computed again (its
//     round's base turned out not to be what the log holds) plans the
//     catch-up again;
//   - effects.epoch is the controller epoch the requests go out under from
//     the event's round on (activation, an import that raises it);
//   - effects.endRound has the round proposed before anything more is
//     computed in or over it (a broker's epoch is its entry's index).
//
// A failed handler's effects are not applied, as its records are not.
// The managers live as long as an activation: a new term starts every
// unfenced broker with a fresh session (see Activate).
//
// # The life of an event
//
//  1. An API method queues an event on the activation's queue (enqueue,
//     submit); a caller that waits gets ErrNotController if the node is
//     not active or stops being active.
//  2. The loop takes the queued events, up to MaxEventsPerRound, into a
//     round, and computes them in order under the image's read lock: each
//     gets a work over a child of the round's Txn (the round's first event
//     stages straight into it) and runs its compute, the handlers. If they
//     succeed, the loop merges the work's Txn and plan into the round and
//     applies effects.sessions and effects.epoch; if they fail, it drops
//     them and keeps the error for the caller.
//  3. The round's records are proposed as log entries (runs of one topic's
//     partition changes packed, at most MaxRecordsPerEntry per entry, no
//     packed record spanning two events). While they commit, the loop
//     computes the events that arrive into the next round, over the
//     committing round's Txn; that round is proposed once the one below
//     has committed, rebased onto the image, or, if the one below failed
//     or the log holds something else, computed again from scratch.
//  4. Once the round has committed (finish): first the round's plan is
//     turned into requests from the committed image, under the round's
//     controller epoch and with the round's last index as metadata offset
//     (0 to a broker this controller has not caught up yet), and handed to
//     the Sender; then, event by event in order, an event one of whose
//     records the FSM refused is answered UNKNOWN_SERVER_ERROR, and any
//     other has its effects.committed applied and is answered (its finish
//     hook can put the entry's index in the answer: a registration's
//     broker epoch). An event's then, if set, queues the loop's next event
//     (a rebalance's next run). A round that failed sends nothing and
//     answers its events NOT_CONTROLLER (or their own errors).
//  5. If leadership is lost, every event the loop holds or has queued is
//     answered NOT_CONTROLLER, and the uncommitted work and the managers
//     are dropped with the activation.
//
// The loop alone takes events from the queue (callers only put them
// there), computes them, answers them and owns the timers: the session
// check (every SessionTimeout/8) and the automatic rebalance (every
// leader.imbalance.check.interval.seconds while auto.leader.rebalance.enable
// is on, or SetBalance's Interval: a reassignment check, then the
// rebalance's runs, one event each) are ticks that queue events like any caller's. It does not wait on
// raft itself: proposeRound starts a goroutine for each round with records,
// which proposes its entries (propose), waits on their futures and closes
// the round's done channel, and the loop finishes the round when it sees
// that channel closed.
//
// # Why
//
// A decision is a function of the view, the time, its manager's state and
// the request (createTopic's random topic id aside), so its tests call
// the handler with a Txn over an image and replay the records it returns
// into a fresh image (see the *_manager_test.go files): no loop, log,
// queue or clock is needed.
// Keeping state changes as returned data is what lets the loop compute an
// event again, or drop it, without undoing anything: the only state a
// handler changes is the work it is given. And the concurrency (group
// commit, the pipeline of a round computed over the one committing,
// leadership changes) is all in one place, the loop.
//
// The managers are files of this package rather than packages of their
// own: they share the plan, the partition references and the state
// machines' helpers, and handlers are the package's unexported methods
// that its tests drive directly; packages would have to export all of it.
package controller
