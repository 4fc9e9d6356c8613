package acceptance

import (
	"context"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/vltava/vltava/daemon/daemontest"
)

// resetConn closes c with a TCP reset, as a client that is killed does.
func resetConn(t *testing.T, c net.Conn) {
	t.Helper()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// TestLogsQuietOnOrdinaryEvents: clients that disconnect (cleanly, with a
// reset, mid-frame, before their response) and a clean shutdown log no
// WARN or ERROR; recovery after kill -9 logs one summary line instead of a
// line per segment.
func TestLogsQuietOnOrdinaryEvents(t *testing.T) {
	p := daemontest.Start(t, daemontest.Build(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic("quiet"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A consumer group, so that __consumer_offsets exists.
	gc, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.ConsumerGroup("quiet-g"), kgo.ConsumeTopics("quiet"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n == 0 && ctx.Err() == nil; {
		n = gc.PollFetches(ctx).NumRecords()
	}
	if err := gc.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	gc.Close()
	cl.Close()

	// Reset mid-frame.
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte{0, 0, 0, 100, 1, 2, 3})
	time.Sleep(50 * time.Millisecond)
	resetConn(t, c)
	// A whole ApiVersions request, then a reset before the response is read.
	for range 5 {
		c, err = net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		req := []byte{0, 18, 0, 0, 0, 0, 0, 7, 0xff, 0xff} // ApiVersions v0, no client id
		frame := binary.BigEndian.AppendUint32(nil, uint32(len(req)))
		c.Write(append(frame, req...))
		resetConn(t, c)
	}
	// A clean close mid-frame.
	c, err = net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte{0, 0, 0, 100, 1})
	c.Close()
	time.Sleep(200 * time.Millisecond)

	p.Kill9()
	p.Restart(t)
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	log := p.Log()
	for _, bad := range []string{"level=WARN", "level=ERROR"} {
		if strings.Contains(log, bad) {
			t.Errorf("log has %s:\n%s", bad, log)
		}
	}
	if n := strings.Count(log, "msg=\"log: recovered segment\""); n != 0 {
		t.Errorf("%d per-segment recovery lines at info level", n)
	}
	if n := strings.Count(log, "recovered the logs after an unclean shutdown"); n != 1 {
		t.Errorf("%d recovery summary lines, want 1:\n%s", n, log)
	}
}

// TestClusterCleanShutdownLogsNoError: a three-voter cluster stopped with
// SIGTERM (all at once, as cluster up and Ctrl-C do) logs no ERROR, in
// particular not raft's "use of closed network connection".
func TestClusterCleanShutdownLogsNoError(t *testing.T) {
	c := daemontest.StartCluster(t, daemontest.Build(t), 3)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.DefaultProduceTopic("calm"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	errs := make(chan error, 3)
	for _, p := range c.Brokers() {
		go func() { errs <- p.Stop() }()
	}
	for range c.Brokers() {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	for _, p := range c.Brokers() {
		for _, line := range strings.Split(p.Log(), "\n") {
			if strings.Contains(line, "level=ERROR") {
				t.Errorf("broker %d: %s", p.NodeID(), line)
			}
		}
	}
}
