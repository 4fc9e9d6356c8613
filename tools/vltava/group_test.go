package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// groupConsumer joins group on topic, consumes n records and commits them.
// The returned client is still a member; close it to leave.
func groupConsumer(t *testing.T, addr, group, topic string, n int) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ClientID("cli-test"), kgo.DisableAutoCommit(), kgo.FetchMaxPartitionBytes(1),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := 0
	for got < n {
		fs := cl.PollRecords(ctx, n-got)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll: %v", err)
		}
		got += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	return cl
}

// lagRow finds the describe row of topic/partition: committed, end, lag.
func lagRow(t *testing.T, desc, topic string, p int) []string {
	t.Helper()
	for _, l := range lines(desc) {
		if f := strings.Fields(l); len(f) == 6 && f[0] == topic && f[1] == fmt.Sprint(p) {
			return f[2:5]
		}
	}
	t.Fatalf("no row for %s/%d in:\n%s", topic, p, desc)
	return nil
}

func TestGroupDescribeResetDelete(t *testing.T) {
	addr := newCluster(t)
	cli(t, addr, "", "topic", "create", "gt", "-p", "2")
	var in strings.Builder
	for i := range 10 {
		fmt.Fprintf(&in, "k%d:v%d\n", i%2, i) // keys k0/k1 land on fixed partitions
	}
	cli(t, addr, in.String(), "produce", "gt", "-k", ":")
	ends := map[int]int64{}
	for _, l := range lines(cli(t, addr, "", "topic", "describe", "gt")) {
		if f := strings.Fields(l); len(f) == 6 && f[0] != "PARTITION" {
			var p int
			var end int64
			fmt.Sscan(f[0], &p)
			fmt.Sscan(f[5], &end)
			ends[p] = end
		}
	}
	if ends[0]+ends[1] != 10 {
		t.Fatalf("log ends %v, want 10 records in all", ends)
	}

	cons := groupConsumer(t, addr, "grp", "gt", 4)

	// Active group: members with their assignment, offsets and lag.
	desc := cli(t, addr, "", "group", "describe", "grp")
	t.Logf("describe of an active group:\n%s", desc)
	if !strings.Contains(desc, "state Stable") || !strings.Contains(desc, "members 1") ||
		!strings.Contains(desc, "cli-test") || !strings.Contains(desc, "gt:0,1") {
		t.Errorf("describe of an active group:\n%s", desc)
	}
	var committed int64
	for p := range 2 {
		row := lagRow(t, desc, "gt", p)
		var c, end, lag int64
		fmt.Sscan(row[0], &c)
		fmt.Sscan(row[1], &end)
		fmt.Sscan(row[2], &lag)
		if end != ends[p] || lag != end-c {
			t.Errorf("partition %d row %v: want end %d and lag = end - committed", p, row, ends[p])
		}
		committed += c
	}
	if committed != 4 {
		t.Errorf("committed offsets sum to %d, want the 4 consumed records", committed)
	}
	if got := cli(t, addr, "", "group", "list"); !strings.Contains(got, "grp") {
		t.Errorf("group list:\n%s", got)
	}

	// Refused while active, with the way out.
	_, _, err := cliErr(t, addr, "", "group", "reset-offsets", "grp", "--topic", "gt", "--to-earliest", "--execute")
	t.Logf("reset while active: %v", err)
	if err == nil || !strings.Contains(err.Error(), "active member") || !strings.Contains(err.Error(), "stop its consumers") {
		t.Fatalf("reset of an active group: %v", err)
	}
	if _, _, err := cliErr(t, addr, "", "group", "delete", "grp"); err == nil || !strings.Contains(err.Error(), "active members") {
		t.Fatalf("delete of an active group: %v", err)
	}

	cons.Close() // leaves the group

	// Empty group: described, not an error.
	desc = cli(t, addr, "", "group", "describe", "grp")
	t.Logf("describe of an empty group:\n%s", desc)
	if !strings.Contains(desc, "state Empty") || !strings.Contains(desc, "no active members") {
		t.Errorf("describe of an empty group:\n%s", desc)
	}
	before := lagRow(t, desc, "gt", 0)

	// Dry run by default: prints the plan, commits nothing.
	out := cli(t, addr, "", "group", "reset-offsets", "grp", "--topic", "gt", "--to-earliest")
	t.Logf("dry run:\n%s", out)
	if !strings.Contains(out, "dry run") || !strings.Contains(out, "NEW") {
		t.Errorf("dry run printed:\n%s", out)
	}
	if after := lagRow(t, cli(t, addr, "", "group", "describe", "grp"), "gt", 0); after[0] != before[0] {
		t.Errorf("dry run changed the commit: %v -> %v", before, after)
	}

	cli(t, addr, "", "group", "reset-offsets", "grp", "--topic", "gt", "--to-earliest", "--execute")
	desc = cli(t, addr, "", "group", "describe", "grp")
	for p := range 2 {
		if row := lagRow(t, desc, "gt", p); row[0] != "0" || row[2] != fmt.Sprint(ends[p]) {
			t.Errorf("after --to-earliest partition %d: %v", p, row)
		}
	}
	cli(t, addr, "", "group", "reset-offsets", "grp", "--topic", "gt:1", "--to-offset", "2", "--execute")
	cli(t, addr, "", "group", "reset-offsets", "grp", "--topic", "gt:0", "--to-latest", "--execute")
	desc = cli(t, addr, "", "group", "describe", "grp")
	if row := lagRow(t, desc, "gt", 1); row[0] != "2" {
		t.Errorf("after --to-offset 2: %v", row)
	}
	if row := lagRow(t, desc, "gt", 0); row[0] != fmt.Sprint(ends[0]) || row[2] != "0" {
		t.Errorf("after --to-latest: %v", row)
	}
	// An offset beyond the end is clamped to the end.
	out = cli(t, addr, "", "group", "reset-offsets", "grp", "--topic", "gt:1", "--to-offset", "999")
	if !strings.Contains(out, fmt.Sprintf("gt     1          2        %d", ends[1])) && !strings.Contains(strings.Join(strings.Fields(out), " "), fmt.Sprintf("gt 1 2 %d", ends[1])) {
		t.Errorf("--to-offset 999 plan:\n%s", out)
	}
	if _, _, err := cliErr(t, addr, "", "group", "reset-offsets", "grp", "--topic", "gt"); err == nil {
		t.Error("reset without a --to-* flag succeeded")
	}

	cli(t, addr, "", "group", "delete", "grp")
	if got := cli(t, addr, "", "group", "list"); strings.Contains(got, "grp") {
		t.Errorf("group list after delete:\n%s", got)
	}
}

