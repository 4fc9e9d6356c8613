package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/vltava/vltava/core/record"
)

// The clean-shutdown marker, version 2, records the segment table as
// Close left it, so that the next Open trusts every inactive segment's
// size and largest timestamp without a stat or an index read per segment
// (doc.go: "Clean-shutdown marker"):
//
//	 0      4    5           13        17 + 32×n       +4
//	+------+----+-----------+---------+---------------+--------+
//	|"VLCS"| 2  | end int64 | n uint32| n × segment   | CRC32C |
//	+------+----+-----------+---------+---------------+--------+
//	segment: base int64 | size int64 | maxTs int64 | maxTsOff int64
//
// Open accepts the table only if its bases are exactly the .log files
// found and the active segment's file has the recorded size; otherwise it
// falls back to reading each segment. A version 1 marker (a plain offset
// checkpoint) is still accepted, without a table.
//
// Open does not delete the marker. The first change to the log (append,
// roll, truncation, deletion, compaction) deletes it and fsyncs the
// directory before it changes anything, so a marker on disk always
// describes the files exactly, and a restart without writes costs no
// fsync at all.
const (
	cleanMagic   = "VLCS"
	cleanVersion = 2
	cleanHeader  = 17
	cleanEntry   = 32
)

// cleanSeg is one segment in the marker's table.
type cleanSeg struct {
	base, size, maxTs, maxTsOff int64
}

func encodeCleanMarker(end int64, segs []cleanSeg) []byte {
	b := make([]byte, cleanHeader, cleanHeader+cleanEntry*len(segs)+4)
	copy(b, cleanMagic)
	b[4] = cleanVersion
	binary.BigEndian.PutUint64(b[5:], uint64(end))
	binary.BigEndian.PutUint32(b[13:], uint32(len(segs)))
	for _, s := range segs {
		b = binary.BigEndian.AppendUint64(b, uint64(s.base))
		b = binary.BigEndian.AppendUint64(b, uint64(s.size))
		b = binary.BigEndian.AppendUint64(b, uint64(s.maxTs))
		b = binary.BigEndian.AppendUint64(b, uint64(s.maxTsOff))
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeCleanMarker parses a marker of either version; table is nil for
// version 1.
func decodeCleanMarker(b []byte) (end int64, table map[int64]cleanSeg, err error) {
	if len(b) == checkpointSize && string(b[:4]) == checkpointMagic {
		end, err = decodeOffsetCheckpoint(b)
		return end, nil, err
	}
	if len(b) < cleanHeader+4 || string(b[:4]) != cleanMagic || b[4] != cleanVersion {
		return 0, nil, fmt.Errorf("%w: bad clean-shutdown marker header (%d bytes)", record.ErrCorrupt, len(b))
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return 0, nil, fmt.Errorf("%w: clean-shutdown marker crc mismatch", record.ErrCorrupt)
	}
	end = int64(binary.BigEndian.Uint64(b[5:]))
	n := int(binary.BigEndian.Uint32(b[13:]))
	if end < 0 || len(body) != cleanHeader+cleanEntry*n {
		return 0, nil, fmt.Errorf("%w: clean-shutdown marker of %d bytes for %d segments", record.ErrCorrupt, len(b), n)
	}
	table = make(map[int64]cleanSeg, n)
	for i := range n {
		e := body[cleanHeader+cleanEntry*i:]
		s := cleanSeg{
			base:     int64(binary.BigEndian.Uint64(e[0:])),
			size:     int64(binary.BigEndian.Uint64(e[8:])),
			maxTs:    int64(binary.BigEndian.Uint64(e[16:])),
			maxTsOff: int64(binary.BigEndian.Uint64(e[24:])),
		}
		if s.base < 0 || s.size < 0 {
			return 0, nil, fmt.Errorf("%w: clean-shutdown marker entry %d", record.ErrCorrupt, i)
		}
		table[s.base] = s
	}
	return end, table, nil
}

// readCleanMarker reads dir's marker; a missing one matches os.ErrNotExist.
func readCleanMarker(dir string) (int64, map[int64]cleanSeg, error) {
	b, err := os.ReadFile(filepath.Join(dir, cleanShutdownFile))
	if err != nil {
		return 0, nil, err
	}
	end, table, err := decodeCleanMarker(b)
	if err != nil {
		return 0, nil, fmt.Errorf("log: %s: %w", cleanShutdownFile, err)
	}
	return end, table, nil
}

// cleanTable lists every segment for the marker Close writes.
// REQUIRES: l.appendMu (no segment changes meanwhile).
func (l *Log) cleanTable() []cleanSeg {
	l.mu.RLock()
	segs := l.segs
	l.mu.RUnlock()
	out := make([]cleanSeg, 0, len(segs))
	for _, s := range segs {
		size, maxTs, maxTsOff := s.stats()
		out = append(out, cleanSeg{base: s.base, size: size, maxTs: maxTs, maxTsOff: maxTsOff})
	}
	return out
}

// markerGuard deletes the clean-shutdown marker, durably, before the log
// first changes after Open.
type markerGuard struct {
	pending atomic.Bool
	mu      sync.Mutex
	// current says Open trusted the marker on disk, a table of every
	// segment: while it is still pending, Close has nothing to write.
	// Set only by Open.
	current bool
}

// dropCleanMarker deletes the marker if it is still there; every method
// that changes the log's files calls it first. After the first call it is
// one atomic load.
func (l *Log) dropCleanMarker() error {
	if !l.marker.pending.Load() {
		return nil
	}
	l.marker.mu.Lock()
	defer l.marker.mu.Unlock()
	if !l.marker.pending.Load() {
		return nil
	}
	if err := os.Remove(filepath.Join(l.dir, cleanShutdownFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return l.fail("remove clean-shutdown marker", err)
	}
	if err := syncDir(l.dir); err != nil {
		return l.fail("remove clean-shutdown marker", err)
	}
	l.marker.pending.Store(false)
	return nil
}
