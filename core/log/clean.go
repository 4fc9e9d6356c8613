package log

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/vltava/vltava/core/record"
)

// cleanerCheckpointFile holds the cleaner's first dirty offset (layout of
// an offset checkpoint, see doc.go).
const cleanerCheckpointFile = "cleaner-offset.checkpoint"

// File name suffixes of the swap protocol (doc.go, "Compaction").
const (
	cleanedSuffix = ".cleaned"
	swapSuffix    = ".swap"
)

// DefaultCleanerKeys is the key map capacity Clean uses when
// CleanOptions.MaxKeys is unset: about 40 MiB of 16-byte digests.
const DefaultCleanerKeys = 1 << 20

// cleanDecompressLimit bounds one batch's decompressed records while
// cleaning; a larger batch stops the pass with an error.
const cleanDecompressLimit = 256 << 20

// CleanOptions bound one cleaning pass.
type CleanOptions struct {
	// MaxKeys caps the key map (16-byte digest + offset per key). The pass
	// maps dirty segments until it is full and cleans up to there; the
	// rest waits for the next pass. <= 0 means DefaultCleanerKeys.
	MaxKeys int
	// Throttle limits the bytes read and written per second; nil is none.
	Throttle *Throttle
	// Force cleans even when no trigger (dirty ratio, max lag, due
	// tombstones) fires.
	Force bool
}

// CleanStats describes a cleaning pass.
type CleanStats struct {
	Segments     int   // source segments rewritten
	BytesRead    int64 // bytes read (mapping and copying)
	BytesWritten int64 // bytes of cleaned segments
	RecordsRead  int64 // records examined while copying
	RecordsKept  int64 // records written to cleaned segments
	CleanedTo    int64 // the new first dirty offset
}

// errCleanAborted means the log changed under a pass (retention,
// truncation, close); the pass ends without error and runs again later.
var errCleanAborted = errors.New("log: clean aborted")

// cleanHook, when set by tests, runs after each step of a segment swap;
// an error stops the swap there, leaving the files as a crash would.
var cleanHook func(dir, step string) error

func runHook(dir, step string) error {
	if cleanHook == nil {
		return nil
	}
	return cleanHook(dir, step)
}

// cleanPass is the state of one Clean call.
type cleanPass struct {
	l       *Log
	ctx     context.Context
	nowMs   int64
	cfg     Config
	opts    CleanOptions
	keys    map[keyDigest]int64 // latest offset of each key in the dirty range
	dig     digester
	lastOf  map[int64]int64 // producer ID -> last offset of its last batch
	aborted []AbortedTxn    // aborted transactions, read on first need (txn.go)
	txnKept map[int64]bool  // producer ID -> a batch of its current transaction was written this pass
	dropped []AbortedTxn    // ABORT markers the group being written removes (ProducerID, LastOffset)
	horizon int64           // earliest delete horizon of a kept tombstone, 0 if none
	br      *bufio.Reader   // segment reader, reused
	bw      *bufio.Writer   // cleaned segment writer, reused across groups
	recs    []rawRec        // a batch's records, reused
	keep    []rawRec        // the records filterBatch keeps, reused
	buf     []byte          // batch buffer, reused
	start   int64           // log start offset when planned
	cleaned int64           // first dirty offset when planned
	stats   CleanStats
}

