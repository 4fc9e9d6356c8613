package local

import (
	"encoding/binary"
	"fmt"

	"github.com/vltava/vltava/plugins/sdk"
)

// These constants are part of the on-disk format (see doc.go).
const (
	formatVersion = 1
	recordHeader  = 17 // format + version + session
	maxKeyBytes   = 4096
)

var (
	bucketMeta  = []byte("meta")
	bucketKV    = []byte("kv")
	keyFormat   = []byte("format")
	keyRevision = []byte("revision")
)

// record is a decoded "kv" value.
type record struct {
	version int64
	session sdk.SessionID
	value   []byte // aliases the bbolt page unless copied
}

func encodeRecord(version int64, session sdk.SessionID, value []byte) []byte {
	b := make([]byte, recordHeader+len(value))
	b[0] = formatVersion
	binary.BigEndian.PutUint64(b[1:9], uint64(version))
	binary.BigEndian.PutUint64(b[9:17], uint64(session))
	copy(b[recordHeader:], value)
	return b
}

// decodeRecord parses b. The returned value aliases b: copy it before the
// bbolt transaction ends.
func decodeRecord(key, b []byte) (record, error) {
	if len(b) < recordHeader || b[0] != formatVersion {
		return record{}, fmt.Errorf("%w: key %q: record of %d bytes, format %v", ErrCorrupt, key, len(b), firstByte(b))
	}
	r := record{
		version: int64(binary.BigEndian.Uint64(b[1:9])),
		session: sdk.SessionID(binary.BigEndian.Uint64(b[9:17])),
		value:   b[recordHeader:],
	}
	if r.version <= 0 {
		return record{}, fmt.Errorf("%w: key %q: version %d", ErrCorrupt, key, r.version)
	}
	return r, nil
}

func firstByte(b []byte) any {
	if len(b) == 0 {
		return "none"
	}
	return b[0]
}

func encodeRevision(rev int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(rev))
}

func decodeRevision(b []byte) (int64, error) {
	if b == nil {
		return 0, nil
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: revision of %d bytes", ErrCorrupt, len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}
