package checker

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Anomaly names, as Check reports them.
const (
	LostWrite           = "lost-write"
	Unseen              = "unseen"
	Duplicate           = "duplicate"
	InconsistentOffsets = "inconsistent-offsets"
	NonMonotonicPoll    = "non-monotonic-poll"
	NonMonotonicSend    = "non-monotonic-send"
	Reordering          = "reordering"
	AbortedRead         = "aborted-read"
)

// AllAnomalies lists every anomaly name Check can report.
var AllAnomalies = []string{LostWrite, Unseen, Duplicate, InconsistentOffsets,
	NonMonotonicPoll, NonMonotonicSend, Reordering, AbortedRead}

// Anomaly is one instance of a named anomaly.
type Anomaly struct {
	Name   string
	Detail string
}

// Report is what Check found in a history.
type Report struct {
	Anomalies []Anomaly
	Sends     int // send invocations
	Acked     int // sends completed ok with an offset
	Failed    int // sends completed fail
	Unknown   int // sends completed info, or never completed
	Read      int // distinct values read
	// Redelivered counts values read by more than one process (at the
	// same offset): what at-least-once consumption allows after a crash.
	Redelivered int
}

// Names returns the distinct anomaly names found, sorted.
func (r *Report) Names() []string {
	var names []string
	for _, a := range r.Anomalies {
		names = append(names, a.Name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Count returns how many anomalies named name were found.
func (r *Report) Count(name string) int {
	n := 0
	for _, a := range r.Anomalies {
		if a.Name == name {
			n++
		}
	}
	return n
}

// Summary is a one-line account of the history and its anomalies.
func (r *Report) Summary() string {
	var parts []string
	for _, n := range r.Names() {
		parts = append(parts, fmt.Sprintf("%s=%d", n, r.Count(n)))
	}
	an := "none"
	if len(parts) > 0 {
		an = strings.Join(parts, " ")
	}
	return fmt.Sprintf("sends=%d acked=%d failed=%d unknown=%d read=%d redelivered=%d anomalies: %s",
		r.Sends, r.Acked, r.Failed, r.Unknown, r.Read, r.Redelivered, an)
}

type tp struct {
	topic string
	part  int32
}

func (t tp) String() string { return fmt.Sprintf("%s/%d", t.topic, t.part) }

type pos struct {
	tp
	offset int64
}

// send is an invocation joined with its completion.
type send struct {
	proc           string
	tp             tp
	value          string
	invoke, finish int64 // times; finish -1 if never completed
	typ            string
	offset         int64
}

// history is the indexed form Check works on.
type history struct {
	sends     []*send
	sendByVal map[string]*send
	readAt    map[string]map[pos]bool    // value -> positions read
	readBy    map[string]map[string]bool // value -> processes that read it
	valuesAt  map[pos]map[string]bool    // position -> values (reads and acks)
	maxRead   map[tp]int64               // highest offset read per partition
	report    *Report
}

// Check finds the anomalies in ops (a history ordered by time, as
// ReadFiles returns it). Values are assumed unique per send, as the
// conformance producers make them.
func Check(ops []Op) *Report {
	h := &history{
		sendByVal: map[string]*send{},
		readAt:    map[string]map[pos]bool{},
		readBy:    map[string]map[string]bool{},
		valuesAt:  map[pos]map[string]bool{},
		maxRead:   map[tp]int64{},
		report:    &Report{},
	}
	h.index(ops)
	h.checkPolls(ops)
	h.checkValues()
	h.checkSendOrder()
	h.checkRealTime()
	sort.SliceStable(h.report.Anomalies, func(i, j int) bool {
		return h.report.Anomalies[i].Name < h.report.Anomalies[j].Name
	})
	return h.report
}

func (h *history) add(name, format string, args ...any) {
	h.report.Anomalies = append(h.report.Anomalies, Anomaly{name, fmt.Sprintf(format, args...)})
}

// index joins sends with their completions and records every read.
func (h *history) index(ops []Op) {
	type key struct {
		proc string
		id   int64
	}
	open := map[key]*send{}
	for _, op := range ops {
		switch {
		case op.F == Send && op.Type == Invoke:
			s := &send{proc: op.Proc, tp: tp{op.Topic, op.Partition}, value: op.Value,
				invoke: op.Time, finish: -1, offset: -1}
			open[key{op.Proc, op.ID}] = s
			h.sends = append(h.sends, s)
			h.sendByVal[s.value] = s
		case op.F == Send:
			s := open[key{op.Proc, op.ID}]
			if s == nil {
				continue
			}
			s.finish, s.typ = op.Time, op.Type
			if op.Type == OK && op.Offset >= 0 {
				s.offset = op.Offset
				s.tp.part = op.Partition // the partitioner may pick it at send time
				h.note(pos{s.tp, s.offset}, s.value)
			}
		case op.F == Poll && op.Type == OK:
			for _, r := range op.Reads {
				p := pos{tp{op.Topic, r.Partition}, r.Offset}
				h.note(p, r.Value)
				if h.readAt[r.Value] == nil {
					h.readAt[r.Value] = map[pos]bool{}
				}
				h.readAt[r.Value][p] = true
				if h.readBy[r.Value] == nil {
					h.readBy[r.Value] = map[string]bool{}
				}
				h.readBy[r.Value][op.Proc] = true
				if m, ok := h.maxRead[p.tp]; !ok || r.Offset > m {
					h.maxRead[p.tp] = r.Offset
				}
			}
		}
	}
	for _, s := range h.sends {
		h.report.Sends++
		switch {
		case s.typ == OK && s.offset >= 0:
			h.report.Acked++
		case s.typ == Fail:
			h.report.Failed++
		default:
			h.report.Unknown++
		}
	}
	h.report.Read = len(h.readAt)
	for _, procs := range h.readBy {
		if len(procs) > 1 {
			h.report.Redelivered++
		}
	}
}

func (h *history) note(p pos, value string) {
	if h.valuesAt[p] == nil {
		h.valuesAt[p] = map[string]bool{}
	}
	h.valuesAt[p][value] = true
}

// checkPolls finds consumers going backwards within a partition.
func (h *history) checkPolls(ops []Op) {
	type pk struct {
		proc string
		tp   tp
	}
	last := map[pk]int64{}
	for _, op := range ops {
		if op.F == Assign {
			for k := range last {
				if k.proc == op.Proc {
					delete(last, k)
				}
			}
			continue
		}
		if op.F != Poll || op.Type != OK {
			continue
		}
		for _, r := range op.Reads {
			k := pk{op.Proc, tp{op.Topic, r.Partition}}
			if prev, ok := last[k]; ok && r.Offset <= prev {
				h.add(NonMonotonicPoll, "%s read %s offset %d after offset %d", op.Proc, k.tp, r.Offset, prev)
			}
			last[k] = r.Offset
		}
	}
}

// checkValues finds duplicates, inconsistent offsets, aborted reads and
// acknowledged writes never read (lost or unseen).
func (h *history) checkValues() {
	for _, v := range sortedKeys(h.readAt) {
		if n := len(h.readAt[v]); n > 1 {
			h.add(Duplicate, "value %q read at %d offsets: %s", v, n, posList(h.readAt[v]))
		}
		if s := h.sendByVal[v]; s != nil && s.typ == Fail {
			h.add(AbortedRead, "value %q read at %s but its send failed", v, posList(h.readAt[v]))
		}
	}
	var ps []pos
	for p, vs := range h.valuesAt {
		if len(vs) > 1 {
			ps = append(ps, p)
		}
	}
	slices.SortFunc(ps, comparePos)
	for _, p := range ps {
		h.add(InconsistentOffsets, "%s offset %d holds %q", p.tp, p.offset, sortedKeys(h.valuesAt[p]))
	}
	for _, s := range h.sends {
		if s.typ != OK || s.offset < 0 || h.readAt[s.value] != nil {
			continue
		}
		if m, ok := h.maxRead[s.tp]; ok && m > s.offset {
			h.add(LostWrite, "value %q acknowledged at %s offset %d, never read; reads reached offset %d", s.value, s.tp, s.offset, m)
		} else {
			h.add(Unseen, "value %q acknowledged at %s offset %d, never read", s.value, s.tp, s.offset)
		}
	}
}

// checkSendOrder finds a producer whose acknowledged offsets in a
// partition do not rise in invocation order.
func (h *history) checkSendOrder() {
	type pk struct {
		proc string
		tp   tp
	}
	last := map[pk]*send{}
	for _, s := range h.sends { // h.sends is in invocation order
		if s.typ != OK || s.offset < 0 {
			continue
		}
		k := pk{s.proc, s.tp}
		if prev := last[k]; prev != nil && s.offset <= prev.offset {
			h.add(NonMonotonicSend, "%s sent %q (offset %d) after %q (offset %d) in %s", s.proc, s.value, s.offset, prev.value, prev.offset, s.tp)
		}
		last[k] = s
	}
}

// checkRealTime finds sends ordered in real time (A acknowledged before B
// was invoked) whose offsets are in the other order.
func (h *history) checkRealTime() {
	byTP := map[tp][]*send{}
	for _, s := range h.sends {
		if s.typ == OK && s.offset >= 0 {
			byTP[s.tp] = append(byTP[s.tp], s)
		}
	}
	for _, t := range sortedKeys(byTP) {
		ss := byTP[t]
		done := slices.Clone(ss)
		slices.SortFunc(done, func(a, b *send) int { return cmp64(a.finish, b.finish) })
		// ss is in invocation order; sweep completions before each invoke.
		var maxDone *send
		i := 0
		for _, b := range ss {
			for i < len(done) && done[i].finish < b.invoke {
				if maxDone == nil || done[i].offset > maxDone.offset {
					maxDone = done[i]
				}
				i++
			}
			if maxDone != nil && maxDone.offset >= b.offset {
				h.add(Reordering, "%s: %q acknowledged (offset %d) before %q was sent, which got offset %d", t, maxDone.value, maxDone.offset, b.value, b.offset)
			}
		}
	}
}

func cmp64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func comparePos(a, b pos) int {
	if c := strings.Compare(a.topic, b.topic); c != 0 {
		return c
	}
	if c := cmp64(int64(a.part), int64(b.part)); c != 0 {
		return c
	}
	return cmp64(a.offset, b.offset)
}

func posList(m map[pos]bool) string {
	var ps []pos
	for p := range m {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, comparePos)
	var s []string
	for _, p := range ps {
		s = append(s, fmt.Sprintf("%s@%d", p.tp, p.offset))
	}
	return strings.Join(s, ",")
}

func sortedKeys[K interface{ comparable }, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b K) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	return keys
}
