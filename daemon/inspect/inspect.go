// Package inspect reads a broker's cluster through the broker's own Kafka
// listener, as any Kafka client would: brokers, topics, partitions and
// their offsets, configs, consumer groups and their lag, and records. The
// metrics endpoint (group lag) and the web console both read through it,
// so a figure means the same in both and matches what the Kafka API
// reports to everyone else.
//
// An Inspector holds one franz-go client, made on first use and closed by
// Close; every call takes a context that bounds it.
package inspect

import (
	"context"
	"errors"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Inspector reads the cluster through one broker's listener.
type Inspector struct {
	addr   func() string // the broker's listener; "" while it is not listening
	nodeID int32
	opts   []kgo.Opt

	mu sync.Mutex
	cl *kgo.Client
}

// New returns an inspector of the broker listening at addr() with node
// id nodeID. opts are extra client options (SASL credentials, say).
func New(addr func() string, nodeID int32, opts ...kgo.Opt) *Inspector {
	return &Inspector{addr: addr, nodeID: nodeID, opts: opts}
}

// NodeID is the inspected broker's node id.
func (in *Inspector) NodeID() int32 { return in.nodeID }

// Software names the inspector's clients to the broker (KIP-511), so the
// compatibility report tells the console's own connections apart.
var Software = kgo.SoftwareNameAndVersion("vltava-console", "1")

// ErrNotListening: the broker has not bound its listener yet.
var ErrNotListening = errors.New("inspect: the broker is not listening yet")

// Client returns the shared client.
func (in *Inspector) Client() (*kgo.Client, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.cl != nil {
		return in.cl, nil
	}
	addr := in.addr()
	if addr == "" {
		return nil, ErrNotListening
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID("vltava-inspect"), Software}, in.opts...)...)
	if err != nil {
		return nil, err
	}
	in.cl = cl
	return cl, nil
}

// Admin returns an admin client over the shared client.
func (in *Inspector) Admin() (*kadm.Client, error) {
	cl, err := in.Client()
	if err != nil {
		return nil, err
	}
	return kadm.NewClient(cl), nil
}

// Close closes the shared client.
func (in *Inspector) Close() {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.cl != nil {
		in.cl.Close()
		in.cl = nil
	}
}

// CoordinatedLag returns the lag of every consumer group this broker
// coordinates (kadm's Lag: committed offsets against the partitions' end
// offsets, the computation `vltava group describe` shows). A cluster-wide
// view sums the brokers' answers, each group counted once.
func (in *Inspector) CoordinatedLag(ctx context.Context) ([]kadm.DescribedGroupLag, error) {
	adm, err := in.Admin()
	if err != nil {
		return nil, err
	}
	lags, err := adm.Lag(ctx)
	if err != nil {
		return nil, err
	}
	var out []kadm.DescribedGroupLag
	for _, l := range lags.Sorted() {
		if l.Coordinator.NodeID == in.nodeID && l.Error() == nil {
			out = append(out, l)
		}
	}
	return out, nil
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }
