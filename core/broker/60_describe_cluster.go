package broker

// DescribeCluster v0-v1 (KIP-700). v1 adds the endpoint type; we are a
// broker endpoint (1) and refuse controller-endpoint requests.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vltava/vltava/core/wire"
)

func handleDescribeCluster(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.DescribeClusterRequest)
	resp := r.ResponseKind().(*kmsg.DescribeClusterResponse)
	if r.Version >= 1 {
		resp.EndpointType = 1
		if r.EndpointType != 1 {
			resp.ErrorCode = kerr.MismatchedEndpointType.Code
			return reply(resp)
		}
	}
	host, port := b.advertised()
	for _, e := range b.endpoints() {
		if req.Conn != nil && e.Name == req.Conn.Listener {
			host, port = e.Host, e.Port
		}
	}
	br := kmsg.NewDescribeClusterResponseBroker()
	br.NodeID, br.Host, br.Port = b.cfg.NodeID, host, port
	if b.cfg.BrokerRack != "" {
		br.Rack = &b.cfg.BrokerRack
	}
	resp.Brokers = []kmsg.DescribeClusterResponseBroker{br}
	resp.ClusterID = b.clusterID
	resp.ControllerID = b.cfg.NodeID
	resp.ClusterAuthorizedOperations = authorizedOpsUnset
	return reply(resp)
}
