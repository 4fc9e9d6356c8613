package raft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/vltava/vltava/plugins/sdk"
)

// ErrCorrupt marks a log entry or snapshot that does not follow the
// format in doc.go. Check it with errors.Is.
var ErrCorrupt = errors.New("raft: corrupt data")

// entryFormat is the first byte of every log entry this package writes.
const entryFormat = 1

// Entry types (byte 1 of an entry).
const (
	cmdWrite     = 1 // Put, Delete, Txn: conditions + ops
	cmdGrant     = 2 // GrantSession: TTL
	cmdRevoke    = 3 // RevokeSession: session ID (fails if already ended)
	cmdExpire    = 4 // leader-decided expiry: session ID (no-op if already ended)
	cmdKeepAlive = 5 // KeepAlive: session ID (fails if already ended; changes no key)
)

// Op kinds inside a write entry.
const (
	opPut             = 1
	opDelete          = 2 // deleting an absent key is a no-op (Txn)
	opDeleteMustExist = 3 // deleting an absent key fails with ErrNotFound (Delete)
)

// command is one decoded log entry.
type command struct {
	typ     byte
	conds   []sdk.Condition // cmdWrite
	ops     []wop           // cmdWrite
	ttl     time.Duration   // cmdGrant
	session sdk.SessionID   // cmdRevoke, cmdExpire, cmdKeepAlive
}

// wop is one op of a write entry.
type wop struct {
	kind    byte
	key     string
	value   []byte        // opPut
	session sdk.SessionID // opPut
}

// encode renders c in the entry format of doc.go.
func (c *command) encode() []byte {
	b := []byte{entryFormat, c.typ}
	switch c.typ {
	case cmdWrite:
		b = binary.AppendUvarint(b, uint64(len(c.conds)))
		for _, cd := range c.conds {
			b = appendString(b, cd.Key)
			b = binary.AppendVarint(b, cd.Version)
		}
		b = binary.AppendUvarint(b, uint64(len(c.ops)))
		for _, op := range c.ops {
			b = append(b, op.kind)
			b = appendString(b, op.key)
			if op.kind == opPut {
				b = appendString(b, string(op.value))
				b = binary.AppendVarint(b, int64(op.session))
			}
		}
	case cmdGrant:
		b = binary.AppendVarint(b, int64(c.ttl))
	case cmdRevoke, cmdExpire, cmdKeepAlive:
		b = binary.AppendVarint(b, int64(c.session))
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decodeCommand parses an entry. Every malformed input is an ErrCorrupt
// error, never a panic, and no count is trusted beyond the bytes present.
func decodeCommand(b []byte) (*command, error) {
	d := decoder{b: b}
	if f := d.byte(); f != entryFormat {
		return nil, fmt.Errorf("%w: entry format %d, want %d", ErrCorrupt, f, entryFormat)
	}
	c := &command{typ: d.byte()}
	switch c.typ {
	case cmdWrite:
		n := d.count(2)
		for range n {
			c.conds = append(c.conds, sdk.Condition{Key: d.str(), Version: d.varint()})
		}
		n = d.count(2)
		for range n {
			op := wop{kind: d.byte(), key: d.str()}
			switch op.kind {
			case opPut:
				op.value = []byte(d.str())
				op.session = sdk.SessionID(d.varint())
			case opDelete, opDeleteMustExist:
			default:
				d.fail("op kind %d", op.kind)
			}
			c.ops = append(c.ops, op)
		}
	case cmdGrant:
		if c.ttl = time.Duration(d.varint()); c.ttl <= 0 {
			d.fail("grant TTL %d", c.ttl)
		}
	case cmdRevoke, cmdExpire, cmdKeepAlive:
		c.session = sdk.SessionID(d.varint())
	default:
		d.fail("entry type %d", c.typ)
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	return c, nil
}

// decoder reads the varint-based layouts of doc.go. After the first
// failure every read returns a zero value and err stays set.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail("truncated")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads an element count, rejecting one that the remaining bytes
// cannot hold at minSize bytes per element.
func (d *decoder) count(minSize int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/minSize) {
		d.fail("count %d exceeds the %d bytes left", n, len(d.b))
		return 0
	}
	return int(n)
}

func (d *decoder) str() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("length %d exceeds the %d bytes left", n, len(d.b))
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
