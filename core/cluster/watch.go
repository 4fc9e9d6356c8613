package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/vltava/vltava/plugins/sdk"
)

// listPrefixes are listed one by one (so unrelated keys are not read);
// the watch covers "/" and drops other keys. listed[i] is the revision
// of prefix i's listing: a watch event at or below it is already in the
// listing and is skipped, so the view never steps back.
var listPrefixes = []string{brokersPrefix, topicsPrefix, partitionsPrefix, controllerKey}

func prefixIndex(key string) int {
	for i, p := range listPrefixes {
		if strings.HasPrefix(key, p) {
			return i
		}
	}
	return -1
}

// load lists the cluster keys into a fresh view. old supplies the
// registration revisions of brokers that kept their incarnation.
func (n *Node) load(ctx context.Context, old *view) (*view, []int64, error) {
	v := newView()
	listed := make([]int64, len(listPrefixes))
	for i, prefix := range listPrefixes {
		resp, err := n.store.List(ctx, &sdk.ListRequest{Prefix: prefix})
		if err != nil {
			return nil, nil, fmt.Errorf("cluster: list %s: %w", prefix, err)
		}
		listed[i] = resp.Revision
		v.rev = max(v.rev, resp.Revision)
		for i := range resp.KVs {
			kv := &resp.KVs[i]
			if kv.Key == controllerEpochKey {
				continue
			}
			ev := &sdk.WatchEvent{Type: sdk.EventPut, Key: kv.Key, Value: kv.Value, Version: kv.Version, Session: kv.Session, Revision: kv.Version}
			if err := v.applyEvent(ev, &change{}); err != nil {
				n.log.Error("cluster: ignoring an undecodable key", "key", kv.Key, "err", err)
			}
		}
	}
	for id, b := range v.brokers {
		if ob, ok := old.brokers[id]; ok && ob.info.Incarnation == b.info.Incarnation && ob.registered <= b.version {
			b.registered = ob.registered
			v.brokers[id] = b
		}
	}
	return v, listed, nil
}

// resync replaces the view with a fresh listing and tells the Applier
// what changed. It returns the revision to watch from.
func (n *Node) resync(ctx context.Context) ([]int64, error) {
	n.mu.Lock()
	old := n.view
	n.mu.Unlock()
	v, listed, err := n.load(ctx, old)
	if err != nil {
		return nil, err
	}
	c := diff(old, v)
	n.publish(v, c)
	return listed, nil
}

// publish installs a new view, wakes the waiters, and tells the Applier.
func (n *Node) publish(v *view, c change) {
	n.mu.Lock()
	n.view = v
	n.signalLocked()
	n.mu.Unlock()
	n.deliver(v, c)
}

// deliver makes the Applier calls for c against v, serialized with
// every other Applier call.
func (n *Node) deliver(v *view, c change) {
	if n.apply == nil {
		return
	}
	n.applyMu.Lock()
	defer n.applyMu.Unlock()
	if c.brokers {
		n.apply.ApplyBrokers(v.liveBrokers())
	}
	for _, name := range c.deletedTopics {
		n.apply.ApplyTopicDeleted(name)
	}
	if ta, ok := n.apply.(TopicApplier); ok {
		for _, name := range slices.Sorted(maps.Keys(c.topics)) {
			if t, ok := v.topics[name]; ok {
				ta.ApplyTopic(t.clone())
			}
		}
	}
	n.mu.Lock()
	withhold := n.withhold
	n.mu.Unlock()
	tps := make([]TopicPartition, 0, len(c.partitions))
	for tp := range c.partitions {
		if withhold && v.parts[tp].Leader == n.cfg.NodeID {
			continue // setWithhold(false) re-applies every partition
		}
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, comparePartitions)
	n.applyPartitionsLocked(v, tps)
}

// applyPartitionsLocked makes the ApplyPartition calls for tps against
// v. REQUIRES n.applyMu.
func (n *Node) applyPartitionsLocked(v *view, tps []TopicPartition) {
	for _, tp := range tps {
		t, ok := v.topics[tp.Topic]
		st, has := v.parts[tp]
		if !ok || !has || tp.Partition >= t.Partitions {
			continue // the other half of the write has not arrived yet
		}
		n.apply.ApplyPartition(tp.Topic, tp.Partition, st.Clone(), slices.Clone(t.Assignment(tp.Partition)))
	}
}

// watchLoop keeps the view current: watch from the listing, and on any
// stream end (store restart, compaction, overflow) list again.
func (n *Node) watchLoop(ctx context.Context, listed []int64) {
	defer n.wg.Done()
	backoff := newBackoff()
	for {
		err := n.watchFrom(ctx, listed)
		if ctx.Err() != nil {
			return
		}
		n.log.Warn("cluster: metadata watch ended; listing again", "err", err)
		for {
			if !backoff.wait(ctx) {
				return
			}
			if listed, err = n.resync(ctx); err == nil {
				backoff.reset()
				break
			}
			if ctx.Err() != nil {
				return
			}
			n.log.Warn("cluster: list metadata", "err", err)
		}
	}
}

