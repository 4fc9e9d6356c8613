package checker

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"
)

// Op types.
const (
	Invoke = "invoke" // the operation started
	OK     = "ok"     // it took effect
	Fail   = "fail"   // it definitely did not take effect
	Info   = "info"   // unknown: it may or may not have taken effect
)

// Op functions.
const (
	Send   = "send"    // produce one record
	Poll   = "poll"    // one fetch/poll returning Reads
	Commit = "commit"  // commit consumer offsets
	Assign = "assign"  // the consumer's position was reset (seek, rebalance)
	EndTxn = "end-txn" // end a transaction: Value is "commit" or "abort"
)

// ReadCommitted marks a poll made with isolation.level=read_committed.
const ReadCommitted = "read_committed"

// Op is one line of a history file.
type Op struct {
	ID        int64  `json:"id"`
	Proc      string `json:"proc"`
	Type      string `json:"type"`
	F         string `json:"f"`
	Time      int64  `json:"time"`
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"` // -1 when unknown
	Value     string `json:"value,omitempty"`
	Reads     []Read `json:"reads,omitempty"`
	Error     string `json:"error,omitempty"`
	// Txn names the transaction a send belongs to (unique per
	// transaction, not the transactional.id) or an end-txn ends.
	Txn string `json:"txn,omitempty"`
	// Isolation is ReadCommitted on polls made under read_committed.
	Isolation string `json:"isolation,omitempty"`
}

// Read is one record a poll returned.
type Read struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Value     string `json:"value"`
}

// Clock is a shared epoch for recorders, so their times are comparable.
type Clock struct{ start time.Time }

// NewClock returns a clock starting now.
func NewClock() *Clock { return &Clock{start: time.Now()} }

// Now is nanoseconds since the clock's start; monotonic.
func (c *Clock) Now() int64 { return int64(time.Since(c.start)) }

// Recorder appends operations of one process to a history file. It is
// safe for concurrent use.
type Recorder struct {
	mu    sync.Mutex
	f     *os.File // O_APPEND; one write per line, so recorders may share a file
	clock *Clock
	proc  string
	next  int64
	err   error
}

// Create opens (appending) the history file path for process proc.
func Create(path, proc string, clock *Clock) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("checker: %w", err)
	}
	return &Recorder{f: f, clock: clock, proc: proc}, nil
}

// Invoke records the start of an operation and returns it, with ID, Proc,
// Type and Time filled in, for Complete.
func (r *Recorder) Invoke(op Op) Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	op.ID, op.Proc, op.Type, op.Time = r.next, r.proc, Invoke, r.clock.Now()
	r.writeLocked(op)
	return op
}

// Complete records the completion of an invoked op with type typ (OK,
// Fail or Info). op carries whatever the completion learned (Offset,
// Reads, Error).
func (r *Recorder) Complete(op Op, typ string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	op.Proc, op.Type, op.Time = r.proc, typ, r.clock.Now()
	r.writeLocked(op)
}

func (r *Recorder) writeLocked(op Op) {
	if r.err != nil {
		return
	}
	b, err := json.Marshal(op)
	if err == nil {
		b = append(b, '\n')
		_, err = r.f.Write(b)
	}
	r.err = err
}

// Close flushes and closes the file, returning the first write error.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := errors.Join(r.err, r.f.Close())
	if err != nil {
		return fmt.Errorf("checker: %w", err)
	}
	return nil
}

// ReadHistory decodes one history stream.
func ReadHistory(rd io.Reader) ([]Op, error) {
	var ops []Op
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var op Op
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			return nil, fmt.Errorf("checker: line %d: %w", line, err)
		}
		ops = append(ops, op)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("checker: %w", err)
	}
	return ops, nil
}

// ReadFiles reads and merges history files, ordered by time (stable, so
// one file's order is kept for equal times).
func ReadFiles(paths ...string) ([]Op, error) {
	var all []Op
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("checker: %w", err)
		}
		ops, err := ReadHistory(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%w (%s)", err, p)
		}
		all = append(all, ops...)
	}
	slices.SortStableFunc(all, func(a, b Op) int {
		switch {
		case a.Time < b.Time:
			return -1
		case a.Time > b.Time:
			return 1
		}
		return 0
	})
	return all, nil
}
