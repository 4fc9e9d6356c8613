package replica

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Request versions the kgo client pins: Fetch v12 is the newest that names
// topics (v13 switched to topic IDs) and the first with LastFetchedEpoch
// and DivergingEpoch (KIP-320's follower side).
const (
	fetchVersion = 12
)

// KgoDialer returns a Dialer whose clients are franz-go kgo.Clients, one
// per source broker, seeded with its address only and sending every
// request straight to it. opts are added to the client options (TLS,
// SASL, timeouts).
func KgoDialer(clientID string, opts ...kgo.Opt) Dialer {
	return func(leader BrokerAddr) (FetchClient, error) {
		maxV := kversion.Stable()
		maxV.SetMaxKeyVersion(kmsg.Fetch.Int16(), fetchVersion)
		all := append([]kgo.Opt{
			kgo.SeedBrokers(leader.Addr),
			kgo.ClientID(clientID),
			kgo.MaxVersions(maxV),
		}, opts...)
		cl, err := kgo.NewClient(all...)
		if err != nil {
			return nil, fmt.Errorf("replica: client for broker %d at %s: %w", leader.ID, leader.Addr, err)
		}
		seeds := cl.SeedBrokers()
		if len(seeds) != 1 {
			cl.Close()
			return nil, fmt.Errorf("replica: client for broker %d: %d seed brokers", leader.ID, len(seeds))
		}
		return &kgoClient{cl: cl, b: seeds[0]}, nil
	}
}

// kgoClient is a FetchClient over one kgo.Client pinned to its seed.
type kgoClient struct {
	cl *kgo.Client
	b  *kgo.Broker
}

func (c *kgoClient) Fetch(ctx context.Context, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	resp, err := c.b.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	r, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return nil, fmt.Errorf("replica: fetch answered with %T", resp)
	}
	if r.Version < fetchVersion {
		return nil, fmt.Errorf("replica: source broker answered Fetch v%d, need v%d", r.Version, fetchVersion)
	}
	return r, nil
}

func (c *kgoClient) OffsetForLeaderEpoch(ctx context.Context, req *kmsg.OffsetForLeaderEpochRequest) (*kmsg.OffsetForLeaderEpochResponse, error) {
	resp, err := c.b.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	r, ok := resp.(*kmsg.OffsetForLeaderEpochResponse)
	if !ok {
		return nil, fmt.Errorf("replica: offset for leader epoch answered with %T", resp)
	}
	return r, nil
}

func (c *kgoClient) ListOffsets(ctx context.Context, req *kmsg.ListOffsetsRequest) (*kmsg.ListOffsetsResponse, error) {
	resp, err := c.b.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	r, ok := resp.(*kmsg.ListOffsetsResponse)
	if !ok {
		return nil, fmt.Errorf("replica: list offsets answered with %T", resp)
	}
	return r, nil
}

func (c *kgoClient) Close() { c.cl.Close() }