// recvResult is one Recv outcome handed from the pump to the loop.
type recvResult struct {
	ev  *sdk.WatchEvent
	err error
}

// watchFrom runs one watch stream until it fails. A pump goroutine
// (owned here: the stream is closed and the pump waited for on return)
// receives, so that events of one revision can be applied together.
func (n *Node) watchFrom(ctx context.Context, listed []int64) error {
	from := slices.Min(listed)
	stream, err := n.store.Watch(ctx, &sdk.WatchRequest{Prefix: "/", FromRevision: from})
	if err != nil {
		return err
	}
	ch := make(chan recvResult, 256)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			ev, err := stream.Recv()
			select {
			case ch <- recvResult{ev, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		stream.Close()
		<-done
	}()
	check := time.NewTicker(n.cfg.SessionTTL / 3)
	defer check.Stop()
	var live watchLiveness
	var pending *recvResult
	for {
		var first recvResult
		if pending != nil {
			first, pending = *pending, nil
		} else {
			select {
			case first = <-ch:
			case <-check.C:
				if err := n.checkWatch(ctx, &live); err != nil {
					return err
				}
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		live.progress = true
		if first.err != nil {
			return first.err
		}
		batch := []*sdk.WatchEvent{first.ev}
	drain:
		for {
			select {
			case r := <-ch:
				if r.err != nil || r.ev.Revision != first.ev.Revision {
					pending = &r
					break drain
				}
				batch = append(batch, r.ev)
			default:
				break drain
			}
		}
		n.applyBatch(batch, listed)
	}
}

// watchLiveness is what checkWatch remembers between checks.
type watchLiveness struct {
	want     int64 // the store's revision at the previous check (0: unknown)
	progress bool  // an event arrived since the previous check
	strikes  int   // consecutive checks that found the view behind want with no event
}

// checkWatch gives the watch its own liveness: a stream can stall
// without failing (a store whose node stopped receiving the log, a
// connection whose packets are dropped). Every check reads the store's
// current revision; when two checks in a row find the view still short of
// the revision read at the check before and no event arrived in between,
// the stream is declared stalled and the watcher lists again. (One such
// check is not enough: a process resumed after a pause runs a check
// before its stream has delivered what queued up meanwhile.)
func (n *Node) checkWatch(ctx context.Context, l *watchLiveness) error {
	if rev := n.snapshot().rev; l.want > 0 && rev < l.want && !l.progress {
		l.strikes++
		if l.strikes >= 2 {
			return fmt.Errorf("cluster: metadata watch stalled: the view is at revision %d, the store was at %d", rev, l.want)
		}
	} else {
		l.strikes = 0
	}
	l.progress = false
	rctx, cancel := context.WithTimeout(ctx, n.cfg.SessionTTL/3)
	defer cancel()
	rev, err := n.storeRevision(rctx)
	if err != nil {
		l.want = 0
		return nil
	}
	l.want = rev
	return nil
}

// storeRevision reads the store's current revision linearizably, without
// writing: a listing of the one key /controller-epoch.
func (n *Node) storeRevision(ctx context.Context) (int64, error) {
	resp, err := n.store.List(ctx, &sdk.ListRequest{Prefix: controllerEpochKey})
	if err != nil {
		return 0, err
	}
	return resp.Revision, nil
}

// applyBatch folds the events of one revision into a copy of the view.
func (n *Node) applyBatch(batch []*sdk.WatchEvent, listed []int64) {
	n.mu.Lock()
	v := n.view.clone()
	n.mu.Unlock()
	var c change
	self := suspectKey(n.cfg.NodeID)
	for _, ev := range batch {
		if ev.Key == self {
			n.noteSuspicion(ev)
		}
		i := prefixIndex(ev.Key)
		if i < 0 || ev.Key == controllerEpochKey || ev.Revision <= listed[i] {
			v.rev = max(v.rev, ev.Revision)
			continue
		}
		if err := v.applyEvent(ev, &c); err != nil {
			n.log.Error("cluster: ignoring an undecodable key", "key", ev.Key, "err", err)
		}
	}
	n.publish(v, c)
}

// backoff doubles a wait from 50ms to 2s.
type backoff struct{ d time.Duration }

func newBackoff() *backoff { return &backoff{d: 50 * time.Millisecond} }

func (b *backoff) reset() { b.d = 50 * time.Millisecond }

// wait sleeps the current delay and doubles it; false if ctx ended.
func (b *backoff) wait(ctx context.Context) bool {
	t := time.NewTimer(b.d)
	defer t.Stop()
	b.d = min(2*b.d, 2*time.Second)
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// retryable reports whether a store error is worth retrying.
func retryable(err error) bool {
	return errors.Is(err, sdk.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}
