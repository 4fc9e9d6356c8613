package raft

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	iradix "github.com/hashicorp/go-immutable-radix"
	hraft "github.com/hashicorp/raft"

	"github.com/vltava/vltava/plugins/sdk"
)

// snapshotMagic and snapshotFormat open every snapshot (see doc.go).
const (
	snapshotMagic  = "VRFS"
	snapshotFormat = 1
	// maxSnapshotValue bounds one value read from a snapshot, so a corrupt
	// length cannot ask for an absurd allocation.
	maxSnapshotValue = 256 << 20
)

type sessionRecord struct {
	id  sdk.SessionID
	ttl time.Duration
}

// fsmSnapshot is a point-in-time copy of the state. The tree is
// immutable, so holding its root is the copy.
type fsmSnapshot struct {
	tree     *iradix.Tree
	rev      int64
	index    uint64
	sessions []sessionRecord
}

// Persist implements raft.FSMSnapshot.
func (s *fsmSnapshot) Persist(sink hraft.SnapshotSink) error {
	w := bufio.NewWriter(sink)
	if err := s.write(w); err != nil {
		sink.Cancel()
		return fmt.Errorf("raft: persist snapshot: %w", err)
	}
	if err := w.Flush(); err != nil {
		sink.Cancel()
		return fmt.Errorf("raft: persist snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) write(w *bufio.Writer) error {
	var b []byte
	b = append(b, snapshotMagic...)
	b = append(b, snapshotFormat)
	b = binary.AppendUvarint(b, s.index)
	b = binary.AppendVarint(b, s.rev)
	b = binary.AppendUvarint(b, uint64(len(s.sessions)))
	for _, r := range s.sessions {
		b = binary.AppendVarint(b, int64(r.id))
		b = binary.AppendVarint(b, int64(r.ttl))
	}
	b = binary.AppendUvarint(b, uint64(s.tree.Len()))
	if _, err := w.Write(b); err != nil {
		return err
	}
	var err error
	s.tree.Root().Walk(func(k []byte, v any) bool {
		e := v.(*kvEntry)
		b = appendString(b[:0], string(k))
		b = appendString(b, string(e.value))
		b = binary.AppendVarint(b, e.version)
		b = binary.AppendVarint(b, int64(e.session))
		_, err = w.Write(b)
		return err != nil
	})
	return err
}

// Release implements raft.FSMSnapshot.
func (s *fsmSnapshot) Release() {}

// restored is the state read back from a snapshot.
type restored struct {
	tree     *iradix.Tree
	rev      int64
	index    uint64
	sessions map[sdk.SessionID]*session
}

// readSnapshot parses a snapshot written by Persist. Counts are not used
// to preallocate, so a corrupt count fails at end of input, not in malloc.
func readSnapshot(r io.Reader) (*restored, error) {
	sr := snapReader{r: bufio.NewReader(r)}
	magic := make([]byte, len(snapshotMagic)+1)
	if _, err := io.ReadFull(sr.r, magic); err != nil || string(magic[:4]) != snapshotMagic || magic[4] != snapshotFormat {
		return nil, fmt.Errorf("%w: snapshot header %q (%v)", ErrCorrupt, magic, err)
	}
	st := &restored{sessions: make(map[sdk.SessionID]*session)}
	st.index = sr.uvarint()
	st.rev = sr.varint()
	for n := sr.uvarint(); n > 0 && sr.err == nil; n-- {
		id, ttl := sdk.SessionID(sr.varint()), time.Duration(sr.varint())
		st.sessions[id] = &session{ttl: ttl, keys: make(map[string]struct{})}
	}
	txn := iradix.New().Txn()
	for n := sr.uvarint(); n > 0 && sr.err == nil; n-- {
		key := sr.bytes(maxKeyBytes)
		e := &kvEntry{value: sr.bytes(maxSnapshotValue), version: sr.varint(), session: sdk.SessionID(sr.varint())}
		if sr.err != nil {
			break
		}
		if e.version <= 0 || e.version > st.rev {
			return nil, fmt.Errorf("%w: snapshot key %q version %d, store revision %d", ErrCorrupt, key, e.version, st.rev)
		}
		if e.session != sdk.NoSession {
			s := st.sessions[e.session]
			if s == nil {
				return nil, fmt.Errorf("%w: snapshot key %q names unknown session %d", ErrCorrupt, key, e.session)
			}
			s.keys[string(key)] = struct{}{}
		}
		txn.Insert(key, e)
	}
	if sr.err != nil {
		return nil, sr.err
	}
	st.tree = txn.Commit()
	return st, nil
}

// snapReader reads the varint layout of a snapshot; the first error sticks.
type snapReader struct {
	r   *bufio.Reader
	err error
}

func (s *snapReader) setErr(err error) {
	if s.err == nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		s.err = fmt.Errorf("%w: snapshot: %w", ErrCorrupt, err)
	}
}

func (s *snapReader) uvarint() uint64 {
	if s.err != nil {
		return 0
	}
	v, err := binary.ReadUvarint(s.r)
	if err != nil {
		s.setErr(err)
	}
	return v
}

func (s *snapReader) varint() int64 {
	if s.err != nil {
		return 0
	}
	v, err := binary.ReadVarint(s.r)
	if err != nil {
		s.setErr(err)
	}
	return v
}

func (s *snapReader) bytes(limit int) []byte {
	n := s.uvarint()
	if s.err != nil {
		return nil
	}
	if n > uint64(limit) {
		s.setErr(fmt.Errorf("length %d above limit %d", n, limit))
		return nil
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(s.r, b); err != nil {
		s.setErr(err)
		return nil
	}
	return b
}