func TestGroupResetToTimestamp(t *testing.T) {
	addr := newCluster(t, "ts")
	produceAt(t, addr, "ts", map[int64]string{1000: "one", 2000: "two", 3000: "three"})
	out := cli(t, addr, "", "group", "reset-offsets", "tsg", "--topic", "ts", "--to-timestamp", "1500", "--execute")
	if !strings.Contains(out, "committed new offsets for 1 partitions") {
		t.Errorf("reset printed:\n%s", out)
	}
	desc := cli(t, addr, "", "group", "describe", "tsg")
	if !strings.Contains(desc, "no active members") {
		t.Errorf("describe:\n%s", desc)
	}
	if row := lagRow(t, desc, "ts", 0); row[0] != "1" || row[1] != "3" || row[2] != "2" {
		t.Errorf("after --to-timestamp 1500: %v, want committed 1, end 3, lag 2", row)
	}
	cli(t, addr, "", "group", "reset-offsets", "tsg", "--all-topics", "--to-timestamp", "9999", "--execute")
	if row := lagRow(t, cli(t, addr, "", "group", "describe", "tsg"), "ts", 0); row[0] != "3" {
		t.Errorf("a timestamp after every record resets to the end: %v", row)
	}
	if _, _, err := cliErr(t, addr, "", "group", "describe", "nosuchgroup"); err == nil {
		t.Error("describing a group that never existed succeeded")
	}
}
