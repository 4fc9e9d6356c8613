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
	TornTransaction     = "torn-transaction"
	DirtyRead           = "dirty-read"
	WriteCycle          = "write-cycle"
)

// AllAnomalies lists every anomaly name Check can report.
var AllAnomalies = []string{LostWrite, Unseen, Duplicate, InconsistentOffsets,
	NonMonotonicPoll, NonMonotonicSend, Reordering, AbortedRead, TornTransaction, DirtyRead, WriteCycle}

// Anomaly is one instance of a named anomaly.
type Anomaly struct {
	Name   string
	Detail string
}

// Report is what Check found in a history.
type Report struct {
	Anomalies []Anomaly
	Sends     int // send invocations
	Acked     int // sends completed ok with an offset (not in an aborted transaction)
	Failed    int // sends completed fail
	Aborted   int // sends acknowledged in a transaction that aborted
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
	ab := ""
	if r.Aborted > 0 {
		ab = fmt.Sprintf(" aborted=%d", r.Aborted)
	}
	return fmt.Sprintf("sends=%d acked=%d failed=%d unknown=%d%s read=%d redelivered=%d anomalies: %s",
		r.Sends, r.Acked, r.Failed, r.Unknown, ab, r.Read, r.Redelivered, an)
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
	txn            string
}

// txn is what the history says about one transaction.
type txn struct {
	status    string // commit, abort or "" (unknown, or never ended)
	endInvoke int64  // when the ending end-txn was invoked; -1 if none
}

// committedRead is one value a read_committed poll returned.
type committedRead struct {
	proc  string
	at    pos
	value string
	time  int64 // the poll's completion
}

// history is the indexed form Check works on.
type history struct {
	sends     []*send
	sendByVal map[string]*send
	readAt    map[string]map[pos]bool    // value -> positions read
	readBy    map[string]map[string]bool // value -> processes that read it
	valuesAt  map[pos]map[string]bool    // position -> values (reads and acks)
	maxRead   map[tp]int64               // highest offset read per partition
	txns      map[string]*txn
	committed []committedRead // reads under read_committed, in time order
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
		txns:      map[string]*txn{},
		report:    &Report{},
	}
	h.index(ops)
	h.checkPolls(ops)
	h.checkValues()
	h.checkTxns()
	h.checkWriteCycles()
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
				invoke: op.Time, finish: -1, offset: -1, txn: op.Txn}
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
		case op.F == EndTxn:
			t := h.txns[op.Txn]
			if t == nil {
				t = &txn{endInvoke: -1}
				h.txns[op.Txn] = t
			}
			switch {
			case op.Type == Invoke:
				t.endInvoke = op.Time
			case op.Type == OK:
				t.status = op.Value
			case op.Type == Fail && op.Value == "commit":
				t.status = "abort" // a commit that definitely failed aborts
			}
		case op.F == Poll && op.Type == OK:
			for _, r := range op.Reads {
				p := pos{tp{op.Topic, r.Partition}, r.Offset}
				if op.Isolation == ReadCommitted {
					h.committed = append(h.committed, committedRead{op.Proc, p, r.Value, op.Time})
				}
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
		case s.typ == OK && s.offset >= 0 && h.aborted(s):
			h.report.Aborted++
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
		if s.typ != OK || s.offset < 0 || h.readAt[s.value] != nil || h.aborted(s) || h.txnOpen(s) {
			continue
		}
		if m, ok := h.maxRead[s.tp]; ok && m > s.offset {
			h.add(LostWrite, "value %q acknowledged at %s offset %d, never read; reads reached offset %d", s.value, s.tp, s.offset, m)
		} else {
			h.add(Unseen, "value %q acknowledged at %s offset %d, never read", s.value, s.tp, s.offset)
		}
	}
}

// aborted reports whether s belongs to a transaction that aborted.
func (h *history) aborted(s *send) bool {
	t := h.txns[s.txn]
	return s.txn != "" && t != nil && t.status == "abort"
}

// txnOpen reports whether s belongs to a transaction whose outcome is
// unknown: its acknowledgement is provisional, so it is never unseen.
func (h *history) txnOpen(s *send) bool {
	if s.txn == "" {
		return false
	}
	t := h.txns[s.txn]
	return t == nil || t.status == ""
}

