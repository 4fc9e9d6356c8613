package cluster

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Store keys; the layout is documented in doc.go.
const (
	brokersPrefix      = "/brokers/"
	topicsPrefix       = "/topics/"
	partitionsPrefix   = "/partitions/"
	controllerKey      = "/controller"
	controllerEpochKey = "/controller-epoch"
	suspectsPrefix     = "/suspects/"
)

func brokerKey(id int32) string { return brokersPrefix + strconv.Itoa(int(id)) }

// suspectKey is where a Node asks broker id to prove it is alive (see
// peers.go).
func suspectKey(id int32) string { return suspectsPrefix + strconv.Itoa(int(id)) }

func topicKey(name string) string { return topicsPrefix + name }

func partitionKey(topic string, p int32) string {
	return partitionsPrefix + topic + "/" + strconv.Itoa(int(p))
}

// parsePartitionKey splits "/partitions/<topic>/<p>". Topic names never
// contain '/', so the last slash separates the partition.
func parsePartitionKey(key string) (topic string, p int32, ok bool) {
	rest, found := strings.CutPrefix(key, partitionsPrefix)
	if !found {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(rest[i+1:], 10, 32)
	if err != nil || n < 0 {
		return "", 0, false
	}
	return rest[:i], int32(n), true
}

func parseBrokerKey(key string) (int32, bool) {
	rest, found := strings.CutPrefix(key, brokersPrefix)
	if !found {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 32)
	if err != nil || n < 0 {
		return 0, false
	}
	return int32(n), true
}

// BrokerInfo is a live broker's registration, the value of the ephemeral
// /brokers/<id> key.
type BrokerInfo struct {
	ID int32 `json:"id"`
	// Host and Port are the inter-broker listener's advertised address.
	Host string `json:"host"`
	Port int32  `json:"port"`
	// Endpoints are every advertised listener (Kafka's broker
	// registration endpoints); a registration without them (written
	// before listeners were named) has only Host and Port.
	Endpoints []Endpoint `json:"endpoints,omitempty"`
	Rack      string     `json:"rack"`
	// Incarnation is random per Node: a registration left by an earlier
	// process of the same broker has a different one.
	Incarnation string `json:"incarnation"`
	// ShuttingDown is set by a controlled shutdown: the controller moves
	// the broker's leaderships away and takes it out of every ISR.
	ShuttingDown bool `json:"shutting_down"`
}

// Endpoint is one advertised listener of a broker.
type Endpoint struct {
	Name     string `json:"name"`     // listener name
	Protocol string `json:"protocol"` // security protocol
	Host     string `json:"host"`
	Port     int32  `json:"port"`
}

// Endpoint returns the broker's endpoint on the named listener. A
// registration without endpoints answers its Host and Port for any name.
func (bi BrokerInfo) Endpoint(listener string) (host string, port int32, ok bool) {
	if len(bi.Endpoints) == 0 {
		return bi.Host, bi.Port, true
	}
	for _, e := range bi.Endpoints {
		if e.Name == listener {
			return e.Host, e.Port, true
		}
	}
	return "", 0, false
}

// Equal reports whether two registrations are the same.
func (bi BrokerInfo) Equal(o BrokerInfo) bool {
	return bi.ID == o.ID && bi.Host == o.Host && bi.Port == o.Port && bi.Rack == o.Rack &&
		bi.Incarnation == o.Incarnation && bi.ShuttingDown == o.ShuttingDown &&
		slices.Equal(bi.Endpoints, o.Endpoints)
}

// TopicRecord is the JSON value of /topics/<name>. Writers that change
// only Configs (AlterConfigs) must keep Replicas as read.
type TopicRecord struct {
	ID         string            `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
	// Replicas is the assignment, one broker list per partition; the
	// first broker is the preferred leader. During a reassignment a list
	// holds the target replicas followed by the ones being removed.
	Replicas [][]int32 `json:"replicas,omitempty"`
}

// Topic is a topic as the Node last saw it in the store.
type Topic struct {
	Name string
	TopicRecord
	Version int64 // store version of /topics/<name>
}

// clone returns a deep copy (the view's copy is shared).
func (t Topic) clone() Topic {
	t.Configs = maps.Clone(t.Configs)
	t.Replicas = slices.Clone(t.Replicas)
	for i := range t.Replicas {
		t.Replicas[i] = slices.Clone(t.Replicas[i])
	}
	return t
}

// Assignment returns partition p's replicas, or nil if the record has
// none (a topic written by a single-broker Vltava before replication).
func (t *Topic) Assignment(p int32) []int32 {
	if p < 0 || int(p) >= len(t.Replicas) {
		return nil
	}
	return t.Replicas[p]
}

// PartitionState is the JSON value of /partitions/<topic>/<p>.
//
// INVARIANT: ISR is never empty; Leader is -1 (offline) or a member of
// ISR. LeaderEpoch grows by one with every leader change, PartitionEpoch
// with every change at all.
type PartitionState struct {
	Leader         int32   `json:"leader"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	ISR            []int32 `json:"isr"`
	PartitionEpoch int32   `json:"partition_epoch"`
	// Adding and Removing describe a reassignment in progress: replicas
	// being added (not yet caught up) and replicas to drop once every
	// target replica is in the ISR.
	Adding   []int32 `json:"adding"`
	Removing []int32 `json:"removing"`
	// Version is the store version of the key (not stored in the value);
	// AlterISR takes it as the compare-and-set condition.
	Version int64 `json:"-"`
}

// NoLeader is the Leader of an offline partition.
const NoLeader int32 = -1

// Clone returns a deep copy.
func (s PartitionState) Clone() PartitionState {
	s.ISR = slices.Clone(s.ISR)
	s.Adding = slices.Clone(s.Adding)
	s.Removing = slices.Clone(s.Removing)
	return s
}

// Reassigning reports whether a reassignment is in progress.
func (s *PartitionState) Reassigning() bool { return len(s.Adding)+len(s.Removing) > 0 }

func (s *PartitionState) encode() []byte {
	c := s.Clone()
	for _, l := range []*[]int32{&c.ISR, &c.Adding, &c.Removing} {
		if *l == nil {
			*l = []int32{}
		}
	}
	raw, _ := json.Marshal(c) // plain struct: can not fail
	return raw
}

func decodePartition(raw []byte, version int64) (PartitionState, error) {
	var s PartitionState
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, fmt.Errorf("cluster: partition state: %w", err)
	}
	if len(s.ISR) == 0 {
		return s, fmt.Errorf("cluster: partition state has an empty ISR")
	}
	s.Version = version
	return s, nil
}

func decodeTopic(name string, raw []byte, version int64) (Topic, error) {
	t := Topic{Name: name, Version: version}
	if err := json.Unmarshal(raw, &t.TopicRecord); err != nil {
		return t, fmt.Errorf("cluster: topic %s: %w", name, err)
	}
	return t, nil
}

func encodeTopic(r *TopicRecord) []byte {
	raw, _ := json.Marshal(r) // plain struct: can not fail
	return raw
}

func decodeBroker(raw []byte) (BrokerInfo, error) {
	var b BrokerInfo
	if err := json.Unmarshal(raw, &b); err != nil {
		return b, fmt.Errorf("cluster: broker registration: %w", err)
	}
	return b, nil
}

// controllerRecord is the value of /controller.
type controllerRecord struct {
	ID    int32 `json:"id"`
	Epoch int64 `json:"epoch"`
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return tp.Topic + "-" + strconv.Itoa(int(tp.Partition)) }

func comparePartitions(a, b TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.Partition - b.Partition)
}
