package controller

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Error is a controller decision a client should see as a Kafka error code,
// with a message that names what was wrong.
type Error struct {
	Kafka   *kerr.Error
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Kafka.Message
	}
	return e.Kafka.Message + " " + e.Message
}

func (e *Error) Unwrap() error { return e.Kafka }

func kafkaErr(code *kerr.Error, format string, args ...any) *Error {
	return &Error{Kafka: code, Message: fmt.Sprintf(format, args...)}
}

// ErrNotController is returned by every call on a node that is not the
// active controller, and to every call in flight when leadership is lost.
// It is retriable: the client should find the active node and retry.
var ErrNotController = &Error{Kafka: kerr.NotController}

// ErrorCode returns the Kafka error code for err: 0 for nil, the code of a
// wrapped *kerr.Error, and UNKNOWN_SERVER_ERROR (-1) for anything else.
func ErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

// ErrorMessage returns the message to send along with ErrorCode(err).
func ErrorMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

var unknownServerError = kerr.UnknownServerError

var (
	kerrUnknownTopicOrPartition     = kerr.UnknownTopicOrPartition
	kerrEligibleLeadersNotAvailable = kerr.EligibleLeadersNotAvailable
)
