package listener

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/fsm"
)

func errorsIs(err, target error) bool { return errors.Is(err, target) }

func itoa(n int32) string { return strconv.Itoa(int(n)) }

func hostPort(host string, port int32) string { return net.JoinHostPort(host, itoa(port)) }

// sendFrame writes one request (header and body, without the length
// prefix) and returns the response after its correlation id, or nil if
// the server closed the connection instead of answering.
func sendFrame(t testing.TB, addr string, msg []byte) []byte {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(msg)))
	if _, err := c.Write(append(frame, msg...)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil
	}
	resp := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, resp); err != nil {
		t.Fatal(err)
	}
	return resp[4:]
}

type fsmImage = fsm.Image