// checkTxns finds read_committed reads that break transaction
// atomicity: a value of an aborted transaction (aborted-read), a value
// returned before its transaction's commit was even requested
// (dirty-read), and a reader that saw part of a committed transaction
// while reading past the offsets of the rest (torn-transaction).
func (h *history) checkTxns() {
	type rk struct {
		proc string
		tp   tp
	}
	seen := map[string]map[string]bool{}    // proc -> values it read under read_committed
	reach := map[rk]int64{}                 // highest offset a read_committed reader read
	touched := map[string]map[string]bool{} // proc -> committed transactions it read part of
	for _, r := range h.committed {
		if seen[r.proc] == nil {
			seen[r.proc], touched[r.proc] = map[string]bool{}, map[string]bool{}
		}
		seen[r.proc][r.value] = true
		if m, ok := reach[rk{r.proc, r.at.tp}]; !ok || r.at.offset > m {
			reach[rk{r.proc, r.at.tp}] = r.at.offset
		}
		s := h.sendByVal[r.value]
		if s == nil || s.txn == "" {
			continue
		}
		t := h.txns[s.txn]
		switch {
		case h.aborted(s):
			h.add(AbortedRead, "%s read %q at %s@%d under read_committed, but transaction %s aborted", r.proc, r.value, r.at.tp, r.at.offset, s.txn)
		case t == nil || t.endInvoke < 0 || r.time < t.endInvoke:
			h.add(DirtyRead, "%s read %q at %s@%d under read_committed before transaction %s was committed", r.proc, r.value, r.at.tp, r.at.offset, s.txn)
		}
		if t != nil && t.status == "commit" {
			touched[r.proc][s.txn] = true
		}
	}
	for _, proc := range sortedKeys(touched) {
		for _, id := range sortedKeys(touched[proc]) {
			var missing []string
			for _, s := range h.sends {
				if s.txn != id || s.typ != OK || s.offset < 0 || seen[proc][s.value] {
					continue
				}
				if m, ok := reach[rk{proc, s.tp}]; ok && m > s.offset {
					missing = append(missing, fmt.Sprintf("%q (%s@%d)", s.value, s.tp, s.offset))
				}
			}
			if len(missing) > 0 {
				h.add(TornTransaction, "%s read part of committed transaction %s but not %s, although it read past them", proc, id, strings.Join(missing, ", "))
			}
		}
	}
}

// checkWriteCycles finds G0 among committed transactions: in each
// partition, a committed transaction's record directly followed (in
// offset order, among committed transactional records) by another
// committed transaction's record orders the first before the second; a
// cycle in that order is a write cycle. Transactions that only write have
// no read dependencies, so this is also their G1c.
func (h *history) checkWriteCycles() {
	byTP := map[tp][]*send{}
	for _, s := range h.sends {
		if t := h.txns[s.txn]; s.txn != "" && t != nil && t.status == "commit" && s.typ == OK && s.offset >= 0 {
			byTP[s.tp] = append(byTP[s.tp], s)
		}
	}
	edges := map[string]map[string]tp{} // txn -> txns written after it -> where
	for _, t := range sortedKeys(byTP) {
		ss := byTP[t]
		slices.SortFunc(ss, func(a, b *send) int { return cmp64(a.offset, b.offset) })
		for i := 1; i < len(ss); i++ {
			a, b := ss[i-1].txn, ss[i].txn
			if a == b {
				continue
			}
			if edges[a] == nil {
				edges[a] = map[string]tp{}
			}
			if _, ok := edges[a][b]; !ok {
				edges[a][b] = t
			}
		}
	}
	for _, scc := range cycles(edges) {
		var where []string
		for _, a := range scc {
			for _, b := range scc {
				if t, ok := edges[a][b]; ok {
					where = append(where, fmt.Sprintf("%s before %s in %s", a, b, t))
				}
			}
		}
		h.add(WriteCycle, "committed transactions %s order each other in a cycle: %s", strings.Join(scc, ", "), strings.Join(where, "; "))
	}
}

// cycles returns the strongly connected components of more than one
// node of the graph (Tarjan's algorithm), each sorted, in a stable order.
func cycles(edges map[string]map[string]tp) [][]string {
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var out [][]string
	n := 0
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = n, n
		n++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range sortedKeys(edges[v]) {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var scc []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			scc = append(scc, w)
			if w == v {
				break
			}
		}
		if len(scc) > 1 {
			slices.Sort(scc)
			out = append(out, scc)
		}
	}
	for _, v := range sortedKeys(edges) {
		if _, seen := index[v]; !seen {
			visit(v)
		}
	}
	return out
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
