package kafkaclient

import (
	"strconv"
	"strings"
)

// Control requests (LeaderAndIsr, StopReplica, UpdateMetadata) have no
// field for the metadata offset — the raft index the request reflects —
// that brokers report back in their heartbeats. The controller's sender
// carries it in the request header's client id instead, which every
// version of every request has:
//
//	ctrlquorum-controller-<controller id>;offset=<metadata offset>
//
// A broker agent reads it back with ParseControlClientID. A client id in
// any other form carries no offset.
const controlClientIDPrefix = "ctrlquorum-controller-"

// ControlClientID formats the client id of a control request.
func ControlClientID(controllerID int32, offset uint64) string {
	b := make([]byte, 0, len(controlClientIDPrefix)+32)
	b = append(b, controlClientIDPrefix...)
	b = strconv.AppendInt(b, int64(controllerID), 10)
	b = append(b, ";offset="...)
	b = strconv.AppendUint(b, offset, 10)
	return string(b)
}

// ParseControlClientID reads what ControlClientID wrote.
func ParseControlClientID(s string) (controllerID int32, offset uint64, ok bool) {
	rest, found := strings.CutPrefix(s, controlClientIDPrefix)
	if !found {
		return 0, 0, false
	}
	idPart, offPart, found := strings.Cut(rest, ";offset=")
	if !found {
		return 0, 0, false
	}
	id, err := strconv.ParseInt(idPart, 10, 32)
	if err != nil {
		return 0, 0, false
	}
	off, err := strconv.ParseUint(offPart, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return int32(id), off, true
}
