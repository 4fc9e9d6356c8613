package broker

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/log"
	part "github.com/vltava/vltava/core/partition"
	"github.com/vltava/vltava/core/txn"
)

// Transaction checks of produce requests (KIP-890 part 1, issue 11).
//
// A transactional batch is appended only if its producer's transaction
// is ongoing with the partition added. With the coordinator on this
// broker the check reads its state (txnHost.verify) under the log's
// append lock. With the coordinator elsewhere, a batch of a producer that
// already has its transaction open on the partition (at the same epoch)
// is accepted: the coordinator knew of the partition when the first batch
// was checked, and its marker will close the transaction. For the first
// batch the leader takes a verification guard on the log, asks the
// coordinator (AddPartitionsToTxn v4 with VerifyOnly, as Kafka's leaders
// do; DescribeTransactions with a coordinator that does not serve v4),
// and appends only if the coordinator said yes and no marker of the
// producer was appended meanwhile (the guard survives), as Kafka's
// verification guard does.

// peers caches one franz-go client per other broker, for markers and
// checks; closed when the broker stops (txnHost.run).
type peers struct {
	mu      sync.Mutex
	clients map[int32]peerClient
}

type peerClient struct {
	addr string
	cl   *kgo.Client
}

// peer returns a client connection pinned to broker id, nil if the broker
// is unknown. It speaks the inter-broker listener's security.
func (h *txnHost) peer(id int32) *kgo.Broker {
	bi, ok := h.b.brokerInfo(id)
	if !ok {
		return nil
	}
	select {
	case <-h.b.stopCh:
		return nil // closePeers ran or is about to
	default:
	}
	h.peers.mu.Lock()
	defer h.peers.mu.Unlock()
	if h.peers.clients == nil {
		h.peers.clients = map[int32]peerClient{}
	}
	pc := h.peers.clients[id]
	addr := bi.Host + ":" + strconv.Itoa(int(bi.Port))
	if pc.cl != nil && pc.addr != addr {
		pc.cl.Close() // the broker moved to another address
		pc.cl = nil
	}
	if pc.cl == nil {
		// The inter-broker listener's security (TLS, SASL), as the replica
		// fetchers use it.
		ib, err := h.b.interBrokerOpts()
		if err != nil {
			h.b.logger.Warn("broker: transaction client to another broker", "broker", id, "err", err)
			return nil
		}
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID("vltava-txn-coordinator")}, ib...)...)
		if err != nil {
			return nil
		}
		pc = peerClient{addr: addr, cl: cl}
		h.peers.clients[id] = pc
	}
	seeds := pc.cl.SeedBrokers()
	if len(seeds) != 1 {
		return nil
	}
	return seeds[0]
}

func (h *txnHost) closePeers() {
	h.peers.mu.Lock()
	defer h.peers.mu.Unlock()
	for id, pc := range h.peers.clients {
		pc.cl.Close()
		delete(h.peers.clients, id)
	}
}

// coordinatorElsewhere returns the broker that coordinates id when it is
// not this one (-1 when this broker does or no leader is known).
func (h *txnHost) coordinatorElsewhere(id string) int32 {
	p, _, ok := h.partitionOf(id)
	if !ok {
		return -1
	}
	st := p.State()
	if st.Role == part.Leader || st.View.Leader == h.b.cfg.NodeID {
		return -1
	}
	return st.View.Leader
}

// produceCheck returns the check to run under the log's append lock for a
// transactional batch of producer pid at epoch for p (tp), doing the
// coordinator round trip first when another broker coordinates id. A
// non-nil error refuses the batch now.
func (h *txnHost) produceCheck(id *string, pid int64, epoch int16, p *partition, tp txn.TP) (func() error, error) {
	refuse := func(err error) error {
		return fmt.Errorf("transactional batch from producer %d epoch %d: not in an ongoing transaction with this partition: %w", pid, epoch, err)
	}
	if id == nil {
		return nil, refuse(kerr.InvalidTxnState)
	}
	coord := h.coordinatorElsewhere(*id)
	if coord < 0 {
		return func() error {
			if err := h.verify(id, pid, epoch, tp); err != nil {
				return refuse(err)
			}
			return nil
		}, nil
	}
	var g *log.VerificationGuard
	if !p.log.OpenTxn(pid, epoch) {
		g = p.log.BeginVerification(pid)
		if err := h.verifyRemote(coord, *id, pid, epoch, tp); err != nil {
			return nil, refuse(err)
		}
	}
	return func() error {
		if p.log.OpenTxnLocked(pid, epoch) || p.log.VerifiedLocked(pid, g) {
			return nil
		}
		return refuse(kerr.InvalidTxnState)
	}, nil
}

