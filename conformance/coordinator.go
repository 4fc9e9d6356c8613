package conformance

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// coordRetry sends coordinator requests (group and transaction APIs) and
// retries, every 200ms until the context ends, while the answer is
// COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS or
// NOT_COORDINATOR: on a fresh cluster the coordinator is not ready until
// its internal topic has a leader and is loaded, and Kafka clients retry
// these errors, as the suite's hand-built requests must too.
type coordRetry struct{ r kmsg.Requestor }

func coord(r kmsg.Requestor) kmsg.Requestor { return coordRetry{r} }

func (c coordRetry) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	for {
		resp, err := c.r.Request(ctx, req)
		code := kerrCode(err) // kgo's own FindCoordinator failed
		if err == nil {
			code = coordinatorCode(resp)
		}
		if !coordinatorError(code) {
			return resp, err
		}
		select {
		case <-ctx.Done():
			return resp, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func coordinatorError(code int16) bool {
	switch code {
	case kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorLoadInProgress.Code, kerr.NotCoordinator.Code:
		return true
	}
	return false
}

// coordinatorCode is the first error code in a coordinator response.
func coordinatorCode(resp kmsg.Response) int16 {
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		return r.ErrorCode
	case *kmsg.SyncGroupResponse:
		return r.ErrorCode
	case *kmsg.HeartbeatResponse:
		return r.ErrorCode
	case *kmsg.LeaveGroupResponse:
		return r.ErrorCode
	case *kmsg.ConsumerGroupHeartbeatResponse:
		return r.ErrorCode
	case *kmsg.AddOffsetsToTxnResponse:
		return r.ErrorCode
	case *kmsg.OffsetFetchResponse:
		if r.ErrorCode != 0 {
			return r.ErrorCode
		}
		for _, g := range r.Groups {
			if g.ErrorCode != 0 {
				return g.ErrorCode
			}
		}
	case *kmsg.OffsetCommitResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return p.ErrorCode
				}
			}
		}
	case *kmsg.TxnOffsetCommitResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return p.ErrorCode
				}
			}
		}
	}
	return 0
}
