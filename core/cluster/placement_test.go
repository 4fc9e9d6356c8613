package cluster

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kerr"
)

func brokersWithRacks(racks ...string) []BrokerInfo {
	out := make([]BrokerInfo, len(racks))
	for i, r := range racks {
		out[i] = BrokerInfo{ID: int32(i), Rack: r}
	}
	return out
}

// Kafka's AdminUtils documents the rack-unaware assignment of 10
// partitions with replication factor 3 over 5 brokers (start index 0,
// shift 0): "broker-0 holds p0 and p5 as first replica, p4 and p8 as
// second, p3 and p7 as third", and so on for every broker.
func TestPlaceKafkaExampleTenPartitionsFiveBrokers(t *testing.T) {
	got, err := Place(brokersWithRacks("", "", "", "", ""), 0, 10, 3, Placement{})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int32{
		{0, 1, 2}, {1, 2, 3}, {2, 3, 4}, {3, 4, 0}, {4, 0, 1},
		{0, 2, 3}, {1, 3, 4}, {2, 4, 0}, {3, 0, 1}, {4, 1, 2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("assignment (-want +got):\n%s", diff)
	}
}

// "Spread the replicas evenly among brokers": leaders (first replicas)
// and all replicas land on every broker equally often, whatever the
// random start.
func TestPlaceLeadersSpreadEvenly(t *testing.T) {
	for _, tc := range []struct {
		brokers []BrokerInfo
		parts   int32
		rf      int16
	}{
		{brokersWithRacks("", "", ""), 6, 3},
		{brokersWithRacks("", "", "", "", "", ""), 12, 2},
		{brokersWithRacks("a", "b", "c", "a", "b", "c"), 12, 3},
		{brokersWithRacks("a", "a", "b", "b"), 8, 2},
	} {
		for start := range len(tc.brokers) {
			at := Placement{StartIndex: start, Shift: start}
			name := fmt.Sprintf("%d brokers/%d partitions/rf %d/start %d", len(tc.brokers), tc.parts, tc.rf, start)
			t.Run(name, func(t *testing.T) {
				got, err := Place(tc.brokers, 0, tc.parts, tc.rf, at)
				if err != nil {
					t.Fatal(err)
				}
				leaders, replicas := map[int32]int{}, map[int32]int{}
				for p, rs := range got {
					if len(rs) != int(tc.rf) {
						t.Fatalf("partition %d has %d replicas", p, len(rs))
					}
					seen := map[int32]bool{}
					for _, id := range rs {
						if seen[id] {
							t.Fatalf("partition %d: broker %d twice in %v", p, id, rs)
						}
						seen[id] = true
						replicas[id]++
					}
					leaders[rs[0]]++
				}
				per := int(tc.parts) / len(tc.brokers)
				for _, b := range tc.brokers {
					if leaders[b.ID] != per {
						t.Errorf("broker %d leads %d partitions, want %d (%v)", b.ID, leaders[b.ID], per, got)
					}
					if replicas[b.ID] != per*int(tc.rf) {
						t.Errorf("broker %d holds %d replicas, want %d (%v)", b.ID, replicas[b.ID], per*int(tc.rf), got)
					}
				}
			})
		}
	}
}

// "The rack-aware assignment ... spreads replicas of a partition across
// racks": with as many racks as replicas, every replica of a partition
// is on a different rack; with fewer racks, every rack is used before
// any is used twice.
func TestPlaceRacksAlternate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		brokers []BrokerInfo
		rf      int16
	}{
		{"three racks rf 3", brokersWithRacks("r1", "r1", "r2", "r2", "r3", "r3"), 3},
		{"uneven racks rf 2", brokersWithRacks("r1", "r1", "r1", "r2"), 2},
		{"two racks rf 3", brokersWithRacks("r1", "r1", "r2", "r2"), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			racks := map[string]bool{}
			for _, b := range tc.brokers {
				racks[b.Rack] = true
			}
			for start := range len(tc.brokers) {
				got, err := Place(tc.brokers, 0, 12, tc.rf, Placement{StartIndex: start, Shift: start})
				if err != nil {
					t.Fatal(err)
				}
				for p, rs := range got {
					used := map[string]int{}
					for _, id := range rs {
						used[tc.brokers[id].Rack]++
					}
					want := min(int(tc.rf), len(racks))
					if len(used) != want {
						t.Errorf("start %d partition %d: replicas %v on %d racks, want %d", start, p, rs, len(used), want)
					}
				}
			}
		})
	}
}

// CreatePartitions continues the round-robin: placing partitions 3..5
// after 0..2 gives what placing 0..5 at once gives for them.
func TestPlaceContinuesFromFirstPartition(t *testing.T) {
	brokers := brokersWithRacks("", "", "")
	all, _ := Place(brokers, 0, 6, 2, Placement{StartIndex: 1})
	tail, err := Place(brokers, 3, 3, 2, Placement{StartIndex: 1})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(all[3:], tail); diff != "" {
		t.Errorf("(-whole +tail):\n%s", diff)
	}
}

func TestPlaceRejects(t *testing.T) {
	for _, tc := range []struct {
		name    string
		brokers int
		parts   int32
		rf      int16
		want    error
	}{
		{"replication factor larger than the available brokers", 2, 1, 3, kerr.InvalidReplicationFactor},
		{"replication factor below 1", 2, 1, 0, kerr.InvalidReplicationFactor},
		{"number of partitions below 1", 2, 0, 1, kerr.InvalidPartitions},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Place(brokersWithRacks(make([]string, tc.brokers)...), 0, tc.parts, tc.rf, Placement{})
			if !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestValidateAssignment(t *testing.T) {
	registered := func(id int32) bool { return id >= 1 && id <= 3 }
	for _, tc := range []struct {
		name string
		a    [][]int32
		ok   bool
	}{
		{"valid", [][]int32{{1, 2}, {2, 3}}, true},
		{"all partitions should have the same number of replicas", [][]int32{{1, 2}, {3}}, false},
		{"duplicate broker", [][]int32{{1, 1}}, false},
		{"unregistered broker", [][]int32{{1, 4}}, false},
		{"empty replica list", [][]int32{{}}, false},
		{"no partitions", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateAssignment(tc.a, registered)
			if tc.ok != (err == nil) {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, kerr.InvalidReplicaAssignment) {
				t.Errorf("err = %v, want INVALID_REPLICA_ASSIGNMENT", err)
			}
		})
	}
}
