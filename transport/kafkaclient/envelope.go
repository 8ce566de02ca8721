package kafkaclient

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// Forwarding (Kafka's KIP-590). A node that takes a request only the
// active controller can answer sends it on inside an Envelope (API 58):
// the request as the client sent it (header and body), the client's
// principal serialized as Kafka's DefaultPrincipalData (version-prefixed)
// and the client's IP address. The controller answers with the response
// (header and body) inside the EnvelopeResponse, or with an error of the
// envelope itself (NOT_CONTROLLER, CLUSTER_AUTHORIZATION_FAILED).

// forwardable are the requests only the active controller answers, which
// a broker forwards to it.
var forwardable = []int16{
	19, // CreateTopics
	20, // DeleteTopics
	29, // DescribeAcls
	30, // CreateAcls
	31, // DeleteAcls
	32, // DescribeConfigs
	33, // AlterConfigs
	37, // CreatePartitions
	43, // ElectLeaders
	44, // IncrementalAlterConfigs
	45, // AlterPartitionReassignments
	46, // ListPartitionReassignments
	50, // DescribeUserScramCredentials
	51, // AlterUserScramCredentials
	55, // DescribeQuorum
	57, // UpdateFeatures
	80, // AddRaftVoter
	81, // RemoveRaftVoter
}

// Forwardable returns the API keys that travel in an Envelope, each with
// the highest version kmsg knows (which the controller's listener serves).
func Forwardable() map[int16]int16 {
	out := make(map[int16]int16, len(forwardable))
	for _, k := range forwardable {
		out[k] = kmsg.RequestForKey(k).MaxVersion()
	}
	return out
}

// Envelope wraps req, at the version it carries, as a client with
// clientID and principal ("User:alice") at clientIP sent it.
func Envelope(req kmsg.Request, clientID, principal string, clientIP net.IP) *kmsg.EnvelopeRequest {
	env := kmsg.NewPtrEnvelopeRequest()
	frame := AppendRequest(nil, 0, clientID, req)
	env.RequestData = frame[4:]
	typ, name, ok := strings.Cut(principal, ":")
	if !ok {
		typ, name = "User", principal
	}
	p := kmsg.DefaultPrincipalData{Type: typ, Name: name}
	env.RequestPrincipal = p.AppendTo(nil)
	if v4 := clientIP.To4(); v4 != nil {
		env.ClientHostAddress = v4
	} else if len(clientIP) == net.IPv6len {
		env.ClientHostAddress = clientIP
	}
	return env
}

// OpenEnvelope decodes the response to req that resp carries, or
// returns the envelope's own error.
func OpenEnvelope(resp *kmsg.EnvelopeResponse, req kmsg.Request) (kmsg.Response, error) {
	if resp.ErrorCode != 0 {
		return nil, &EnvelopeError{Code: resp.ErrorCode}
	}
	body := resp.ResponseData
	if len(body) < 4 {
		return nil, errors.New("enveloped response shorter than its header")
	}
	body = body[4:] // the correlation id: the envelope's own is what counts
	if req.IsFlexible() && req.Key() != 18 {
		var err error
		if body, err = kafkawire.SkipTags(body); err != nil {
			return nil, fmt.Errorf("enveloped response header: %w", err)
		}
	}
	inner := req.ResponseKind()
	inner.SetVersion(req.GetVersion())
	if err := SafeRead(inner, body); err != nil {
		return nil, fmt.Errorf("decode enveloped %s v%d response: %w", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return inner, nil
}

// EnvelopeError is the error code of an envelope answered without the
// request it carried being served.
type EnvelopeError struct{ Code int16 }

func (e *EnvelopeError) Error() string {
	return fmt.Sprintf("envelope refused: %v", kerr.ErrorForCode(e.Code))
}

// Unwrap is the Kafka error of the code.
func (e *EnvelopeError) Unwrap() error { return kerr.ErrorForCode(e.Code) }

// Enveloped is a request taken out of an Envelope.
type Enveloped struct {
	Request       kmsg.Request
	ClientID      string
	CorrelationID int32
	// Principal is "Type:Name", as the forwarding node authenticated the
	// client.
	Principal string
	// ClientIP is the client's address, nil when the envelope has none.
	ClientIP net.IP
}

// OpenRequest decodes the request an envelope carries. served says
// which API keys, up to which version, may travel in one.
func OpenRequest(env *kmsg.EnvelopeRequest, served func(key, version int16) bool) (*Enveloped, error) {
	b := env.RequestData
	if len(b) < 10 {
		return nil, errors.New("enveloped request header truncated")
	}
	key := int16(binary.BigEndian.Uint16(b[0:]))
	version := int16(binary.BigEndian.Uint16(b[2:]))
	out := &Enveloped{CorrelationID: int32(binary.BigEndian.Uint32(b[4:]))}
	n := int16(binary.BigEndian.Uint16(b[8:]))
	b = b[10:]
	if n > 0 {
		if int(n) > len(b) {
			return nil, errors.New("enveloped request client id truncated")
		}
		out.ClientID, b = string(b[:n]), b[n:]
	}
	req := kmsg.RequestForKey(key)
	if req == nil || key == env.Key() || !served(key, version) || version > req.MaxVersion() {
		return nil, fmt.Errorf("API key %d version %d cannot be forwarded", key, version)
	}
	req.SetVersion(version)
	if req.IsFlexible() {
		var err error
		if b, err = kafkawire.SkipTags(b); err != nil {
			return nil, fmt.Errorf("enveloped request header: %w", err)
		}
	}
	if err := SafeRead(req, b); err != nil {
		return nil, fmt.Errorf("decode enveloped %s v%d: %w", kmsg.NameForKey(key), version, err)
	}
	out.Request = req
	var p kmsg.DefaultPrincipalData
	if err := SafeRead(&p, env.RequestPrincipal); err != nil || p.Type == "" || p.Name == "" {
		return nil, fmt.Errorf("enveloped principal does not parse (%v)", err)
	}
	out.Principal = p.Type + ":" + p.Name
	if ip := net.IP(env.ClientHostAddress); len(ip) == net.IPv4len || len(ip) == net.IPv6len {
		out.ClientIP = append(net.IP(nil), ip...)
	}
	return out, nil
}

// SealResponse is the ResponseData of an envelope: resp, at the version
// of the request it answers, behind the response header of that request.
func SealResponse(correlationID int32, req kmsg.Request, resp kmsg.Response) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(correlationID))
	if req.IsFlexible() && req.Key() != 18 {
		out = append(out, 0) // no tagged fields
	}
	resp.SetVersion(req.GetVersion())
	return resp.AppendTo(out)
}

// ForwardedNotController reports whether resp, the controller's answer
// to a forwarded request, says that the node was not, or no longer, the
// active controller when it served it: the request is then sent again to
// the controller found anew.
func ForwardedNotController(resp kmsg.Response) bool {
	switch resp.(type) {
	case *kmsg.MetadataResponse, *kmsg.DescribeClusterResponse:
		return false
	}
	return notControllerAnswer(resp, -1, nil)
}
