package wire

import (
	"context"
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// answerAll answers produce and metadata requests at once, except a
// metadata request from client "slow", which waits for release.
func answerAll(release <-chan struct{}, started chan<- int32) Handler {
	return handlerFunc(func(ctx context.Context, req *Request) (*Response, error) {
		if started != nil {
			started <- req.CorrelationID
		}
		switch body := req.Body.(type) {
		case *kmsg.ProduceRequest:
			return &Response{Msg: body.ResponseKind()}, nil
		case *kmsg.MetadataRequest:
			if req.ClientID == "slow" {
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return &Response{Msg: body.ResponseKind()}, nil
		}
		return nil, nil
	})
}

// A lone produce is answered by the reader itself; a metadata request is
// not.
func TestReaderAnswersLoneProduce(t *testing.T) {
	s, addr, _ := startServer(t, Config{}, answerAll(nil, nil))
	c := dial(t, addr)
	for i := range 3 {
		c.Write(produceFrame(1<<10, int32(i)))
		if corr := binary.BigEndian.Uint32(readResponse(t, c)); corr != uint32(i) {
			t.Fatalf("response %d to request %d", corr, i)
		}
	}
	c.Write(frame(metadataRequest(1), 9, "m"))
	readResponse(t, c)
	if st := s.Stats(); st.Requests != 4 || st.InlineRequests != 3 {
		t.Fatalf("%d requests, %d answered by the reader; want 4 and 3", st.Requests, st.InlineRequests)
	}
}

// A produce that arrives while a metadata request is being answered waits
// for it, and responses leave in request order whichever goroutine
// answers them.
func TestOrderAcrossReaderAndProcessor(t *testing.T) {
	release, started := make(chan struct{}), make(chan int32, 8)
	s, addr, _ := startServer(t, Config{}, answerAll(release, started))
	c := dial(t, addr)
	c.Write(frame(metadataRequest(1), 1, "slow"))
	if id := <-started; id != 1 {
		t.Fatalf("request %d started first", id)
	}
	c.Write(append(produceFrame(1<<10, 2), frame(metadataRequest(1), 3, "m")...))
	waitStats(t, s, "reading the produce behind the slow request", func(st Stats) bool { return st.RequestBytes > 0 })
	select {
	case id := <-started:
		t.Fatalf("request %d started while request 1 was being answered", id)
	default:
	}
	close(release)
	var got []uint32
	for range 3 {
		got = append(got, binary.BigEndian.Uint32(readResponse(t, c)))
	}
	if want := []uint32{1, 2, 3}; !slices.Equal(got, want) {
		t.Fatalf("responses %v, want %v", got, want)
	}
	if st := s.Stats(); st.InlineRequests != 0 {
		t.Fatalf("%d requests answered by the reader behind a queued one", st.InlineRequests)
	}
	// The processor lowers inflight just after writing response 3, so a
	// produce sent the moment it arrives can still find it in flight and
	// go to the processor; one sent a little later is the reader's.
	for i := int32(4); s.Stats().InlineRequests == 0; i++ {
		if i == 24 {
			t.Fatal("no lone produce after them was answered by the reader")
		}
		time.Sleep(10 * time.Millisecond)
		c.Write(produceFrame(1<<10, i))
		readResponse(t, c)
	}
}

// A client that pipelines produce requests keeps the read-ahead: the
// second request is read while the first is being answered.
func TestPipelinedProduceReadsAhead(t *testing.T) {
	release, started := make(chan struct{}), make(chan int32, 8)
	h := holdProduce(release, started, 1)
	s, addr, _ := startServer(t, Config{}, h)
	c := dial(t, addr)
	one, two := produceFrame(1<<10, 1), produceFrame(1<<10, 2)
	c.Write(append(one, two...)) // one segment: both arrive together
	<-started
	charge := int64(payloadCap(len(one) - 4))
	waitStats(t, s, "reading the second request while the first is answered", func(st Stats) bool {
		return st.RequestBytes == 2*charge
	})
	close(release)
	for want := uint32(1); want <= 2; want++ {
		if corr := binary.BigEndian.Uint32(readResponse(t, c)); corr != want {
			t.Fatalf("response %d, want %d", corr, want)
		}
	}
	if st := s.Stats(); st.InlineRequests != 0 {
		t.Fatalf("%d pipelined requests answered by the reader", st.InlineRequests)
	}
}

// A client that closes while the reader answers its produce leaves
// nothing behind once the handler returns: the response write fails, the
// connection closes and its request memory is returned.
func TestReaderAnswerOutlivesClient(t *testing.T) {
	release, started := make(chan struct{}), make(chan int32, 1)
	h := holdProduce(release, started, 1)
	s, addr, _ := startServer(t, Config{}, h)
	c := dial(t, addr)
	c.Write(produceFrame(100<<10, 1))
	<-started
	waitStats(t, s, "answering the produce in the reader", func(st Stats) bool { return st.InlineRequests == 1 })
	c.Close()
	close(release)
	waitStats(t, s, "closing the connection and returning its memory", func(st Stats) bool {
		return st.Conns == 0 && st.RequestBytes == 0
	})
}

// holdProduce answers produce requests, the one with correlation ID hold
// only once release is closed; it reports each request's ID on started.
func holdProduce(release <-chan struct{}, started chan<- int32, hold int32) Handler {
	return handlerFunc(func(ctx context.Context, req *Request) (*Response, error) {
		started <- req.CorrelationID
		if req.CorrelationID == hold {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return &Response{Msg: req.Body.(*kmsg.ProduceRequest).ResponseKind()}, nil
	})
}
