package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/record/recordtest"
)

func recs(n, size int) []recordtest.Rec {
	out := make([]recordtest.Rec, n)
	for i := range out {
		out[i].Value = make([]byte, size)
	}
	return out
}

func TestCountBatches(t *testing.T) {
	b0 := recordtest.Build(recordtest.Options{BaseOffset: 0}, recs(3, 10)...)                // offsets 0-2
	b1 := recordtest.Build(recordtest.Options{BaseOffset: 3}, recs(4, 10)...)                // 3-6
	ctl := recordtest.Build(recordtest.Options{BaseOffset: 7, Control: true}, recs(1, 6)...) // 7
	b2 := recordtest.Build(recordtest.Options{BaseOffset: 8}, recs(2, 10)...)                // 8-9
	all := append(append(append(append([]byte(nil), b0...), b1...), ctl...), b2...)

	for _, tc := range []struct {
		name             string
		buf              []byte
		from             int64
		recs, bytes, nxt int64
	}{
		{"empty", nil, 5, 0, 0, 5},
		{"all from 0", all, 0, 9, int64(len(all)), 10},
		{"mid batch", all, 5, 2 + 2, int64(len(b1) + len(ctl) + len(b2)), 10},
		{"skip earlier batch", all, 3, 4 + 2, int64(len(b1) + len(ctl) + len(b2)), 10},
		{"truncated tail", all[:len(all)-5], 0, 7, int64(len(b0) + len(b1) + len(ctl)), 8},
		{"truncated header", append(append([]byte(nil), b0...), b1[:20]...), 0, 3, int64(len(b0)), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, b, next, err := countBatches(tc.buf, tc.from)
			if err != nil || r != tc.recs || b != tc.bytes || next != tc.nxt {
				t.Errorf("countBatches(from %d) = %d records, %d bytes, next %d, err %v; want %d, %d, %d",
					tc.from, r, b, next, err, tc.recs, tc.bytes, tc.nxt)
			}
		})
	}

	bad := append([]byte(nil), b0...)
	bad[16] = 1 // magic
	if _, _, _, err := countBatches(bad, 0); !errors.Is(err, record.ErrCorrupt) {
		t.Errorf("magic 1: err = %v, want ErrCorrupt", err)
	}
}

// TestPerfConsumeRaw consumes with --raw from a three-broker kfake cluster,
// so the partitions have different leaders and one fetch loop runs per
// broker.
func TestPerfConsumeRaw(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(4, "raw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]
	const size = 100
	per := []int{50, 0, 120, 7}
	total := 0
	for p, n := range per {
		total += n
		if n > 0 {
			cli(t, addr, "", "perf", "produce", "raw", "--records", fmt.Sprint(n), "--record-size", fmt.Sprint(size),
				"--partition", fmt.Sprint(p), "--acks", "1")
		}
	}

	var got struct {
		Kind    string
		Records int64
		Bytes   int64
	}
	out := cli(t, addr, "", "perf", "consume", "raw", "--raw", "--records", fmt.Sprint(total), "--json")
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("perf consume --raw --json printed %q: %v", out, err)
	}
	// Bytes are whole batches: more than the values, less than twice them.
	if got.Kind != "consume-raw" || got.Records != int64(total) ||
		got.Bytes <= int64(total*size) || got.Bytes > int64(2*total*size) {
		t.Errorf("perf consume --raw figures = %+v, want %d records of %d-byte values", got, total, size)
	}

	out = cli(t, addr, "", "perf", "consume", "raw", "--raw", "--records", "10")
	if !strings.Contains(out, "consume-raw total: ") {
		t.Errorf("perf consume --raw printed %q", out)
	}

	_, _, err = cliErr(t, addr, "", "perf", "consume", "raw", "--raw", "--records", fmt.Sprint(total+1), "--timeout", "300ms")
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("consumed %d of %d", total, total+1)) ||
		!strings.Contains(err.Error(), errIdle.Error()) {
		t.Errorf("perf consume --raw past the end: err = %v", err)
	}

	_, _, err = cliErr(t, addr, "", "perf", "consume", "nosuch", "--raw", "--records", "1")
	if err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("perf consume --raw of a missing topic: err = %v", err)
	}
}
