package broker

import (
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// initProducerID asks for a non-transactional producer ID.
func initProducerID(t *testing.T, cl *kgo.Client) int64 {
	t.Helper()
	resp := request[*kmsg.InitProducerIDResponse](t, cl, kmsg.NewPtrInitProducerIDRequest())
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("init producer id: %v", err)
	}
	if resp.ProducerID < 0 || resp.ProducerEpoch != 0 {
		t.Fatalf("init producer id: id %d epoch %d", resp.ProducerID, resp.ProducerEpoch)
	}
	return resp.ProducerID
}

func TestInitProducerIDUniqueAcrossRestart(t *testing.T) {
	b := testBroker(t)
	cfg := b.cfg
	seen := map[int64]bool{}
	take := func(b *Broker, n int) {
		cl := testClient(t, b)
		for range n {
			id := initProducerID(t, cl)
			if seen[id] {
				t.Fatalf("producer ID %d handed out twice", id)
			}
			seen[id] = true
		}
	}
	take(b, producerIDBlock+5) // crosses a block boundary
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	take(startBroker(t, cfg), 10)
}

func TestInitProducerIDRefusals(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b)
	txn, empty := "txn", ""
	for _, c := range []struct {
		name string
		edit func(*kmsg.InitProducerIDRequest)
		want *kerr.Error
	}{
		{"timeout above transaction.max.timeout.ms", func(r *kmsg.InitProducerIDRequest) {
			r.TransactionalID, r.TransactionTimeoutMillis = &txn, 1<<30
		}, kerr.InvalidTransactionTimeout},
		{"empty transactional id", func(r *kmsg.InitProducerIDRequest) { r.TransactionalID = &empty }, kerr.InvalidRequest},
		{"epoch without id", func(r *kmsg.InitProducerIDRequest) { r.ProducerEpoch = 3 }, kerr.InvalidRequest},
	} {
		req := kmsg.NewPtrInitProducerIDRequest()
		c.edit(req)
		if resp := request[*kmsg.InitProducerIDResponse](t, cl, req); resp.ErrorCode != c.want.Code {
			t.Errorf("%s: %v, want %v", c.name, kerr.ErrorForCode(resp.ErrorCode), c.want)
		}
	}
	// KIP-360 bump of an idempotent producer: a fresh ID.
	first := initProducerID(t, cl)
	req := kmsg.NewPtrInitProducerIDRequest()
	req.ProducerID, req.ProducerEpoch = first, 0
	resp := request[*kmsg.InitProducerIDResponse](t, cl, req)
	if resp.ErrorCode != 0 || resp.ProducerID == first {
		t.Fatalf("bump: %v, id %d (was %d); want a new ID", kerr.ErrorForCode(resp.ErrorCode), resp.ProducerID, first)
	}
}

// TestInitProducerIDConcurrentUnique: clients asking at once, across
// block boundaries (one reserves while the others wait for its block),
// never get the same producer ID.
func TestInitProducerIDConcurrentUnique(t *testing.T) {
	b := testBroker(t)
	const clients, each = 6, producerIDBlock / 2
	ids := make(chan int64, clients*each)
	var wg sync.WaitGroup
	for range clients {
		cl := testClient(t, b)
		wg.Go(func() {
			for range each {
				resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(t.Context(), cl)
				if err != nil {
					t.Errorf("init producer id: %v", err)
					return
				}
				if resp.ErrorCode != 0 {
					t.Errorf("init producer id: %v", kerr.ErrorForCode(resp.ErrorCode))
					return
				}
				ids <- resp.ProducerID
			}
		})
	}
	wg.Wait()
	close(ids)
	seen := map[int64]bool{}
	for id := range ids {
		if seen[id] {
			t.Fatalf("producer ID %d handed out twice", id)
		}
		seen[id] = true
	}
	if len(seen) != clients*each {
		t.Fatalf("%d producer IDs, want %d", len(seen), clients*each)
	}
}
