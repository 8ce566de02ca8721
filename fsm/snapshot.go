package fsm

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Snapshot implements raft.FSM. It only freezes the image (a copy of the
// topic and broker pointers); Persist writes it while apply goes on.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	fr := f.img.freeze()
	f.mu.Unlock()
	return &snapshot{fr: fr, log: f}, nil
}

type snapshot struct {
	fr      *frozenImage
	log     *FSM
	release sync.Once
}

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.fr.writeTo(sink); err != nil {
		s.log.log.Error("snapshot write failed", "index", s.fr.appliedIndex, "error", err)
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot: the frozen topics are no longer
// read, so apply may change them in place again.
func (s *snapshot) Release() { s.release.Do(s.log.thaw) }

// thaw ends a frozen view of the image (see freeze).
func (f *FSM) thaw() {
	f.mu.Lock()
	f.img.frozen--
	f.mu.Unlock()
}

// writeTo writes header, body and checksum.
func (fr *frozenImage) writeTo(w io.Writer) error {
	fr.sort()
	crc := crc32.New(castagnoli)
	bw := bufio.NewWriterSize(io.MultiWriter(w, crc), 256<<10)
	format := fr.format()
	hdr := append([]byte(snapshotMagic), format)
	hdr = binary.AppendUvarint(hdr, fr.appliedIndex)
	if _, err := bw.Write(hdr); err != nil {
		return err
	}
	if err := fr.writeBody(bw, format); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return binary.Write(w, binary.BigEndian, crc.Sum32())
}

// WriteSnapshot writes a snapshot of the current image to w. Raft calls
// Snapshot/Persist itself; this is for tools and tests.
func (f *FSM) WriteSnapshot(w io.Writer) error {
	f.mu.Lock()
	fr := f.img.freeze()
	f.mu.Unlock()
	defer f.thaw()
	return fr.writeTo(w)
}

// Restore implements raft.FSM: it replaces the image with the snapshot's,
// after checking the format version and checksum. On error the current
// image is kept.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("read snapshot: %w", err)
	}
	im, err := decodeSnapshot(data)
	if err != nil {
		f.log.Error("snapshot restore refused", "error", err)
		return err
	}
	f.mu.Lock()
	im.snapGen, im.frozen = f.img.snapGen, f.img.frozen
	f.img = im
	f.sec.Store(im.sec)
	f.applied.moved()
	f.mu.Unlock()
	f.log.Info("restored snapshot", "index", im.appliedIndex, "topics", im.NumTopics(), "partitions", im.NumPartitions())
	if f.onRestore != nil {
		f.onRestore(im.appliedIndex)
	}
	return nil
}

func decodeSnapshot(data []byte) (*Image, error) {
	minLen := len(snapshotMagic) + 1 + 1 + 4
	if len(data) < minLen {
		return nil, fmt.Errorf("snapshot of %d bytes is too short", len(data))
	}
	if !bytes.Equal(data[:len(snapshotMagic)], []byte(snapshotMagic)) {
		return nil, fmt.Errorf("snapshot does not start with %q", snapshotMagic)
	}
	version := data[len(snapshotMagic)]
	if version < 1 || version > snapshotFormatVersion {
		return nil, fmt.Errorf("snapshot format %d, this binary reads 1..%d", version, snapshotFormatVersion)
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return nil, fmt.Errorf("%w: computed %08x, trailer says %08x", errSnapshotChecksum, got, sum)
	}
	r := &reader{b: body, pos: len(snapshotMagic) + 1, version: version}
	applied := r.uvarint("applied index")
	im, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if r.pos != len(body) {
		return nil, fmt.Errorf("snapshot has %d bytes after its body", len(body)-r.pos)
	}
	im.appliedIndex = applied
	return im, nil
}

// StateHash is SHA-256 over the canonical encoding of the image. Two voters
// at the same applied index have the same hash.
type StateHash [32]byte

func (h StateHash) String() string { return fmt.Sprintf("%x", h[:]) }

// StateHash returns the hash of the current image and the index it was
// taken at. Like a snapshot it holds the lock only to freeze the image.
func (f *FSM) StateHash() (StateHash, uint64) {
	f.mu.Lock()
	fr := f.img.freeze()
	f.mu.Unlock()
	defer f.thaw()
	fr.sort()
	h := sha256.New()
	if err := fr.writeBody(h, fr.format()); err != nil {
		// Writing to a hash cannot fail; encoding could only fail on a
		// type msgpack does not know, which would be a programming error.
		panic(fmt.Sprintf("fsm: state hash: %v", err))
	}
	var out StateHash
	h.Sum(out[:0])
	return out, fr.appliedIndex
}
