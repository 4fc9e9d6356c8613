package cluster

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Placement is where Place starts its round-robin. Kafka picks both at
// random so that successive topics do not all lead on the same broker;
// tests fix them.
type Placement struct {
	StartIndex int // index of the first partition's leader in the broker list
	Shift      int // initial distance between a leader and its first follower, minus one
}

// RandomPlacement draws a start index and shift for n brokers.
func RandomPlacement(n int) Placement {
	if n <= 0 {
		return Placement{}
	}
	return Placement{StartIndex: rand.IntN(n), Shift: rand.IntN(n)}
}

// Place assigns replicas for partitions partitions with replication
// factor rf over brokers, as Kafka's rack-aware round-robin does:
//
//   - Without racks, brokers are sorted by ID. Partition i's leader is
//     broker (StartIndex+i) mod n, so leaders spread evenly; followers
//     are the brokers after the leader at a shift that grows by one every
//     n partitions, so followers spread evenly too.
//   - With racks, the broker list alternates racks (one broker of each
//     rack in turn, racks and brokers sorted), leaders walk that list,
//     and each follower is the next broker in the walk on a rack without
//     a replica yet (on any rack once every rack has one).
//
// firstPartition is the ID of the first partition placed (non-zero when
// CreatePartitions adds to a topic): it continues the round-robin.
func Place(brokers []BrokerInfo, firstPartition, partitions int32, rf int16, at Placement) ([][]int32, error) {
	n := len(brokers)
	switch {
	case partitions <= 0:
		return nil, fmt.Errorf("cluster: %d partitions: %w", partitions, kerr.InvalidPartitions)
	case rf <= 0:
		return nil, fmt.Errorf("cluster: replication factor %d: %w", rf, kerr.InvalidReplicationFactor)
	case int(rf) > n:
		return nil, fmt.Errorf("cluster: replication factor %d is larger than the %d available brokers: %w",
			rf, n, kerr.InvalidReplicationFactor)
	}
	list, racks := rackAlternated(brokers)
	out := make([][]int32, 0, partitions)
	shift := at.Shift
	for i := int(firstPartition); i < int(firstPartition+partitions); i++ {
		if i > 0 && i%n == 0 {
			shift++
		}
		first := (i + at.StartIndex) % n
		if racks <= 1 {
			out = append(out, placeFlat(list, first, shift, int(rf)))
		} else {
			out = append(out, placeRacks(list, racks, first, shift, int(rf)))
		}
	}
	return out, nil
}

// replicaIndex is the broker index of the j-th follower of the leader at
// first: never the leader itself, since the distance is 1..n-1.
func replicaIndex(first, shift, j, n int) int {
	if n == 1 {
		return first
	}
	return (first + 1 + (shift+j)%(n-1)) % n
}

func placeFlat(list []BrokerInfo, first, shift, rf int) []int32 {
	n := len(list)
	replicas := []int32{list[first].ID}
	for j := 0; j < rf-1; j++ {
		replicas = append(replicas, list[replicaIndex(first, shift, j, n)].ID)
	}
	return replicas
}

func placeRacks(list []BrokerInfo, racks, first, shift, rf int) []int32 {
	n := len(list)
	leader := list[first]
	replicas := []int32{leader.ID}
	usedRacks := map[string]bool{leader.Rack: true}
	used := map[int32]bool{leader.ID: true}
	k := 0
	for len(replicas) < rf {
		b := list[replicaIndex(first, shift*racks, k, n)]
		k++
		if (usedRacks[b.Rack] && len(usedRacks) < racks) || (used[b.ID] && len(used) < n) {
			continue
		}
		replicas = append(replicas, b.ID)
		usedRacks[b.Rack] = true
		used[b.ID] = true
	}
	return replicas
}

// rackAlternated orders brokers so that consecutive brokers are on
// different racks where possible: the first broker of each rack (racks
// sorted), then the second of each, and so on. With no racks at all it is
// the brokers sorted by ID. A broker without a rack counts as rack "".
func rackAlternated(brokers []BrokerInfo) ([]BrokerInfo, int) {
	sorted := slices.Clone(brokers)
	slices.SortFunc(sorted, func(a, b BrokerInfo) int { return int(a.ID - b.ID) })
	byRack := map[string][]BrokerInfo{}
	for _, b := range sorted {
		byRack[b.Rack] = append(byRack[b.Rack], b)
	}
	if len(byRack) <= 1 {
		return sorted, 1
	}
	names := make([]string, 0, len(byRack))
	for r := range byRack {
		names = append(names, r)
	}
	slices.SortFunc(names, strings.Compare)
	out := make([]BrokerInfo, 0, len(sorted))
	for i := 0; len(out) < len(sorted); i++ {
		for _, r := range names {
			if i < len(byRack[r]) {
				out = append(out, byRack[r][i])
			}
		}
	}
	return out, len(names)
}

// ValidateAssignment checks a manual assignment (CreateTopics,
// CreatePartitions): every partition has the same, non-zero number of
// replicas, no broker twice, and only registered brokers.
func ValidateAssignment(assignment [][]int32, registered func(id int32) bool) error {
	if len(assignment) == 0 {
		return fmt.Errorf("cluster: empty assignment: %w", kerr.InvalidReplicaAssignment)
	}
	rf := len(assignment[0])
	for p, replicas := range assignment {
		if len(replicas) == 0 {
			return fmt.Errorf("cluster: partition %d has no replicas: %w", p, kerr.InvalidReplicaAssignment)
		}
		if len(replicas) != rf {
			return fmt.Errorf("cluster: partition %d has %d replicas, partition 0 has %d: %w",
				p, len(replicas), rf, kerr.InvalidReplicaAssignment)
		}
		seen := map[int32]bool{}
		for _, id := range replicas {
			if seen[id] {
				return fmt.Errorf("cluster: partition %d names broker %d twice: %w", p, id, kerr.InvalidReplicaAssignment)
			}
			seen[id] = true
			if !registered(id) {
				return fmt.Errorf("cluster: partition %d names broker %d, which is not registered: %w",
					p, id, kerr.InvalidReplicaAssignment)
			}
		}
	}
	return nil
}
