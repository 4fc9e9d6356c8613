package wire

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FileRange is Len bytes of File starting at offset Pos. The file is read
// with positioned reads only (pread, sendfile with an offset), never Seek,
// so several ranges of one file can be sent at once.
type FileRange struct {
	File *os.File
	Pos  int64
	Len  int64
	// Data, when set, holds the range's bytes already read (File is nil
	// and Len is len(Data)): the broker copies small reads, and every read
	// while descriptors are scarce, instead of pinning a file until the
	// response is written.
	Data []byte
}

// Frame is a pre-built response body: byte runs and file ranges, sent in
// order. The zero Frame is empty and ready to use.
type Frame struct {
	segs []segment
	n    int64
}

// segment is one run of a Frame: bytes if file.File is nil, else a file range.
type segment struct {
	b    []byte
	file FileRange
}

// AppendBytes appends a run of bytes. The Frame keeps b; the caller must
// not modify it until the response is written.
func (f *Frame) AppendBytes(b []byte) {
	if len(b) == 0 {
		return
	}
	f.segs = append(f.segs, segment{b: b})
	f.n += int64(len(b))
}

// AppendFile appends a file range. A range of length zero is skipped.
func (f *Frame) AppendFile(r FileRange) {
	if r.Len == 0 {
		return
	}
	if r.Data != nil {
		f.AppendBytes(r.Data)
		return
	}
	f.segs = append(f.segs, segment{file: r})
	f.n += r.Len
}

// Len returns the number of bytes the Frame sends.
func (f *Frame) Len() int64 { return f.n }

// ReadAll returns the Frame's bytes, reading its file ranges with pread.
// It is for tests and for transports that cannot send files.
func (f *Frame) ReadAll() ([]byte, error) {
	out := make([]byte, 0, f.n)
	for _, s := range f.segs {
		if s.file.File == nil {
			out = append(out, s.b...)
			continue
		}
		start := len(out)
		out = append(out, make([]byte, s.file.Len)...)
		if err := readRange(s.file, out[start:]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sentinelLen is the length of the placeholder records FetchFrame encodes:
// a random prefix shared by all placeholders of one call plus a 4-byte index.
const (
	sentinelPrefixLen = 12
	sentinelLen       = sentinelPrefixLen + 4
)

// FetchFrame encodes resp into a Frame whose record sets come from files.
// ranges[i] becomes the RecordBatches of the i-th partition, in encoding order
// (topics in order, then their partitions), whose RecordBatches field is nil;
// partitions with non-nil RecordBatches are encoded as they are. A zero FileRange
// encodes empty (zero-length, not null) records. resp is restored before
// FetchFrame returns.
//
// Technique: each nil RecordBatches is set to a unique 16-byte sentinel (a random
// 12-byte prefix shared by the call, then the big-endian index i); kmsg
// encodes the response; the sentinels are found in order, and each sentinel
// with its length prefix (int32 16 below version 12, compact uvarint 17 from
// the flexible version 12 on) is replaced by the real length prefix of
// ranges[i] and the file range itself. The result is byte-for-byte what kmsg
// would encode with the file's bytes inlined. Should the random prefix occur
// anywhere else in the encoding, the call retries with a new one.
func FetchFrame(resp *kmsg.FetchResponse, ranges []FileRange) (*Frame, error) {
	var slots []*kmsg.FetchResponseTopicPartition
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if p := &resp.Topics[i].Partitions[j]; p.RecordBatches == nil {
				slots = append(slots, p)
			}
		}
	}
	if len(slots) != len(ranges) {
		return nil, fmt.Errorf("wire: fetch frame: %d partitions without records, %d ranges", len(slots), len(ranges))
	}
	for i, r := range ranges {
		if r.Len < 0 || r.Pos < 0 || r.Len > math.MaxInt32 || (r.File == nil && r.Len != int64(len(r.Data))) {
			return nil, fmt.Errorf("wire: fetch frame: bad range %d (pos %d, len %d)", i, r.Pos, r.Len)
		}
	}
	defer func() {
		for _, p := range slots {
			p.RecordBatches = nil
		}
	}()
	for attempt := 0; attempt < 3; attempt++ {
		var prefix [sentinelPrefixLen]byte
		if _, err := rand.Read(prefix[:]); err != nil {
			return nil, fmt.Errorf("wire: fetch frame: %w", err)
		}
		for i, p := range slots {
			s := make([]byte, sentinelLen)
			copy(s, prefix[:])
			binary.BigEndian.PutUint32(s[sentinelPrefixLen:], uint32(i))
			p.RecordBatches = s
		}
		body := resp.AppendTo(nil)
		f, err := spliceRanges(body, prefix[:], ranges, resp.Version >= 12)
		if errors.Is(err, errSentinelClash) {
			continue
		}
		return f, err
	}
	return nil, fmt.Errorf("wire: fetch frame: %w three times", errSentinelClash)
}

// errSentinelClash reports that a sentinel prefix occurred where no
// placeholder was (vanishingly rare: 96 random bits).
var errSentinelClash = errors.New("sentinel found outside a placeholder")

// spliceRanges replaces, in order, each placeholder (length prefix +
// sentinel i) in body by the length prefix of ranges[i] and the range.
func spliceRanges(body, prefix []byte, ranges []FileRange, flexible bool) (*Frame, error) {
	lenPrefix := 4 // int32 length
	if flexible {
		lenPrefix = 1 // uvarint(16+1)
	}
	f := &Frame{}
	// out holds body minus placeholders plus real length prefixes; Frame
	// segments are sub-slices of it, so a single allocation backs them.
	out := make([]byte, 0, len(body))
	segStart, pos := 0, 0
	for i, r := range ranges {
		at := bytes.Index(body[pos:], prefix)
		if at < 0 {
			return nil, errSentinelClash // placeholder i missing: impossible unless encoding changed
		}
		at += pos
		if at+sentinelLen > len(body) || binary.BigEndian.Uint32(body[at+sentinelPrefixLen:]) != uint32(i) ||
			at-lenPrefix < pos || !placeholderPrefixOK(body[at-lenPrefix:at], flexible) {
			return nil, errSentinelClash
		}
		out = append(out, body[pos:at-lenPrefix]...)
		if flexible {
			out = kbin.AppendUvarint(out, uint32(r.Len)+1)
		} else {
			out = kbin.AppendInt32(out, int32(r.Len))
		}
		f.AppendBytes(out[segStart:len(out):len(out)])
		f.AppendFile(r)
		segStart = len(out)
		pos = at + sentinelLen
	}
	if bytes.Contains(body[pos:], prefix) {
		return nil, errSentinelClash
	}
	out = append(out, body[pos:]...)
	f.AppendBytes(out[segStart:])
	return f, nil
}

// placeholderPrefixOK reports whether p is the length prefix kmsg writes
// for a sentinelLen-byte records field.
func placeholderPrefixOK(p []byte, flexible bool) bool {
	if flexible {
		return p[0] == sentinelLen+1
	}
	return binary.BigEndian.Uint32(p) == sentinelLen
}

// readRange reads r fully into dst (len(dst) == r.Len) with pread.
// A range past the end of the file is an error.
func readRange(r FileRange, dst []byte) error {
	n, err := r.File.ReadAt(dst, r.Pos)
	if n == len(dst) {
		return nil
	}
	if err == io.EOF || err == nil {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("wire: reading %s [%d, +%d): %w", r.File.Name(), r.Pos, len(dst), err)
}
