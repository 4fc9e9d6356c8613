package conformance

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// raw848: members of a KIP-848 consumer group made of hand-built
// ConsumerGroupHeartbeat requests, for the epoch fencing a well-behaved
// client never provokes. join sends member epoch 0 (the member ID is
// made here, as KIP-1082 clients do) and heartbeats until the member
// owns its assignment; heartbeat sends the member's epoch (or -epoch);
// leave sends epoch -1; commit is an OffsetCommit carrying the member
// ID and epoch (v9+: the epoch is the generation field).
func (g *groups) raw848(ts *testscript.TestScript, args []string) {
	if len(args) == 0 {
		ts.Fatalf("usage:\n%s", groupUsage)
	}
	s := st(ts)
	cl := s.client(ts)
	ctx, cancel := ctxFor(30 * time.Second)
	defer cancel()
	fs := flag.NewFlagSet("group raw848", flag.ContinueOnError)
	memberID := fs.String("member", "", "member ID to send instead of the member's")
	epoch := fs.Int("epoch", -100, "member epoch to send instead of the member's")
	expect := fs.String("expect", "ok", "ok or the expected error name")
	key := func(name string) string { return "848/" + name }
	heartbeat := func(rm rawMember, topics []string) (*kmsg.ConsumerGroupHeartbeatResponse, error) {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch = rm.group, rm.id, rm.gen
		req.RebalanceTimeoutMillis = 10000
		if topics != nil {
			req.SubscribedTopicNames = topics
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		return req.RequestWith(ctx, coord(cl))
	}
	switch args[0] {
	case "join":
		pos := parse(ts, fs, args[1:], 3, groupUsage)
		var id [16]byte
		_, _ = rand.Read(id[:])
		rm := rawMember{group: s.group(pos[0]), id: hex.EncodeToString(id[:]), gen: 0}
		topic := s.topic(ts, pos[1])
		resp, err := heartbeat(rm, []string{topic})
		ts.Check(err)
		if resp.ErrorCode != 0 {
			ts.Fatalf("group raw848 join: %s", errName(resp.ErrorCode))
		}
		if resp.MemberID != nil {
			rm.id = *resp.MemberID
		}
		rm.gen = resp.MemberEpoch
		// Heartbeat until the epoch is stable and an assignment came.
		deadline := time.Now().Add(20 * time.Second)
		for resp.Assignment == nil && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
			if resp, err = heartbeat(rm, []string{topic}); err != nil || resp.ErrorCode != 0 {
				ts.Fatalf("group raw848 join: heartbeat: %v %s", err, errName(resp.ErrorCode))
			}
			rm.gen = resp.MemberEpoch
		}
		g.mu.Lock()
		g.raw[key(pos[2])] = rm
		g.mu.Unlock()
		fmt.Fprintf(ts.Stdout(), "joined: epoch=%d\n", rm.gen)
		ts.Setenv("EPOCH", fmt.Sprint(rm.gen))
		return
	case "heartbeat", "leave", "commit":
	default:
		ts.Fatalf("usage:\n%s", groupUsage)
	}
	npos := 2
	if args[0] == "commit" {
		npos = 5
	}
	pos := parse(ts, fs, args[1:], npos, groupUsage)
	g.mu.Lock()
	rm, ok := g.raw[key(pos[1])]
	g.mu.Unlock()
	if !ok {
		ts.Fatalf("group raw848: no member %q (group raw848 join first)", pos[1])
	}
	if *memberID != "" {
		rm.id = *memberID
	}
	if *epoch != -100 {
		rm.gen = int32(*epoch)
	}
	var code int16
	switch args[0] {
	case "heartbeat", "leave":
		if args[0] == "leave" {
			rm.gen = -1
		}
		resp, err := heartbeat(rm, nil)
		ts.Check(err)
		code = resp.ErrorCode
	case "commit":
		var err error
		code, err = rawCommit(ctx, cl, rm.group, rm, s.topic(ts, pos[2]), pos[3], pos[4])
		ts.Check(err)
	}
	got := "ok"
	if code != 0 {
		got = errName(code)
	}
	fmt.Fprintf(ts.Stdout(), "%s: %s\n", args[0], got)
	if !slices.Contains(strings.Split(*expect, "|"), got) {
		ts.Fatalf("group raw848 %s: got %s, want %s", args[0], got, *expect)
	}
}