// Clean compacts the log once if cleanup.policy includes compact and a
// trigger fires (or opts.Force): it maps the keys of the dirty segments
// (those at or after the cleaner checkpoint, fully below the recovery
// point, older than min.compaction.lag.ms, never the active segment) and
// rewrites every segment up to the last mapped one, keeping for each key
// only its latest record and dropping tombstones whose delete horizon has
// passed. Offsets do not change. Concurrent reads stay correct; Slices
// on replaced segments keep reading the old files.
func (l *Log) Clean(ctx context.Context, now time.Time, opts CleanOptions) (CleanStats, error) {
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	if err := l.checkOpen(); err != nil {
		return CleanStats{}, err
	}
	cfg := l.config()
	if !cfg.Compact {
		return CleanStats{}, nil
	}
	if opts.MaxKeys <= 0 {
		opts.MaxKeys = DefaultCleanerKeys
	}
	p := &cleanPass{l: l, ctx: ctx, nowMs: now.UnixMilli(), cfg: cfg, opts: opts, dig: newDigester(), txnKept: map[int64]bool{}}
	segs, n, firstDirty, ok := p.plan()
	cand := segs[:n]
	if !ok {
		return CleanStats{}, nil
	}
	upTo, cleanedTo, err := p.mapKeys(segs, n, firstDirty, max(p.cleaned, p.start))
	if err != nil {
		return p.stats, err
	}
	p.lastOf = l.producerLastOffsets()
	for _, g := range groupSegments(cand[:upTo], cfg.SegmentBytes) {
		if err := p.cleanGroup(g); err != nil {
			if errors.Is(err, errCleanAborted) {
				return p.stats, nil
			}
			return p.stats, err
		}
		p.stats.Segments += len(g)
	}
	p.stats.CleanedTo = cleanedTo
	if err := writeFileAtomic(l.dir, cleanerCheckpointFile, encodeOffsetCheckpoint(cleanedTo), false); err != nil {
		return p.stats, err
	}
	l.mu.Lock()
	l.cleaned = cleanedTo
	l.horizonDue = p.horizon
	l.mu.Unlock()
	return p.stats, nil
}

// plan picks the cleanable segments and decides whether a pass is due. It
// returns the segment list it looked at, how many of its first segments
// are candidates, and the index of the first dirty one.
func (p *cleanPass) plan() ([]*segment, int, int, bool) {
	l := p.l
	l.mu.RLock()
	segs, start, cleaned, rp, due := l.segs, l.start, l.cleaned, l.recoveryPoint, l.horizonDue
	l.mu.RUnlock()
	p.start, p.cleaned = start, cleaned
	n := 0 // candidates: inactive, wholly durable, older than the lag
	// and below the oldest open transaction (issue 11: as Kafka's cleaner,
	// never past the first unstable offset)
	unstable, open := l.FirstUnstableOffset()
	for n+1 < len(segs) && segs[n+1].base <= rp && (!open || segs[n+1].base <= unstable) {
		_, maxTs, _ := segs[n].stats()
		if p.cfg.MinCompactionLagMs > 0 && maxTs > p.nowMs-p.cfg.MinCompactionLagMs {
			break
		}
		n++
	}
	cand := segs[:n]
	firstDirty := max(cleaned, start)
	d := 0
	for d < n && segs[d+1].base <= firstDirty {
		d++
	}
	var cleanBytes, dirtyBytes int64
	for i, s := range cand {
		sz, _, _ := s.stats()
		if i < d {
			cleanBytes += sz
		} else {
			dirtyBytes += sz
		}
	}
	if n == 0 {
		return segs, 0, 0, false
	}
	fire := p.opts.Force || (due > 0 && p.nowMs >= due)
	if dirtyBytes > 0 {
		ratio := float64(dirtyBytes) / float64(cleanBytes+dirtyBytes)
		_, firstMax, _ := cand[d].stats()
		fire = fire || ratio >= p.cfg.MinCleanableDirtyRatio ||
			(p.cfg.MaxCompactionLagMs > 0 && firstMax >= 0 && p.nowMs-firstMax > p.cfg.MaxCompactionLagMs)
	}
	return segs, n, d, fire
}

