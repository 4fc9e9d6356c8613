package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/vltava/vltava/plugins/sdk"
)

func TestRecordRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		version int64
		session sdk.SessionID
		value   []byte
	}{
		{1, sdk.NoSession, nil},
		{42, 7, []byte("hello")},
		{1 << 40, 1 << 62, bytes.Repeat([]byte{0xff}, 300)},
	} {
		b := encodeRecord(tc.version, tc.session, tc.value)
		if len(b) != recordHeader+len(tc.value) || b[0] != formatVersion {
			t.Fatalf("encoded %d bytes, format %d", len(b), b[0])
		}
		r, err := decodeRecord([]byte("k"), b)
		if err != nil || r.version != tc.version || r.session != tc.session || !bytes.Equal(r.value, tc.value) {
			t.Fatalf("decode(encode(%d, %d, %q)) = %+v, %v", tc.version, tc.session, tc.value, r, err)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(encodeRecord(1, 0, []byte("v")))
	f.Add(encodeRecord(9, 3, nil))
	f.Add([]byte{})
	f.Add([]byte{formatVersion, 0, 0})
	f.Add(append([]byte{2}, make([]byte, 20)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord([]byte("k"), b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if again := encodeRecord(r.version, r.session, r.value); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs: %x vs %x", again, b)
		}
	})
}

func TestOpenRejectsCorruptRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	s := openStore(t, path, Options{})
	mustPut(t, s, &sdk.PutRequest{Key: "k", Value: []byte("v"), ExpectVersion: sdk.AnyVersion})
	s.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketKV).Put([]byte("k"), []byte{9, 9}) })
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if s, err := Open(path, Options{}); !errors.Is(err, ErrCorrupt) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open of a corrupt file: err = %v, want ErrCorrupt", err)
	}
}

// BenchmarkPut measures durable (fsync'ed) single-key writes.
func BenchmarkPut(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "meta.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	value := bytes.Repeat([]byte("x"), 256)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		if _, err := s.Put(ctx, &sdk.PutRequest{Key: fmt.Sprintf("k%d", i%1000), Value: value, ExpectVersion: sdk.AnyVersion}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
