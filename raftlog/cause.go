package raftlog

// TypeStateChangeCause is the record that names why the records after it
// in the same entry were written.
const TypeStateChangeCause RecordType = 22

// MaxCauseBytes bounds a StateChangeCause's text.
const MaxCauseBytes = 512

// StateChangeCause says, for the state-change history, what caused the
// records that follow it in the same log entry, up to the next cause: the
// event the active controller handled ("broker 2 fenced: session
// expired", "controlled shutdown of broker 3", "deletion of topic t",
// "preferred leader election"). It changes nothing in the image; it is
// written from level 2 on, so a voter of the release before never meets
// it.
type StateChangeCause struct {
	_msgpack struct{} `msgpack:",as_array"`
	Text     string
}

func (*StateChangeCause) Type() RecordType { return TypeStateChangeCause }