// mapKeys records the latest offset of every key from the first dirty
// offset on, whole batches at a time, until the next batch would overflow
// the map (the first batch always goes in). It returns how many candidate
// segments the pass rewrites (through the one where mapping stopped) and
// the new first dirty offset: where mapping stopped, possibly inside a
// segment, as Kafka's cleaner does.
func (p *cleanPass) mapKeys(segs []*segment, n, d int, firstDirty int64) (int, int64, error) {
	p.keys = make(map[keyDigest]int64, min(p.opts.MaxKeys, 1<<16))
	for i := d; i < n; i++ {
		stop := int64(-1)
		err := p.eachBatch(segs[i], func(h record.Header, batch []byte, _ bool) error {
			if stop >= 0 || h.LastOffset() < firstDirty || h.Control() || p.abortedBatch(h) {
				return nil // an aborted transaction's record never shadows a committed one (txn.go)
			}
			if len(p.keys) > 0 && len(p.keys)+int(h.NumRecords) > p.opts.MaxKeys {
				stop = max(h.BaseOffset, firstDirty)
				return nil
			}
			return p.mapBatch(h, batch, firstDirty)
		})
		if err != nil {
			return 0, 0, err
		}
		if stop >= 0 {
			return i + 1, stop, nil
		}
	}
	return n, segs[n].base, nil
}

func (p *cleanPass) mapBatch(h record.Header, batch []byte, from int64) error {
	recs, err := batchRecords(p.recs, h, batch)
	if err != nil {
		return err
	}
	p.recs = recs
	for _, r := range recs {
		if off := h.BaseOffset + int64(r.offDelta); r.key != nil && off >= from {
			p.keys[p.dig.sum(r.key)] = off
		}
	}
	return nil
}

// batchRecords decompresses a batch and splits its records.
// The records are appended to recs[:0].
func batchRecords(recs []rawRec, h record.Header, batch []byte) ([]rawRec, error) {
	data := batch[record.HeaderSize:]
	if c := h.Codec(); c != record.CodecNone {
		var err error
		if data, err = record.Decompress(c, data, cleanDecompressLimit); err != nil {
			return nil, fmt.Errorf("log: clean: batch at offset %d: %w", h.BaseOffset, err)
		}
	}
	return splitRecords(recs, data, h.NumRecords)
}

// eachBatch reads every batch of segment s in order, checking CRCs, and
// calls fn with bytes valid until fn returns and whether it is the last.
func (p *cleanPass) eachBatch(s *segment, fn func(h record.Header, batch []byte, last bool) error) error {
	sf, err := s.acquire()
	if errors.Is(err, errSegmentGone) {
		return errCleanAborted
	}
	if err != nil {
		return err
	}
	defer sf.release()
	size, _, _ := s.stats()
	if p.br == nil {
		p.br = bufio.NewReaderSize(nil, 1<<20)
	}
	br := p.br
	br.Reset(io.NewSectionReader(sf.f, 0, size))
	buf := p.buf
	defer func() { p.buf = buf }()
	for pos := int64(0); pos < size; {
		hb, err := br.Peek(record.HeaderSize)
		if err != nil {
			return fmt.Errorf("log: clean: segment %d position %d: %w", s.base, pos, err)
		}
		h, err := record.ParseHeader(hb)
		if err != nil {
			return fmt.Errorf("log: clean: segment %d position %d: %w", s.base, pos, err)
		}
		if cap(buf) < h.Size() {
			buf = make([]byte, h.Size())
		}
		buf = buf[:h.Size()]
		if _, err := io.ReadFull(br, buf); err != nil {
			return fmt.Errorf("log: clean: segment %d position %d: %w", s.base, pos, err)
		}
		if err := record.CheckCRC(buf); err != nil {
			return fmt.Errorf("log: clean: segment %d position %d: %w", s.base, pos, err)
		}
		p.stats.BytesRead += int64(len(buf))
		if err := p.opts.Throttle.Wait(p.ctx, len(buf)); err != nil {
			return err
		}
		pos += int64(len(buf))
		if err := fn(h, buf, pos == size); err != nil {
			return err
		}
	}
	return nil
}

// producerLastOffsets returns, per producer, the last offset of its last
// batch: the cleaner keeps that batch (empty if need be), as Kafka does, so
// the producer's sequence survives a rebuild of producer state from the log.
func (l *Log) producerLastOffsets() map[int64]int64 {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	m := make(map[int64]int64, len(l.producers))
	for id, p := range l.producers {
		if n := len(p.batches); n > 0 {
			m[id] = p.batches[n-1].lastOffset
		}
	}
	return m
}