// verifyRemote asks coordinator broker coord whether id's ongoing
// transaction is producer pid's at epoch and includes tp: AddPartitionsToTxn
// v4 with VerifyOnly. A failed round trip is NOT_ENOUGH_REPLICAS
// (retriable: the client sends again).
func (h *txnHost) verifyRemote(coord int32, id string, pid int64, epoch int16, tp txn.TP) error {
	br := h.peer(coord)
	if br == nil {
		return fmt.Errorf("transaction coordinator %d unknown: %w", coord, kerr.NotEnoughReplicas)
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	t := kmsg.NewAddPartitionsToTxnRequestTransaction()
	t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.VerifyOnly = id, pid, epoch, true
	t.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: tp.Topic, Partitions: []int32{tp.Partition}}}
	req.Transactions = append(req.Transactions, t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, br)
	if err != nil {
		return fmt.Errorf("asking transaction coordinator %d: %v: %w", coord, err, kerr.NotEnoughReplicas)
	}
	if resp.Version < 4 {
		// The coordinator does not serve v4: the request went without
		// its transaction (harmlessly refused); ask the old way.
		return h.verifyRemoteDescribe(br, coord, id, pid, epoch, tp)
	}
	if resp.ErrorCode != 0 {
		return fmt.Errorf("transaction coordinator %d: %v: %w", coord, kerr.ErrorForCode(resp.ErrorCode), kerr.NotEnoughReplicas)
	}
	for _, rt := range resp.Transactions {
		for _, st := range rt.Topics {
			for _, sp := range st.Partitions {
				if rt.TransactionalID != id || st.Topic != tp.Topic || sp.Partition != tp.Partition {
					continue
				}
				switch sp.ErrorCode {
				case 0:
					return nil
				case kerr.InvalidTxnState.Code, kerr.InvalidProducerIDMapping.Code:
					return kerr.InvalidTxnState
				case kerr.ProducerFenced.Code, kerr.InvalidProducerEpoch.Code:
					return kerr.InvalidProducerEpoch
				default: // not the coordinator (any more), loading, ...
					return fmt.Errorf("transaction coordinator %d: %v: %w", coord, kerr.ErrorForCode(sp.ErrorCode), kerr.NotEnoughReplicas)
				}
			}
		}
	}
	return fmt.Errorf("transaction coordinator %d did not answer for %s/%d: %w", coord, tp.Topic, tp.Partition, kerr.NotEnoughReplicas)
}

// verifyRemoteDescribe is verifyRemote through DescribeTransactions.
func (h *txnHost) verifyRemoteDescribe(br *kgo.Broker, coord int32, id string, pid int64, epoch int16, tp txn.TP) error {
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, br)
	if err != nil || len(resp.TransactionStates) != 1 {
		return fmt.Errorf("asking transaction coordinator %d: %v: %w", coord, err, kerr.NotEnoughReplicas)
	}
	s := resp.TransactionStates[0]
	switch s.ErrorCode {
	case 0:
	case kerr.TransactionalIDNotFound.Code:
		return kerr.InvalidTxnState
	default:
		return fmt.Errorf("transaction coordinator %d: %v: %w", coord, kerr.ErrorForCode(s.ErrorCode), kerr.NotEnoughReplicas)
	}
	if s.State != txn.Ongoing.String() || s.ProducerID != pid {
		return kerr.InvalidTxnState
	}
	if s.ProducerEpoch != epoch {
		return kerr.InvalidProducerEpoch
	}
	for _, t := range s.Topics {
		if t.Topic != tp.Topic {
			continue
		}
		for _, q := range t.Partitions {
			if q == tp.Partition {
				return nil
			}
		}
	}
	return kerr.InvalidTxnState
}
