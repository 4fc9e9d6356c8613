package broker

// KIP-951: a Produce (v10+) or Fetch (v16+) answered NOT_LEADER_OR_FOLLOWER
// (and, for Fetch, FENCED_LEADER_EPOCH) carries the partition's current
// leader and leader epoch as this broker knows them (the CurrentLeader
// tagged field), and the response lists that leader's endpoint (the
// NodeEndpoints tagged field, "Brokers" in kmsg), so a client moves to the
// new leader without a metadata round trip and its backoff. No hint is
// given while the leader is unknown, is this broker (fenced or between
// roles), or has no registered endpoint.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/cluster"
)

// leaderHint is the current leader of p for a KIP-951 answer.
type leaderHint struct {
	id, epoch int32
	endpoint  cluster.BrokerInfo
}

// leaderHintFor returns p's current leader as the controller published
// it, if there is one worth pointing a client to.
func (b *Broker) leaderHintFor(p *partition) (leaderHint, bool) {
	if p == nil {
		return leaderHint{}, false
	}
	v := p.State().View
	if v.Leader < 0 || v.Leader == b.cfg.NodeID {
		return leaderHint{}, false
	}
	bi, ok := b.brokerInfo(v.Leader)
	if !ok {
		return leaderHint{}, false
	}
	return leaderHint{id: v.Leader, epoch: v.LeaderEpoch, endpoint: bi}, true
}

// hintEndpoints collects the endpoints of the leaders named in hints, once
// each, in the order first named.
type hintEndpoints []cluster.BrokerInfo

func (e *hintEndpoints) add(bi cluster.BrokerInfo) {
	if !slices.ContainsFunc(*e, func(x cluster.BrokerInfo) bool { return x.ID == bi.ID }) {
		*e = append(*e, bi)
	}
}

func rackPtr(rack string) *string {
	if rack == "" {
		return nil
	}
	return &rack
}

func (e hintEndpoints) produceBrokers() []kmsg.ProduceResponseBroker {
	out := make([]kmsg.ProduceResponseBroker, 0, len(e))
	for _, bi := range e {
		pb := kmsg.NewProduceResponseBroker()
		pb.NodeID, pb.Host, pb.Port, pb.Rack = bi.ID, bi.Host, bi.Port, rackPtr(bi.Rack)
		out = append(out, pb)
	}
	return out
}

func (e hintEndpoints) fetchBrokers() []kmsg.FetchResponseBroker {
	out := make([]kmsg.FetchResponseBroker, 0, len(e))
	for _, bi := range e {
		fb := kmsg.NewFetchResponseBroker()
		fb.NodeID, fb.Host, fb.Port, fb.Rack = bi.ID, bi.Host, bi.Port, rackPtr(bi.Rack)
		out = append(out, fb)
	}
	return out
}