// groupSegments splits consecutive segments into groups that become one
// cleaned segment each: at most maxBytes of source data (a single larger
// segment is its own group) and offsets that stay within 32-bit relative
// offsets of the group's base.
func groupSegments(segs []*segment, maxBytes int64) [][]*segment {
	var out [][]*segment
	for i := 0; i < len(segs); {
		sz, _, _ := segs[i].stats()
		j := i + 1
		for j < len(segs) {
			s2, _, _ := segs[j].stats()
			end := segs[j].base // conservative end of the group so far
			if j+1 < len(segs) {
				end = segs[j+1].base
			}
			if sz+s2 > maxBytes || end-segs[i].base > math.MaxInt32 {
				break
			}
			sz += s2
			j++
		}
		out = append(out, segs[i:j])
		i = j
	}
	return out
}

// cleanGroup writes the cleaned copy of group g and swaps it in.
func (p *cleanPass) cleanGroup(g []*segment) error {
	l := p.l
	base := g[0].base
	cleanedPath := filepath.Join(l.dir, segName(base)+logSuffix+cleanedSuffix)
	f, err := os.OpenFile(cleanedPath, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("log: clean: %w", err)
	}
	m, err := p.writeGroup(f, g)
	if err == nil {
		err = fsync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(cleanedPath)
		return err
	}
	m.maybeAddTime()
	// The removed ABORT markers leave the aborted-transaction index
	// before the swap: their transactions' records went in an earlier
	// pass, so no read needs the entries, and a reader that got an entry
	// without meeting its marker would skip the producer's later batches.
	if len(p.dropped) > 0 {
		l.appendMu.Lock()
		for _, a := range p.dropped {
			l.txns.dropAborted(a.ProducerID, a.LastOffset)
		}
		l.appendMu.Unlock()
		p.dropped, p.aborted = p.dropped[:0], nil
	}
	return l.swapIn(g, m)
}

// writeGroup copies g's surviving batches to w and returns the new
// segment's metadata.
func (p *cleanPass) writeGroup(w io.Writer, g []*segment) (segMeta, error) {
	m := newSegMeta(g[0].base, int64(p.cfg.IndexIntervalBytes))
	if p.bw == nil {
		p.bw = bufio.NewWriterSize(w, 1<<20)
	}
	bw := p.bw
	bw.Reset(w)
	defer bw.Reset(nil) // hold no file past the group
	var out []byte
	for i, s := range g {
		err := p.eachBatch(s, func(h record.Header, batch []byte, last bool) error {
			var err error
			out, err = p.filterBatch(out[:0], h, batch, last && i == len(g)-1)
			if err != nil || len(out) == 0 {
				return err
			}
			nh, _ := record.ParseHeader(out) // built or copied whole
			m.add(nh, m.size)
			p.stats.BytesWritten += int64(len(out))
			if _, err := bw.Write(out); err != nil {
				return fmt.Errorf("log: clean: %w", err)
			}
			return p.opts.Throttle.Wait(p.ctx, len(out))
		})
		if err != nil {
			return m, err
		}
	}
	if err := bw.Flush(); err != nil {
		return m, fmt.Errorf("log: clean: %w", err)
	}
	return m, nil
}

// filterBatch appends to dst what the cleaned segment keeps of one batch:
// the batch unchanged, a rebuilt batch with fewer records or a new delete
// horizon, or nothing. A batch left without records is still written,
// empty, when it is its producer's last (Kafka keeps it for the
// producer's sequence) or the last of the cleaned segment (so the segment
// keeps its last offset: a fetch anywhere in it returns a batch and
// consumers move past the removed offsets instead of waiting at them).
//
// Transactions (issue 11), as Kafka's cleaner: the records of an aborted
// transaction are all removed; a marker stays while any batch of its
// transaction is still in the log (filterMarker).
func (p *cleanPass) filterBatch(dst []byte, h record.Header, batch []byte, lastInSegment bool) ([]byte, error) {
	if h.Control() {
		return p.filterMarker(dst, h, batch, lastInSegment)
	}
	n := len(dst)
	dst, err := p.filterData(dst, h, batch, lastInSegment)
	if err == nil && h.Transactional() && len(dst) > n {
		p.txnKept[h.ProducerID] = true
	}
	return dst, err
}

