package fsm

import "errors"

// Reasons a record is rejected. Every voter rejects the same records for the
// same reasons; the controller maps them to Kafka error codes.
var (
	ErrStaleControllerEpoch = errors.New("stale controller epoch")
	ErrStaleBrokerEpoch     = errors.New("stale broker epoch")
	ErrStalePartitionEpoch  = errors.New("stale partition epoch")
	ErrUnknownBroker        = errors.New("unknown broker")
	ErrUnknownTopic         = errors.New("unknown topic")
	ErrUnknownPartition     = errors.New("unknown partition")
	ErrTopicExists          = errors.New("topic already exists")
	ErrTopicDeleting        = errors.New("topic is being deleted")
	ErrInvalidTransition    = errors.New("invalid state transition")
	ErrInvalidRecord        = errors.New("invalid record")
	ErrUnknownCredential    = errors.New("unknown SCRAM credential")
	ErrUnknownRule          = errors.New("unknown ACL rule")
	ErrRuleExists           = errors.New("ACL rule already exists")
)
