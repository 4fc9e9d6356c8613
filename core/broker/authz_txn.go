package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"slices"

	"github.com/vltava/vltava/core/wire"
)

// The transaction APIs' rows of authzTable (Kafka's table: WRITE on the
// transactional ID, plus WRITE on each topic for AddPartitionsToTxn and
// READ on the group and each topic for AddOffsetsToTxn/TxnOffsetCommit).
// A row for an API the broker does not serve yet is inert: Handle only
// consults rows of served APIs.

func checkAddPartitionsToTxn(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
	r := req.Body.(*kmsg.AddPartitionsToTxnRequest)
	if r.Version >= 4 {
		// Batched, broker to broker (KIP-890): the cluster's action.
		if b.clusterAllowed(w, opClusterAction) {
			return nil, nil
		}
		return denyWhole(r, errClusterAuthz), nil
	}
	txnOK := b.allowed(w, rtTxnID, r.TransactionalID, opWrite)
	allTopics := true
	for i := range r.Topics {
		if !b.allowed(w, rtTopic, r.Topics[i].Topic, opWrite) {
			allTopics = false
		}
	}
	if txnOK && allTopics {
		return nil, nil
	}
	// Kafka attempts none of it: refused partitions get their error, the
	// others OPERATION_NOT_ATTEMPTED.
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for _, t := range r.Topics {
		code := errTxnAuthz
		if txnOK {
			code = kerr.OperationNotAttempted.Code
			if !b.allowed(w, rtTopic, t.Topic, opWrite) {
				code = errTopicAuthz
			}
		}
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func checkAddOffsetsToTxn(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
	r := req.Body.(*kmsg.AddOffsetsToTxnRequest)
	if !b.allowed(w, rtTxnID, r.TransactionalID, opWrite) {
		return denyWhole(r, errTxnAuthz), nil
	}
	if !b.allowed(w, rtGroup, r.Group, opRead) {
		return denyWhole(r, errGroupAuthz), nil
	}
	return nil, nil
}

func checkEndTxn(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
	r := req.Body.(*kmsg.EndTxnRequest)
	if !b.allowed(w, rtTxnID, r.TransactionalID, opWrite) {
		return denyWhole(r, errTxnAuthz), nil
	}
	return nil, nil
}

func checkTxnOffsetCommit(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
	r := req.Body.(*kmsg.TxnOffsetCommitRequest)
	keep, code := func(string) bool { return false }, errTxnAuthz
	switch {
	case !b.allowed(w, rtTxnID, r.TransactionalID, opWrite):
	case !b.allowed(w, rtGroup, r.Group, opRead):
		code = errGroupAuthz
	default:
		keep, code = func(name string) bool { return b.allowed(w, rtTopic, name, opRead) }, errTopicAuthz
	}
	var refused []kmsg.TxnOffsetCommitRequestTopic
	r.Topics, refused = splitSlice(r.Topics, func(t *kmsg.TxnOffsetCommitRequestTopic) bool {
		name := t.Topic
		if r.Version >= 6 {
			if name = b.topicIDName(t.TopicID); name == "" && code == errTopicAuthz {
				return true // unknown ID: the handler answers it
			}
		}
		return keep(name)
	})
	if refused == nil {
		return nil, nil
	}
	merge := func(m kmsg.Response) {
		resp := m.(*kmsg.TxnOffsetCommitResponse)
		for _, t := range refused {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if code != errTopicAuthz {
		resp := r.ResponseKind()
		merge(resp)
		return resp, nil
	}
	return nil, merge
}

// checkListTransactions refuses nothing: the answer lists only the
// transactional IDs the principal may DESCRIBE (Kafka's rule, KIP-664).
func checkListTransactions(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
	return nil, func(m kmsg.Response) {
		r := m.(*kmsg.ListTransactionsResponse)
		r.TransactionStates = slices.DeleteFunc(r.TransactionStates, func(s kmsg.ListTransactionsResponseTransactionState) bool {
			return !b.allowed(w, rtTxnID, s.TransactionalID, opDescribe)
		})
	}
}
