package listener

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/controller"
)

// errorCode maps an error to the Kafka code a client gets. Controller
// decisions carry their code (controller.ErrorCode); a request that ran
// out of time is REQUEST_TIMED_OUT, whose outcome the client must treat as
// unknown (the change may still commit); raft refusing a proposal because
// this voter no longer leads is NOT_CONTROLLER, so the client retries on
// the new leader.
func errorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke):
		return ke.Code
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrRaftShutdown):
		return kerr.NotController.Code
	}
	return controller.ErrorCode(err)
}

// errorMessage is the message sent with errorCode(err), nil without error.
func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) {
		s := kerr.RequestTimedOut.Message + " The outcome is unknown: the change may still be committed."
		return &s
	}
	return controller.ErrorMessage(err)
}

// kafkaErr is an error of the listener's own checks, in the controller's
// form so that both map to codes the same way.
func kafkaErr(code *kerr.Error, format string, args ...any) error {
	return &controller.Error{Kafka: code, Message: fmt.Sprintf(format, args...)}
}

// notController is what a standby answers a mutation with: the message
// names the active controller so that an operator reading it knows where
// to look.
func (l *Listener) notController() error {
	if id := l.activeID(); id >= 0 && id != l.self {
		return kafkaErr(kerr.NotController, "node %d is a standby voter; the active controller is node %d", l.self, id)
	}
	return kafkaErr(kerr.NotController, "node %d is a standby voter and no active controller is known yet", l.self)
}

func isNotController(err error) bool { return errorCode(err) == kerr.NotController.Code }
