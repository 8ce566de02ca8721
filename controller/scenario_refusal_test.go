package controller

import "fmt"

func init() {
	scenarioCommands["refused"] = (*scenario).listenerRefused
}

// listenerRefused is
//
//	refused B [epoch=N|prev] [addr=HOST:PORT]
//
// the sender's report that broker B's listener (default its registered
// one, 127.0.0.1:9000+B) refused a connection after a connection to the
// broker at epoch N (default its current one) reset. It prints what the
// controller made of it.
func (s *scenario) listenerRefused(a *scenarioArgs) ([]string, error) {
	id, err := a.broker()
	if err != nil {
		return nil, err
	}
	r := ListenerRefusal{BrokerID: id, Addr: a.str("addr", fmt.Sprintf("127.0.0.1:%d", 9000+id))}
	if r.BrokerEpoch, err = s.brokerEpoch(a, "epoch", id); err != nil {
		return nil, err
	}
	if err := a.done(); err != nil {
		return nil, err
	}
	out, err := s.c.ListenerRefused(s.ctx, r)
	if err != nil {
		return []string{"error " + kafkaErrorName(err)}, nil
	}
	return []string{"ok " + out.String()}, nil
}
