package broker

// ListTransactions v0-v1 lists the transactional IDs this broker
// coordinates (KIP-664), loading every __transaction_state partition it
// leads first. Filters: states (Kafka's names; unknown ones are returned
// in UnknownStateFilters and match nothing), producer IDs, and from v1 a
// minimum running time in milliseconds (transactions whose current
// transaction started at least that long ago; -1 or 0: no filter). With
// an authorizer, only the IDs the principal may DESCRIBE are listed
// (checkListTransactions), as in Kafka.

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/txn"
	"github.com/vltava/vltava/core/wire"
)

var txnStateNames = []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

func handleListTransactions(b *Broker, _ context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.ListTransactionsRequest)
	resp := r.ResponseKind().(*kmsg.ListTransactionsResponse)
	var states []string
	for _, s := range r.StateFilters {
		if slices.Contains(txnStateNames, s) {
			states = append(states, s)
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, s)
		}
	}
	if len(r.StateFilters) > 0 && len(states) == 0 {
		return reply(resp) // only unknown states: nothing matches
	}
	h := b.txns
	now := time.Now().UnixMilli()
	h.mu.Lock()
	h.loadLedLocked()
	h.unloadLocked()
	var all []*txn.Txn
	for _, t := range h.txns {
		all = append(all, t)
	}
	h.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
	for _, t := range all {
		if len(states) > 0 && !slices.Contains(states, t.Status.String()) {
			continue
		}
		if len(r.ProducerIDFilters) > 0 && !slices.Contains(r.ProducerIDFilters, t.ProducerID) {
			continue
		}
		if r.Version >= 1 && r.DurationFilterMillis > 0 && (t.Status != txn.Ongoing || now-t.StartMs < r.DurationFilterMillis) {
			continue
		}
		ts := kmsg.NewListTransactionsResponseTransactionState()
		ts.TransactionalID, ts.ProducerID, ts.TransactionState = t.ID, t.ProducerID, t.Status.String()
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	return reply(resp)
}
