package meta

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
)

// UUID is a Kafka Uuid: 16 bytes, printed as 22 characters of URL-safe
// base64 without padding (Kafka's Uuid.toString).
type UUID [16]byte

// NewUUID returns a random version 4 UUID, as Kafka's Uuid.randomUuid:
// never the zero or the reserved all-zero-but-one id, and never one whose
// text starts with '-', which a command line would take for a flag.
func NewUUID() UUID {
	for {
		var u UUID
		if _, err := rand.Read(u[:]); err != nil {
			panic(fmt.Sprintf("meta: crypto/rand: %v", err)) // the Go runtime never returns an error here
		}
		u[6] = u[6]&0x0f | 0x40
		u[8] = u[8]&0x3f | 0x80
		if !u.reserved() && u.String()[0] != '-' {
			return u
		}
	}
}

// ParseUUID reads the text form of a UUID. The zero id and Kafka's
// reserved one (0…01, the metadata topic's) are refused.
func ParseUUID(s string) (UUID, error) {
	var u UUID
	if len(s) != 22 {
		return u, fmt.Errorf("%q is not a Kafka Uuid: want 22 characters of URL-safe base64, got %d", s, len(s))
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != 16 {
		return u, fmt.Errorf("%q is not a Kafka Uuid: want 22 characters of URL-safe base64 (A-Z a-z 0-9 - _)", s)
	}
	copy(u[:], b)
	if u.reserved() {
		return u, fmt.Errorf("%q is a reserved Kafka Uuid", s)
	}
	return u, nil
}

// String is the Kafka text form.
func (u UUID) String() string { return base64.RawURLEncoding.EncodeToString(u[:]) }

// IsZero reports whether u is the zero id (unset).
func (u UUID) IsZero() bool { return u == UUID{} }

func (u UUID) reserved() bool {
	var one UUID
	one[15] = 1
	return u.IsZero() || u == one
}
