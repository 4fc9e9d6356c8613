package acceptance

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// seenBy records which client consumed each (partition, offset).
type seenBy struct {
	mu   sync.Mutex
	recs map[[2]int64][]string
	// assigned is how many partitions each client holds now.
	assigned map[string]int
}

func (s *seenBy) add(client string, p int32, o int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]int64{int64(p), o}
	s.recs[k] = append(s.recs[k], client)
}

func (s *seenBy) setAssigned(client string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.assigned[client] = n
}

// saramaMember records every record its claims deliver and marks it.
type saramaMember struct{ s *seenBy }

func (h saramaMember) Setup(sess sarama.ConsumerGroupSession) error {
	n := 0
	for _, ps := range sess.Claims() {
		n += len(ps)
	}
	h.s.setAssigned("sarama", n)
	return nil
}

func (h saramaMember) Cleanup(sarama.ConsumerGroupSession) error {
	h.s.setAssigned("sarama", 0)
	return nil
}

func (h saramaMember) ConsumeClaim(sess sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.s.add("sarama", m.Partition, m.Offset)
		sess.MarkMessage(m, "")
	}
	return nil
}

// sarama's consumer group and kcat's balanced consumer (kcat -G) share a
// group and consume a topic to the end together: both get partitions,
// every record is consumed, and none by both.
func TestGroupSaramaAndKcat(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (Debian package kcat)")
	}
	d := startDaemon(t, groupDaemonConfig)
	const partitions, group, topic = 6, "mixed", "mixed-clients"
	createTopic(t, newAdmin(t, d.Addr()), topic, partitions, nil)
	s := &seenBy{recs: map[[2]int64][]string{}, assigned: map[string]int{}}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-u", "-b", d.Addr(), "-G", group, "-f", "%p %o\n",
		"-X", "auto.offset.reset=earliest", "-X", "auto.commit.interval.ms=200",
		"-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=300", topic)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	out, _ := cmd.StdoutPipe()
	errOut, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var p int32
			var o int64
			if _, err := fmt.Sscanf(sc.Text(), "%d %d", &p, &o); err == nil {
				s.add("kcat", p, o)
			}
		}
	})
	var kcatLog strings.Builder
	wg.Go(func() {
		sc := bufio.NewScanner(errOut)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			kcatLog.WriteString(line + "\n")
			s.mu.Unlock()
			if _, list, ok := strings.Cut(line, "assigned:"); ok {
				s.setAssigned("kcat", strings.Count(list, "["))
			}
		}
	})
	wg.Go(func() { _ = cmd.Wait() }) // after both pipes drain, per os/exec

	sc := sarama.NewConfig()
	sc.Version = sarama.V2_8_0_0
	sc.ClientID = "sarama-member"
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	sc.Consumer.Group.Session.Timeout = 6 * time.Second
	sc.Consumer.Group.Heartbeat.Interval = 300 * time.Millisecond
	sc.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	sc.Consumer.Offsets.AutoCommit.Interval = 200 * time.Millisecond
	grp, err := sarama.NewConsumerGroup([]string{d.Addr()}, group, sc)
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() {
		defer grp.Close()
		for ctx.Err() == nil {
			if err := grp.Consume(ctx, []string{topic}, saramaMember{s}); err != nil && ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond)
			}
		}
	})

	settled := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.assigned["kcat"] > 0 && s.assigned["sarama"] > 0 && s.assigned["kcat"]+s.assigned["sarama"] == partitions
	}
	if !waitFor(60*time.Second, settled) {
		s.mu.Lock()
		msg := fmt.Sprintf("the two members never split the partitions: %v\nkcat said:\n%s", s.assigned, kcatLog.String())
		s.mu.Unlock()
		t.Fatal(msg)
	}
	ends := map[int32]int64{}
	produceRound(t, newClient(t, d.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner())), topic, partitions, 600, ends)
	all := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for p, end := range ends {
			for o := range end {
				if len(s.recs[[2]int64{int64(p), o}]) == 0 {
					return false
				}
			}
		}
		return true
	}
	if !waitFor(60*time.Second, all) {
		s.mu.Lock()
		by := map[string]int{}
		for _, who := range s.recs {
			by[who[0]]++
		}
		msg := fmt.Sprintf("not every record was consumed: %d of 600 (%v), assigned %v\nkcat said:\n%s", len(s.recs), by, s.assigned, kcatLog.String())
		s.mu.Unlock()
		t.Fatal(msg)
	}
	s.mu.Lock()
	by := map[string]int{}
	for k, who := range s.recs {
		if len(who) > 1 {
			t.Errorf("%d@%d consumed by %v", k[0], k[1], who)
		}
		by[who[0]]++
	}
	s.mu.Unlock()
	if by["kcat"] == 0 || by["sarama"] == 0 {
		t.Errorf("records per client %v: both should have consumed some", by)
	}
	t.Logf("records per client: %v", by)
}

