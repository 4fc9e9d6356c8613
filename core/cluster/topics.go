package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/vltava/vltava/plugins/sdk"
)

// Topic writes (create, add partitions, delete) may be made by any
// Node, not only the controller: each is a single Txn whose conditions
// (the topic key absent, or at the version read) make it safe against
// every other writer, and placement needs only the live brokers, which
// every Node sees.

// PlanTopic computes the assignment CreateTopic would write, without
// writing (CreateTopics with validate_only). partitions and rf may be -1
// for the defaults; with a manual assignment they must be -1 or agree
// with it.
func (n *Node) PlanTopic(ctx context.Context, partitions int32, rf int16, assignment [][]int32) ([][]int32, error) {
	v, err := n.brokersNow(ctx)
	if err != nil {
		return nil, err
	}
	if assignment != nil {
		if partitions != -1 && int(partitions) != len(assignment) ||
			rf != -1 && len(assignment) > 0 && int(rf) != len(assignment[0]) {
			return nil, fmt.Errorf("cluster: both a replica assignment and counts that disagree with it: %w", kerr.InvalidRequest)
		}
		live := v.liveness()
		if err := ValidateAssignment(assignment, live.alive); err != nil {
			return nil, err
		}
		return assignment, nil
	}
	if partitions == -1 {
		partitions = n.cfg.DefaultPartitions
	}
	if rf == -1 {
		rf = n.cfg.DefaultReplicationFactor
	}
	brokers := eligibleBrokers(v)
	return Place(brokers, 0, partitions, rf, RandomPlacement(len(brokers)))
}

// brokersNow lists the registrations from the store (not the view): a
// request may name a broker that registered a moment ago. Only the
// brokers of the returned view are set.
func (n *Node) brokersNow(ctx context.Context) (*view, error) {
	resp, err := n.store.List(ctx, &sdk.ListRequest{Prefix: brokersPrefix})
	if err != nil {
		return nil, fmt.Errorf("cluster: list brokers: %w", err)
	}
	v := newView()
	for _, kv := range resp.KVs {
		id, ok := parseBrokerKey(kv.Key)
		info, err := decodeBroker(kv.Value)
		if ok && err == nil {
			v.brokers[id] = brokerEntry{info: info, version: kv.Version}
		}
	}
	return v, nil
}

// eligibleBrokers are the live brokers not in controlled shutdown: the
// ones placement may use.
func eligibleBrokers(v *view) []BrokerInfo {
	var out []BrokerInfo
	for _, b := range v.liveBrokers() {
		if !b.ShuttingDown {
			out = append(out, b)
		}
	}
	return out
}

// CreateTopic places (or takes the manual assignment of) a new topic
// and writes /topics/<name> and every /partitions/<name>/<p> in one Txn:
// leader = the first live replica, ISR = the live replicas, epochs 0.
// Errors wrap kerr codes: TopicAlreadyExists, InvalidPartitions,
// InvalidReplicationFactor, InvalidReplicaAssignment, InvalidRequest.
func (n *Node) CreateTopic(ctx context.Context, name string, partitions int32, rf int16, assignment [][]int32, configs map[string]string) (Topic, error) {
	if name == "" || strings.Contains(name, "/") {
		return Topic{}, fmt.Errorf("cluster: topic name %q: %w", name, kerr.InvalidTopicException)
	}
	plan, err := n.PlanTopic(ctx, partitions, rf, assignment)
	if err != nil {
		return Topic{}, err
	}
	bv, err := n.brokersNow(ctx)
	if err != nil {
		return Topic{}, err
	}
	var id [16]byte
	rand.Read(id[:])
	id[0] |= 1 // never the all-zero ID, which Kafka reserves
	rec := TopicRecord{ID: hex.EncodeToString(id[:]), Partitions: int32(len(plan)), Configs: configs, Replicas: plan}
	live := bv.liveness()
	conds := []sdk.Condition{{Key: topicKey(name), Version: sdk.MustNotExist}}
	ops := []sdk.Op{{Type: sdk.OpPut, Key: topicKey(name), Value: encodeTopic(&rec)}}
	for p, replicas := range plan {
		st := initialState(replicas, live)
		if st.Leader == NoLeader {
			return Topic{}, fmt.Errorf("cluster: no replica of partition %d is alive: %w", p, kerr.InvalidReplicaAssignment)
		}
		key := partitionKey(name, int32(p))
		conds = append(conds, sdk.Condition{Key: key, Version: sdk.MustNotExist})
		ops = append(ops, sdk.Op{Type: sdk.OpPut, Key: key, Value: st.encode()})
	}
	resp, err := n.store.Txn(ctx, &sdk.TxnRequest{Conditions: conds, Ops: ops})
	if errors.Is(err, sdk.ErrVersionMismatch) {
		return Topic{}, fmt.Errorf("cluster: topic %s: %w", name, kerr.TopicAlreadyExists)
	}
	if err != nil {
		return Topic{}, fmt.Errorf("cluster: create topic %s: %w", name, err)
	}
	n.log.Info("cluster: topic created", "topic", name, "replicas", plan)
	return Topic{Name: name, TopicRecord: rec, Version: resp.Revision}, nil
}

