package raftlog

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// RegisterBroker's body is a msgpack array of its fields, as every
// record's: four at version 1 (BrokerID, IncarnationID, Endpoints, Rack),
// five at version 2 (then Features). The version follows from the
// contents, so a broker that reports no features is registered with
// version 1, which every build reads.

func (r *RegisterBroker) recordVersion() uint8 {
	if len(r.Features) > 0 {
		return 2
	}
	return 1
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (r *RegisterBroker) EncodeMsgpack(enc *msgpack.Encoder) error {
	n := 4
	if r.recordVersion() == 2 {
		n = 5
	}
	if err := enc.EncodeArrayLen(n); err != nil {
		return err
	}
	fields := []any{r.BrokerID, r.IncarnationID, r.Endpoints, r.Rack}
	if n == 5 {
		fields = append(fields, r.Features)
	}
	for _, f := range fields {
		if err := enc.Encode(f); err != nil {
			return err
		}
	}
	return nil
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (r *RegisterBroker) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n != 4 && n != 5 {
		return fmt.Errorf("RegisterBroker body has %d fields, want 4 or 5", n)
	}
	*r = RegisterBroker{}
	fields := []any{&r.BrokerID, &r.IncarnationID, &r.Endpoints, &r.Rack, &r.Features}
	for _, f := range fields[:n] {
		if err := dec.Decode(f); err != nil {
			return err
		}
	}
	if n == 5 && len(r.Features) == 0 {
		return fmt.Errorf("RegisterBroker version 2 body with no features")
	}
	return nil
}
