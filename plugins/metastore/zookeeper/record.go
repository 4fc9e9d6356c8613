package zookeeper

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/vltava/vltava/plugins/sdk"
)

// formatVersion is the first byte of every record and log entry.
const formatVersion = 1

const recordHeader = 17

// encodeRecord lays out a key's znode data (see doc.go).
func encodeRecord(version int64, session sdk.SessionID, value []byte) []byte {
	b := make([]byte, recordHeader, recordHeader+len(value))
	b[0] = formatVersion
	binary.BigEndian.PutUint64(b[1:], uint64(version))
	binary.BigEndian.PutUint64(b[9:], uint64(session))
	return append(b, value...)
}

type record struct {
	version int64
	session sdk.SessionID
	value   []byte
}

var errCorrupt = fmt.Errorf("zookeeper store: corrupt znode: %w", sdk.ErrUnavailable)

func decodeRecord(b []byte) (record, error) {
	if len(b) < recordHeader || b[0] != formatVersion {
		return record{}, fmt.Errorf("%w: record of %d bytes", errCorrupt, len(b))
	}
	return record{
		version: int64(binary.BigEndian.Uint64(b[1:])),
		session: sdk.SessionID(binary.BigEndian.Uint64(b[9:])),
		value:   append([]byte{}, b[recordHeader:]...),
	}, nil
}

// encodeLog lays out a change log entry (see doc.go).
func encodeLog(evs []sdk.WatchEvent) []byte {
	b := []byte{formatVersion}
	b = binary.BigEndian.AppendUint32(b, uint32(len(evs)))
	for _, ev := range evs {
		b = append(b, byte(ev.Type))
		b = binary.BigEndian.AppendUint32(b, uint32(len(ev.Key)))
		b = append(b, ev.Key...)
		b = binary.BigEndian.AppendUint64(b, uint64(ev.Session))
		b = binary.BigEndian.AppendUint32(b, uint32(len(ev.Value)))
		b = append(b, ev.Value...)
	}
	return b
}

func decodeLog(b []byte, rev int64) ([]sdk.WatchEvent, error) {
	bad := fmt.Errorf("%w: log entry %d", errCorrupt, rev)
	if len(b) < 5 || b[0] != formatVersion {
		return nil, bad
	}
	n := binary.BigEndian.Uint32(b[1:])
	b = b[5:]
	var out []sdk.WatchEvent
	for range n {
		if len(b) < 5 {
			return nil, bad
		}
		ev := sdk.WatchEvent{Type: sdk.EventType(b[0]), Revision: rev}
		kl := int(binary.BigEndian.Uint32(b[1:]))
		b = b[5:]
		if len(b) < kl+12 {
			return nil, bad
		}
		ev.Key = string(b[:kl])
		ev.Session = sdk.SessionID(binary.BigEndian.Uint64(b[kl:]))
		vl := int(binary.BigEndian.Uint32(b[kl+8:]))
		b = b[kl+12:]
		if len(b) < vl {
			return nil, bad
		}
		switch ev.Type {
		case sdk.EventPut:
			ev.Value, ev.Version = append([]byte{}, b[:vl]...), rev
		case sdk.EventDelete:
			ev.Session = sdk.NoSession
		default:
			return nil, bad
		}
		b = b[vl:]
		out = append(out, ev)
	}
	return out, nil
}

// encodeName turns a key into one znode name: bytes outside
// [A-Za-z0-9-_.~] become %XX, and so does a leading '.', so no name is
// "." or "..".
func encodeName(key string) string {
	var sb strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '~':
			sb.WriteByte(c)
		case c == '.' && i > 0:
			sb.WriteByte(c)
		default:
			fmt.Fprintf(&sb, "%%%02X", c)
		}
	}
	return sb.String()
}

func decodeName(name string) (string, error) {
	var sb strings.Builder
	for i := 0; i < len(name); i++ {
		if name[i] != '%' {
			sb.WriteByte(name[i])
			continue
		}
		if i+2 >= len(name) {
			return "", fmt.Errorf("%w: znode name %q", errCorrupt, name)
		}
		v, err := strconv.ParseUint(name[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("%w: znode name %q", errCorrupt, name)
		}
		sb.WriteByte(byte(v))
		i += 2
	}
	return sb.String(), nil
}

// logName is a log entry's znode name: the revision, zero-padded.
func logName(rev int64) string { return fmt.Sprintf("%020d", rev) }

// liveName is a session's ephemeral znode name: ZooKeeper's sequential
// suffix is the session ID minus one.
func liveName(id sdk.SessionID) string { return fmt.Sprintf("s-%010d", int64(id)-1) }

func sessionFromLive(name string) (sdk.SessionID, bool) {
	n, err := strconv.ParseInt(strings.TrimPrefix(name, "s-"), 10, 64)
	if err != nil || !strings.HasPrefix(name, "s-") {
		return 0, false
	}
	return sdk.SessionID(n + 1), true
}