// DeleteGroups and OffsetDelete end to end through kadm: offsets of a
// topic the group still consumes cannot be deleted (nor a group with
// members); once the members are gone both work, and the deletion
// survives a restart.
func TestGroupAdminDeletes(t *testing.T) {
	d := startDaemon(t, groupDaemonConfig)
	adm := newAdmin(t, d.Addr())
	createTopic(t, adm, "adm-a", 2, nil)
	createTopic(t, adm, "adm-b", 2, nil)
	ctx := testCtx(t, 60*time.Second)
	ends := map[int32]int64{}
	prod := newClient(t, d.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceRound(t, prod, "adm-a", 2, 10, ends)

	member := newClient(t, d.Addr(), kgo.ConsumerGroup("adm"), kgo.ConsumeTopics("adm-a"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	for n := 0; n < 10; {
		fs := member.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("member never consumed")
		}
		n += fs.NumRecords()
	}
	if err := member.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	del, err := adm.DeleteGroup(ctx, "adm")
	if !errors.Is(err, kerr.NonEmptyGroup) && !errors.Is(del.Err, kerr.NonEmptyGroup) {
		t.Fatalf("DeleteGroup with a member: %v / %v, want NON_EMPTY_GROUP", err, del.Err)
	}
	od, err := adm.DeleteOffsets(ctx, "adm", kadm.TopicsSet{"adm-a": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if e := od["adm-a"][0]; !errors.Is(e, kerr.GroupSubscribedToTopic) {
		t.Fatalf("DeleteOffsets of a consumed topic: %v, want GROUP_SUBSCRIBED_TO_TOPIC", e)
	}

	member.Close() // leaves the group
	od, err = adm.DeleteOffsets(ctx, "adm", kadm.TopicsSet{"adm-a": {0: {}}})
	if err == nil {
		err = od.Error()
	}
	if err != nil {
		t.Fatalf("DeleteOffsets once empty: %v", err)
	}
	if got := fetchCommitted(t, adm, "adm", "adm-a"); len(got) != 1 || got[1] != ends[1] {
		t.Fatalf("after OffsetDelete of partition 0: %v, want only partition 1 at %d", got, ends[1])
	}
	d.Kill9()
	d.Restart(t)
	if got := fetchCommitted(t, adm, "adm", "adm-a"); len(got) != 1 || got[1] != ends[1] {
		t.Fatalf("after restart: %v, want only partition 1 at %d", got, ends[1])
	}
	del, err = adm.DeleteGroup(ctx, "adm")
	if err == nil {
		err = del.Err
	}
	if err != nil {
		t.Fatalf("DeleteGroup once empty: %v", err)
	}
	d.Stop()
	d.Restart(t)
	l, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := l["adm"]; ok {
		t.Fatal("a deleted group is listed after a restart")
	}
	if got := fetchCommitted(t, adm, "adm", "adm-a"); len(got) != 0 {
		t.Fatalf("a deleted group still has offsets after a restart: %v", got)
	}
}