// getTopic reads a topic from the store (not the view).
func (n *Node) getTopic(ctx context.Context, name string) (Topic, error) {
	resp, err := n.store.Get(ctx, &sdk.GetRequest{Key: topicKey(name)})
	if errors.Is(err, sdk.ErrNotFound) {
		return Topic{}, fmt.Errorf("cluster: topic %s: %w", name, kerr.UnknownTopicOrPartition)
	}
	if err != nil {
		return Topic{}, fmt.Errorf("cluster: read topic %s: %w", name, err)
	}
	return decodeTopic(name, resp.Value, resp.Version)
}

// CreatePartitions grows a topic to total partitions, placing the new
// ones (continuing the round-robin) or taking assignment (one replica
// list per new partition), in one Txn conditioned on the topic's
// version.
func (n *Node) CreatePartitions(ctx context.Context, name string, total int32, assignment [][]int32, validateOnly bool) (Topic, error) {
	for attempt := 0; ; attempt++ {
		t, err := n.createPartitions(ctx, name, total, assignment, validateOnly)
		if errors.Is(err, sdk.ErrVersionMismatch) && attempt < 5 {
			continue // the topic changed between the read and the write
		}
		return t, err
	}
}

func (n *Node) createPartitions(ctx context.Context, name string, total int32, assignment [][]int32, validateOnly bool) (Topic, error) {
	t, err := n.getTopic(ctx, name)
	if err != nil {
		return Topic{}, err
	}
	if total <= t.Partitions {
		return Topic{}, fmt.Errorf("cluster: topic %s has %d partitions, can not grow to %d: %w",
			name, t.Partitions, total, kerr.InvalidPartitions)
	}
	rec := t.TopicRecord
	if len(rec.Replicas) < int(rec.Partitions) {
		fill := []int32{n.cfg.NodeID} // pre-replication topic: this broker holds it
		if len(rec.Replicas) > 0 {
			fill = rec.Replicas[0]
		}
		rec = withReplicas(rec, int32(len(rec.Replicas)), fill)
	}
	added := total - t.Partitions
	v, err := n.brokersNow(ctx)
	if err != nil {
		return Topic{}, err
	}
	if assignment != nil {
		if int32(len(assignment)) != added {
			return Topic{}, fmt.Errorf("cluster: %d replica lists for %d new partitions: %w",
				len(assignment), added, kerr.InvalidReplicaAssignment)
		}
		if err := ValidateAssignment(append([][]int32{rec.Replicas[0]}, assignment...), v.liveness().alive); err != nil {
			return Topic{}, err
		}
	} else {
		brokers := eligibleBrokers(v)
		assignment, err = Place(brokers, t.Partitions, added, int16(len(rec.Replicas[0])), RandomPlacement(len(brokers)))
		if err != nil {
			return Topic{}, err
		}
	}
	rec.Partitions = total
	rec.Replicas = append(rec.Replicas[:t.Partitions:t.Partitions], assignment...)
	if validateOnly {
		return Topic{Name: name, TopicRecord: rec, Version: t.Version}, nil
	}
	conds := []sdk.Condition{{Key: topicKey(name), Version: t.Version}}
	ops := []sdk.Op{{Type: sdk.OpPut, Key: topicKey(name), Value: encodeTopic(&rec)}}
	live := v.liveness()
	for i, replicas := range assignment {
		p := t.Partitions + int32(i)
		st := initialState(replicas, live)
		if st.Leader == NoLeader {
			return Topic{}, fmt.Errorf("cluster: no replica of partition %d is alive: %w", p, kerr.InvalidReplicaAssignment)
		}
		conds = append(conds, sdk.Condition{Key: partitionKey(name, p), Version: sdk.MustNotExist})
		ops = append(ops, sdk.Op{Type: sdk.OpPut, Key: partitionKey(name, p), Value: st.encode()})
	}
	resp, err := n.store.Txn(ctx, &sdk.TxnRequest{Conditions: conds, Ops: ops})
	if err != nil {
		return Topic{}, fmt.Errorf("cluster: create partitions of %s: %w", name, err)
	}
	return Topic{Name: name, TopicRecord: rec, Version: resp.Revision}, nil
}

