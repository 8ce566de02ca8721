// Package fsm holds the metadata image and the raft.FSM that every
// controller voter runs over the shared log.
//
// Every voter applies the same batches in the same order and must end in the
// same image, so apply reads no clock, uses no randomness and never lets map
// iteration order reach the result; anything iterated for output (snapshot,
// state hash, listings) is sorted first. A record that breaks a rule of the
// replica or partition state machine, or that was computed from a stale
// partition epoch, is rejected identically on every voter and reported in the
// entry's ApplyResult. A record that cannot be decoded at all is different:
// skipping it on one voter and not another would split the replicas, so the
// FSM halts the node instead (see Options.Halt).
//
// Readers (the controller, admin listings) use View, which holds a read lock
// only for as long as the callback runs. Snapshots do not hold any lock while
// they write: the image is copy-on-write per topic, so a snapshot keeps the
// topics it froze while apply clones the ones it changes afterwards. All
// slices inside a Partition are treated as immutable for the same reason:
// apply always installs new slices, so a reader may keep one after View
// returns.
package fsm
