package broker

import (
	"context"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/quota"
	"github.com/vltava/vltava/core/wire"
)

// Client quotas (core/quota). Produce bytes are counted after the
// handler, fetch bytes before the response is framed (its throttle time
// is encoded in it), and request time after every handler except the
// group joins, whose time is all waiting for other members. Replica
// fetches are never throttled (Kafka throttles replication with its own,
// separate, quotas).

func newQuotas(windows, sizeSeconds int32) *quota.Manager {
	return quota.New(quota.Config{Windows: int(windows), WindowSize: time.Duration(sizeSeconds) * time.Second})
}

// startQuotas follows the quotas in the metadata store until the broker
// stops.
func (b *Broker) startQuotas() {
	ctx, cancel := context.WithCancel(context.Background())
	b.wg.Add(2)
	go func() {
		defer b.wg.Done()
		b.quotas.Follow(ctx, b.store, b.logger)
	}()
	go func() {
		defer b.wg.Done()
		<-b.stopCh
		cancel()
	}()
}

// quotaUser is the user entity of a request: its principal's name
// (ANONYMOUS on plaintext listeners, as in Kafka).
func quotaUser(req *wire.Request) string {
	if req.Conn == nil || req.Conn.Principal.Name == "" {
		return "ANONYMOUS"
	}
	return req.Conn.Principal.Name
}

// throttler is what every kmsg response with a throttle time has.
type throttler interface {
	Throttle() (int32, bool)
	SetThrottle(int32)
}

// fetchThrottle records a consumer fetch's bytes and returns how long to
// throttle it; the fetch handler encodes it in the response (a zero-copy
// response can not be changed after framing) and mutes the connection.
func (b *Broker) fetchThrottle(req *wire.Request, r *kmsg.FetchRequest, ranges []wire.FileRange) time.Duration {
	if fetchReplicaID(r) >= 0 {
		return 0
	}
	var n int64
	for _, rg := range ranges {
		n += rg.Len
	}
	return b.quotas.Record(quota.ConsumerByteRate, quotaUser(req), req.ClientID, float64(n), time.Now())
}

// throttleAfter records what a served request counts against its quotas
// and sets the response's throttle time and the connection's mute.
func (b *Broker) throttleAfter(req *wire.Request, resp *wire.Response, took time.Duration) {
	now := time.Now()
	user := quotaUser(req)
	var d time.Duration
	if req.Key == 0 {
		d = b.quotas.Record(quota.ProducerByteRate, user, req.ClientID, float64(req.Size()), now)
	}
	if req.Key != 11 && req.Key != 14 && !(req.Key == 1 && isReplicaFetch(req)) {
		work := max(took-req.Parked, 0)
		d = max(d, b.quotas.Record(quota.RequestPercentage, user, req.ClientID, work.Seconds()*100, now))
	}
	if d <= 0 {
		return
	}
	if tr, ok := resp.Msg.(throttler); ok {
		if cur, _ := tr.Throttle(); int64(cur) < d.Milliseconds() {
			tr.SetThrottle(millis(d))
		}
	}
	resp.Throttle = max(resp.Throttle, d)
}

func isReplicaFetch(req *wire.Request) bool {
	f, ok := req.Body.(*kmsg.FetchRequest)
	return ok && fetchReplicaID(f) >= 0
}

func millis(d time.Duration) int32 {
	return int32(min(d.Milliseconds(), math.MaxInt32))
}