// DeleteTopic removes /topics/<name> and every /partitions/<name>/<p>
// in one Txn conditioned on the topic's version.
func (n *Node) DeleteTopic(ctx context.Context, name string) error {
	for attempt := 0; ; attempt++ {
		t, err := n.getTopic(ctx, name)
		if err != nil {
			return err
		}
		list, err := n.store.List(ctx, &sdk.ListRequest{Prefix: partitionsPrefix + name + "/"})
		if err != nil {
			return fmt.Errorf("cluster: delete topic %s: %w", name, err)
		}
		ops := []sdk.Op{{Type: sdk.OpDelete, Key: topicKey(name)}}
		for _, kv := range list.KVs {
			ops = append(ops, sdk.Op{Type: sdk.OpDelete, Key: kv.Key})
		}
		_, err = n.store.Txn(ctx, &sdk.TxnRequest{Conditions: []sdk.Condition{{Key: topicKey(name), Version: t.Version}}, Ops: ops})
		if errors.Is(err, sdk.ErrVersionMismatch) && attempt < 5 {
			continue // the topic changed between the reads: read again
		}
		if err != nil {
			return fmt.Errorf("cluster: delete topic %s: %w", name, err)
		}
		n.log.Info("cluster: topic deleted", "topic", name)
		return nil
	}
}

// AlterTopicConfigs replaces a topic's config overrides with what edit
// returns for the current ones (read from the store, not the view), in
// one compare-and-set on the topic's version, retried when another
// writer got there first. Everything else in the record (ID, partition
// count, the replica assignment) is written back as read, so a config
// change never undoes a reassignment. An error from edit is returned as
// is. Every Node hears the new record through TopicApplier.
func (n *Node) AlterTopicConfigs(ctx context.Context, name string, edit func(cur map[string]string) (map[string]string, error)) (Topic, error) {
	for attempt := 0; ; attempt++ {
		t, err := n.getTopic(ctx, name)
		if err != nil {
			return Topic{}, err
		}
		cur := t.clone()
		next, err := edit(cur.Configs)
		if err != nil {
			return Topic{}, err
		}
		if len(next) == 0 {
			next = nil
		}
		rec := t.TopicRecord
		rec.Configs = next
		resp, err := n.store.Txn(ctx, &sdk.TxnRequest{
			Conditions: []sdk.Condition{{Key: topicKey(name), Version: t.Version}},
			Ops:        []sdk.Op{{Type: sdk.OpPut, Key: topicKey(name), Value: encodeTopic(&rec)}},
		})
		if errors.Is(err, sdk.ErrVersionMismatch) && attempt < 5 {
			continue // the topic changed between the read and the write
		}
		if err != nil {
			return Topic{}, fmt.Errorf("cluster: alter configs of %s: %w", name, err)
		}
		n.log.Info("cluster: topic configs altered", "topic", name, "configs", next)
		return Topic{Name: name, TopicRecord: rec, Version: resp.Revision}, nil
	}
}
