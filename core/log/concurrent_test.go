package log

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vltava/vltava/core/record"
)

// Readers run against one appender; every read must return whole, valid
// batches that start at or before the requested offset, and Changed must
// fire for every advance.
func TestConcurrentReadersDuringAppends(t *testing.T) {
	cfg := testConfig(nil)
	cfg.SegmentBytes = 8192
	l := openLog(t, t.TempDir(), cfg)
	const batches = 300
	var done atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 9))
			for !done.Load() {
				end := l.EndOffset()
				if end == 0 {
					continue
				}
				off := rng.Int64N(end)
				if err := checkRead(l, off, end); err != nil && !(errors.Is(err, ErrOffsetOutOfRange) && off < l.StartOffset()) {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // long-poll follower: waits on Changed, reads from its position
		defer wg.Done()
		pos := int64(0)
		for pos < batches*2 {
			ch := l.Changed()
			if l.EndOffset() == pos {
				select {
				case <-ch:
				case <-time.After(2 * time.Minute): // hang guard only; fsync stalls on a busy disk can be long
					errc <- fmt.Errorf("Changed never fired: pos %d end %d start %d", pos, l.EndOffset(), l.StartOffset())
					return
				}
			}
			s, err := l.Read(pos, 1<<20, l.EndOffset())
			if errors.Is(err, ErrOffsetOutOfRange) && pos < l.StartOffset() {
				pos = l.StartOffset() // fell behind DeleteRecords
				continue
			}
			if err != nil {
				errc <- err
				return
			}
			b, err := s.Bytes(nil)
			s.Close()
			if err != nil {
				errc <- err
				return
			}
			for rest := b; len(rest) > 0; {
				h, _, r, err := record.Next(rest)
				if err != nil || h.BaseOffset > pos || h.LastOffset() < pos {
					errc <- errors.New("follower saw a gap or bad batch")
					return
				}
				pos, rest = h.LastOffset()+1, r
			}
		}
	}()
	var m model
	for i := range batches {
		appendBatch(t, l, &m, plain(2, 100+i%300, int64(i)))
		if i%100 == 0 {
			l.Maintain(time.Now(), noHW)
		}
		if i%50 == 0 && i >= 200 { // segments vanish under the readers
			if _, err := l.DeleteRecordsBefore(l.EndOffset() - 200); err != nil {
				t.Fatal(err)
			}
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for len(errc) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // let the follower catch up
		if l.EndOffset() == batches*2 {
			break
		}
	}
	t.Logf("end %d after appends", l.EndOffset())
	time.Sleep(20 * time.Millisecond)
	done.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if !bytes.Equal(readAll(t, l), m.bytesFrom(m.find(l.StartOffset()))) {
		t.Fatal("final content differs")
	}
}

func checkRead(l *Log, off, end int64) error {
	s, err := l.Read(off, 2000, end)
	if err != nil {
		return err
	}
	defer s.Close()
	b, err := s.Bytes(nil)
	if err != nil {
		return err
	}
	if len(b) == 0 {
		return errors.New("empty read below end")
	}
	first := true
	for rest := b; len(rest) > 0; {
		h, batch, r, err := record.Next(rest)
		if err != nil {
			return err
		}
		if err := record.CheckCRC(batch); err != nil {
			return err
		}
		if first && (h.BaseOffset > off || h.LastOffset() < off) {
			return errors.New("first batch does not contain the offset")
		}
		if h.BaseOffset >= end {
			return errors.New("batch at or beyond maxOffset")
		}
		first, rest = false, r
	}
	return nil
}
