package meta

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FileName is the name of the identity file in a data directory.
const FileName = "meta.properties"

// Version is the format version this build writes and the highest it reads.
// A directory formatted by a later build is refused rather than misread.
const Version = 1

// ErrUnformatted is returned by Read for a directory that holds no
// meta.properties (or does not exist).
var ErrUnformatted = errors.New("data directory is not formatted")

// Properties is a data directory's identity (see the package comment).
type Properties struct {
	Version     int    // format version; Write fills 0 with Version
	ClusterID   string // a Kafka Uuid when made by format; any non-blank text when adopted from a cluster.id setting
	NodeID      int32
	DirectoryID UUID
	// InitialVoters is the quorum a new cluster starts with, empty for a
	// directory formatted to join an existing quorum.
	InitialVoters []Voter
}

// Validate checks the fields as Write and Read do: a cluster id of
// characters without spaces or control characters, a non-negative node id, a directory
// id, and initial voters that, when given, include this node with this
// directory id.
func (p Properties) Validate() error {
	switch {
	case p.Version < 1 || p.Version > Version:
		return fmt.Errorf("version %d: this build reads format version 1 to %d", p.Version, Version)
	case p.ClusterID == "":
		return errors.New("cluster.id is missing")
	case strings.IndexFunc(p.ClusterID, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0:
		return fmt.Errorf("cluster.id %q holds a space or a control character", p.ClusterID)
	case p.NodeID < 0:
		return fmt.Errorf("node.id %d is negative", p.NodeID)
	case p.DirectoryID.reserved():
		return errors.New("directory.id is missing")
	}
	if len(p.InitialVoters) > 0 {
		if _, err := ParseVoters(FormatVoters(p.InitialVoters)); err != nil {
			return fmt.Errorf("initial.voters: %w", err)
		}
		self := false
		for _, v := range p.InitialVoters {
			if v.NodeID == p.NodeID {
				if v.DirectoryID != p.DirectoryID {
					return fmt.Errorf("initial.voters names node %d with directory id %s, but this directory is %s", v.NodeID, v.DirectoryID, p.DirectoryID)
				}
				self = true
			}
		}
		if !self {
			return fmt.Errorf("initial.voters does not include node %d", p.NodeID)
		}
	}
	return nil
}

// Marshal is the file's text.
func (p Properties) Marshal() []byte {
	var b bytes.Buffer
	b.WriteString("# The identity of this data directory, written by ctrlnode format. Do not edit.\n")
	fmt.Fprintf(&b, "version=%d\ncluster.id=%s\nnode.id=%d\ndirectory.id=%s\n", p.Version, p.ClusterID, p.NodeID, p.DirectoryID)
	if len(p.InitialVoters) > 0 {
		fmt.Fprintf(&b, "initial.voters=%s\n", FormatVoters(p.InitialVoters))
	}
	return b.Bytes()
}

// Unmarshal reads the file's text: key=value lines, '#' and '!' comments.
// Keys this build does not know are refused, as is a key given twice.
func Unmarshal(data []byte) (Properties, error) {
	var p Properties
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' || text[0] == '!' {
			continue
		}
		key, val, ok := strings.Cut(text, "=")
		if !ok {
			return p, fmt.Errorf("line %d: want key=value", line)
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if seen[key] {
			return p, fmt.Errorf("line %d: %s is given twice", line, key)
		}
		seen[key] = true
		var err error
		switch key {
		case "version":
			p.Version, err = strconv.Atoi(val)
		case "cluster.id":
			p.ClusterID = val
		case "node.id":
			var n int64
			n, err = strconv.ParseInt(val, 10, 32)
			p.NodeID = int32(n)
		case "directory.id":
			p.DirectoryID, err = ParseUUID(val)
		case "initial.voters":
			p.InitialVoters, err = ParseVoters(val)
		default:
			err = errors.New("unknown key")
		}
		if err != nil {
			return p, fmt.Errorf("line %d: %s: %w", line, key, err)
		}
	}
	if err := sc.Err(); err != nil {
		return p, err
	}
	for _, k := range []string{"version", "cluster.id", "node.id", "directory.id"} {
		if !seen[k] {
			return p, fmt.Errorf("%s is missing", k)
		}
	}
	if p.Version > Version {
		return p, fmt.Errorf("format version %d is newer than this build reads (%d): run the release that formatted it", p.Version, Version)
	}
	return p, p.Validate()
}

// Read returns the identity of the data directory dir, ErrUnformatted when
// it has none, or an error naming the file when the file is unreadable.
func Read(dir string) (Properties, error) {
	path := filepath.Join(dir, FileName)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Properties{}, fmt.Errorf("%s: %w", dir, ErrUnformatted)
	}
	if err != nil {
		return Properties{}, err
	}
	p, err := Unmarshal(data)
	if err != nil {
		return Properties{}, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// Write makes dir (with its parents) if needed and replaces its
// meta.properties with p atomically: written to a temporary file, synced,
// renamed into place, and the directory synced so that the rename survives
// a power loss.
func Write(dir string, p Properties) error {
	if p.Version == 0 {
		p.Version = Version
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("meta: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, FileName+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	_, werr := tmp.Write(p.Marshal())
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return werr
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, FileName)); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
