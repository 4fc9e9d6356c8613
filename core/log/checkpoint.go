package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/vltava/vltava/core/record"
)

// Names of the per-partition checkpoint files (layouts in doc.go).
const (
	recoveryPointFile = "recovery-point.checkpoint"
	logStartFile      = "log-start-offset.checkpoint"
	cleanShutdownFile = "clean-shutdown"
	tmpSuffix         = ".tmp"
)

// Offset checkpoint layout: magic, version, offset, CRC32C of the first 13 bytes.
// These constants are part of the on-disk format and must not change.
const (
	checkpointMagic   = "VLCK"
	checkpointVersion = 1
	checkpointSize    = 17
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func encodeOffsetCheckpoint(off int64) []byte {
	b := make([]byte, checkpointSize)
	copy(b, checkpointMagic)
	b[4] = checkpointVersion
	binary.BigEndian.PutUint64(b[5:], uint64(off))
	binary.BigEndian.PutUint32(b[13:], crc32.Checksum(b[:13], castagnoli))
	return b
}

func decodeOffsetCheckpoint(b []byte) (int64, error) {
	if len(b) != checkpointSize || string(b[:4]) != checkpointMagic || b[4] != checkpointVersion {
		return 0, fmt.Errorf("%w: bad offset checkpoint header (%d bytes)", record.ErrCorrupt, len(b))
	}
	if crc32.Checksum(b[:13], castagnoli) != binary.BigEndian.Uint32(b[13:]) {
		return 0, fmt.Errorf("%w: offset checkpoint crc mismatch", record.ErrCorrupt)
	}
	off := int64(binary.BigEndian.Uint64(b[5:]))
	if off < 0 {
		return 0, fmt.Errorf("%w: negative checkpoint offset %d", record.ErrCorrupt, off)
	}
	return off, nil
}

// readOffsetCheckpoint returns the offset stored in dir/name. A missing file
// yields an error matching os.ErrNotExist; a damaged one record.ErrCorrupt.
func readOffsetCheckpoint(dir, name string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return 0, err
	}
	off, err := decodeOffsetCheckpoint(b)
	if err != nil {
		return 0, fmt.Errorf("log: %s: %w", name, err)
	}
	return off, nil
}

// writeFileAtomic replaces dir/name with data through a temporary file and
// a rename, so readers see the old or the new content, never a mix. With
// durable set the data and the directory entry are fsynced.
func writeFileAtomic(dir, name string, data []byte, durable bool) error {
	tmp := filepath.Join(dir, name+tmpSuffix)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("log: %w", err)
	}
	_, err = f.Write(data)
	if err == nil && durable {
		err = fsync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err == nil && durable {
		err = syncDir(dir)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("log: write %s: %w", name, err)
	}
	return nil
}

// syncDir fsyncs a directory so created, renamed and removed entries persist.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = fsync(d)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncPath fsyncs a file by name; a missing file is not an error.
func syncPath(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	err = fsync(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// fsync is the one place the package forces data to stable storage. Tests
// replace it to count calls: they simulate crashes by abandoning a Log,
// which fsync cannot influence, and a busy disk would only slow them down.
// Failures injected by InjectSyncFailure apply to it.
var fsync = func(f *os.File) error {
	if err := injectedSyncFailure(f.Name()); err != nil {
		return &os.PathError{Op: "sync", Path: f.Name(), Err: err}
	}
	return f.Sync()
}
