package sasl

import (
	"crypto/hmac"
	"crypto/subtle"
	"encoding/base64"
	"strings"
)

// finalRepeatedNonce checks a client-final message whose nonce is the
// server's nonce with more before it. librdkafka sends its client nonce
// again in front of the nonce the server sent (which already starts with
// it), and Kafka accepts that: it only requires the final nonce to end
// with the server's. xdg-go requires RFC 5802's equality, so this
// exchange is verified here, with the same rules: the channel binding of
// the gs2 header sent first, extensions of the form name=value (checked
// by the caller), a proof of the hash's size that the verifier's stored
// key matches, over the messages as the client sent them.
func (s *scramSession) finalRepeatedNonce(msg string) (string, error) {
	attrs := strings.Split(msg, ",")
	if attrs[0] != "c="+base64.StdEncoding.EncodeToString([]byte(s.gs2)) {
		return "", malformed("client-final message: channel binding does not match the client-first message's header")
	}
	proofB64, ok := strings.CutPrefix(attrs[len(attrs)-1], "p=")
	if !ok {
		return "", malformed("client-final message lacks the proof as its last attribute")
	}
	h := hashGen(s.mechanism)
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil || len(proof) != h().Size() {
		return "", malformed("client-final message: proof is not base64 of the hash's size")
	}
	authMessage := s.firstBare + "," + s.sFirst + "," + msg[:strings.LastIndexByte(msg, ',')]
	mac := func(key []byte) []byte {
		m := hmac.New(h, key)
		m.Write([]byte(authMessage))
		return m.Sum(nil)
	}
	clientKey := mac(s.cred.StoredKey)
	for i := range clientKey {
		clientKey[i] ^= proof[i]
	}
	d := h()
	d.Write(clientKey)
	if subtle.ConstantTimeCompare(d.Sum(nil), s.cred.StoredKey) != 1 || s.fake {
		return "", ErrInvalidCredentials
	}
	return "v=" + base64.StdEncoding.EncodeToString(mac(s.cred.ServerKey)), nil
}