// filterMarker decides a transaction marker. The pass reads the log from
// its start, so by a marker it has seen every batch of the transaction
// the marker ends. While one of them is kept, so is the marker: without
// it the batch would read as an open transaction to a rebuild of producer
// state. Once none is, the marker is needed no longer, and it goes as a
// tombstone does: the first pass stamps a delete horizon
// (delete.retention.ms, so a consumer that read the transaction's records
// before they went still reads its marker), a pass after the horizon
// removes it. A producer's last batch and a cleaned segment's last batch
// stay regardless (producer state, the segment's last offset).
func (p *cleanPass) filterMarker(dst []byte, h record.Header, batch []byte, lastInSegment bool) ([]byte, error) {
	kept := p.txnKept[h.ProducerID]
	delete(p.txnKept, h.ProducerID)
	if last, ok := p.lastOf[h.ProducerID]; kept || lastInSegment || (ok && last == h.LastOffset()) {
		return append(dst, batch...), nil
	}
	horizon, hasH := hasHorizon(h)
	if hasH && p.nowMs >= horizon {
		if ctl, _ := controlTypeOf(h, batch); ctl == record.ControlAbort {
			p.dropped = append(p.dropped, AbortedTxn{ProducerID: h.ProducerID, LastOffset: h.BaseOffset})
		}
		return dst, nil
	}
	if hasH {
		p.noteHorizon(horizon)
		return append(dst, batch...), nil
	}
	recs, err := batchRecords(p.recs, h, batch)
	if err != nil {
		return dst, err
	}
	horizon = p.nowMs + p.cfg.DeleteRetentionMs
	p.noteHorizon(horizon)
	return rebuildBatch(dst, batch, h, batchDecision{keep: recs, horizon: horizon})
}

// noteHorizon remembers the earliest delete horizon still ahead, when the
// next pass is due.
func (p *cleanPass) noteHorizon(horizon int64) {
	if p.horizon == 0 || horizon < p.horizon {
		p.horizon = horizon
	}
}

// filterData is filterBatch for a batch of records.
func (p *cleanPass) filterData(dst []byte, h record.Header, batch []byte, lastInSegment bool) ([]byte, error) {
	recs, err := batchRecords(p.recs, h, batch)
	if err != nil {
		return dst, err
	}
	p.recs = recs
	horizon, hasH := hasHorizon(h)
	d := batchDecision{keep: p.keep[:0]}
	defer func() { p.keep = d.keep[:0] }()
	tombstones := false
	aborted := h.Transactional() && p.abortedBatch(h)
	for _, r := range recs {
		p.stats.RecordsRead++
		if aborted || r.key == nil {
			continue // compacted topics need keys; Kafka's cleaner drops these too
		}
		off := h.BaseOffset + int64(r.offDelta)
		if latest, ok := p.keys[p.dig.sum(r.key)]; ok && latest > off {
			continue
		}
		if r.tombstone {
			if hasH && p.nowMs >= horizon {
				continue
			}
			tombstones = true
		}
		d.keep = append(d.keep, r)
	}
	p.stats.RecordsKept += int64(len(d.keep))
	if tombstones {
		if !hasH {
			horizon = p.nowMs + p.cfg.DeleteRetentionMs
			d.horizon = horizon
		}
		p.noteHorizon(horizon)
	}
	if len(d.keep) == len(recs) && d.horizon == 0 {
		return append(dst, batch...), nil
	}
	if len(d.keep) == 0 && !lastInSegment {
		if last, ok := p.lastOf[h.ProducerID]; !h.Idempotent() || !ok || last != h.LastOffset() {
			return dst, nil
		}
	}
	return rebuildBatch(dst, batch, h, d)
}
