package broker

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vltava/vltava/core/cluster"
	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/core/log"
	"github.com/vltava/vltava/plugins/sdk"
)

const topicsPrefix = "/topics/"

// topic is an immutable view of one topic. Changes build a new topic and
// publish a new snapshot; partitions are shared between views.
type topic struct {
	name       string
	id         [16]byte
	overrides  map[string]string
	cfg        config.Topic
	partitions []*partition
	version    int64 // store version of /topics/<name>
	// replicas is the assignment per partition (nil in the record of a
	// topic written by a single node before it ran as a cluster of one,
	// until the controller gives it one).
	replicas [][]int32
}

func (t *topic) partition(i int32) *partition {
	if i < 0 || int(i) >= len(t.partitions) {
		return nil
	}
	return t.partitions[i]
}

// topicSnapshot is the broker's current set of topics. It is never
// modified once published.
type topicSnapshot struct {
	byName map[string]*topic
	byID   map[[16]byte]*topic
}

func emptySnapshot() *topicSnapshot {
	return &topicSnapshot{byName: map[string]*topic{}, byID: map[[16]byte]*topic{}}
}

func (s *topicSnapshot) names() []string { return slices.Sorted(maps.Keys(s.byName)) }

func (s *topicSnapshot) allPartitions() []*partition {
	var ps []*partition
	for _, t := range s.byName {
		ps = append(ps, t.partitions...)
	}
	return ps
}

// with returns a copy of s with t added or replaced.
func (s *topicSnapshot) with(t *topic) *topicSnapshot {
	n := &topicSnapshot{byName: maps.Clone(s.byName), byID: maps.Clone(s.byID)}
	n.byName[t.name] = t
	n.byID[t.id] = t
	return n
}

func (s *topicSnapshot) without(name string) *topicSnapshot {
	n := &topicSnapshot{byName: maps.Clone(s.byName), byID: maps.Clone(s.byID)}
	if t, ok := n.byName[name]; ok {
		delete(n.byName, name)
		delete(n.byID, t.id)
	}
	return n
}

// topic looks a topic up by name; nil if unknown.
func (b *Broker) topic(name string) *topic { return b.meta.Load().byName[name] }

// topicByID looks a topic up by ID; nil if unknown.
func (b *Broker) topicByID(id [16]byte) *topic { return b.meta.Load().byID[id] }

var legalTopic = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// checkTopicName applies Kafka's topic name rules.
func checkTopicName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return fmt.Errorf("topic name %q is illegal", name)
	case len(name) > 249:
		return fmt.Errorf("topic name is %d characters, the limit is 249", len(name))
	case !legalTopic.MatchString(name):
		return fmt.Errorf("topic name %q may contain only ASCII letters, digits, '.', '_' and '-'", name)
	}
	return nil
}

// loadTopics reads every topic from the store and opens its logs, all
// topics' at once (log.OpenAll). Partition directories of topics the store
// no longer has (a delete interrupted by a crash) are removed.
func (b *Broker) loadTopics(ctx context.Context) error {
	resp, err := b.store.List(ctx, &sdk.ListRequest{Prefix: topicsPrefix})
	if err != nil {
		return fmt.Errorf("broker: list topics: %w", err)
	}
	var (
		topics []*topic
		counts []int32
		specs  []log.OpenSpec
	)
	for _, kv := range resp.KVs {
		var rec cluster.TopicRecord
		if err := json.Unmarshal(kv.Value, &rec); err != nil {
			return fmt.Errorf("broker: topic %s: %w", kv.Key, err)
		}
		t, err := b.topicShell(strings.TrimPrefix(kv.Key, topicsPrefix), rec, kv.Version, nil)
		if err != nil {
			return err
		}
		topics, counts = append(topics, t), append(counts, rec.Partitions)
		specs = b.appendLogSpecs(specs, t, rec.Partitions)
	}
	logs, err := log.OpenAll(specs)
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	snap := emptySnapshot()
	for i, t := range topics {
		for p := range counts[i] {
			// No role until the cluster's state for it arrives.
			t.partitions = append(t.partitions, newPartition(t.name, p, logs[0], t.cfg))
			logs = logs[1:]
		}
		snap = snap.with(t)
	}
	b.meta.Store(snap)
	b.removeStrayDirs(snap)
	return nil
}

// openTopic builds a topic from its record, opening logs for its
// partitions (concurrently); existing partitions are reused from prev.
func (b *Broker) openTopic(name string, rec cluster.TopicRecord, version int64, prev *topic) (*topic, error) {
	t, err := b.topicShell(name, rec, version, prev)
	if err != nil {
		return nil, err
	}
	specs := b.appendLogSpecs(nil, t, rec.Partitions)
	logs, err := log.OpenAll(specs)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	for _, l := range logs {
		// No role until the cluster's state for it arrives.
		t.partitions = append(t.partitions, newPartition(name, int32(len(t.partitions)), l, t.cfg))
	}
	return t, nil
}

// topicShell builds a topic from its record with the partitions it can
// reuse from prev (a prefix of them) and none opened yet.
func (b *Broker) topicShell(name string, rec cluster.TopicRecord, version int64, prev *topic) (*topic, error) {
	cfg, err := config.ResolveTopic(b.cfg, rec.Configs)
	if err != nil {
		return nil, fmt.Errorf("broker: topic %s: %w", name, err)
	}
	t := &topic{name: name, overrides: rec.Configs, cfg: cfg, version: version, replicas: rec.Replicas}
	if _, err := hex.Decode(t.id[:], []byte(rec.ID)); err != nil {
		return nil, fmt.Errorf("broker: topic %s: bad id %q", name, rec.ID)
	}
	for i := int32(0); i < rec.Partitions && prev != nil && prev.partition(i) != nil; i++ {
		t.partitions = append(t.partitions, prev.partitions[i])
	}
	return t, nil
}

// appendLogSpecs appends the logs t still needs to reach partitions.
func (b *Broker) appendLogSpecs(specs []log.OpenSpec, t *topic, partitions int32) []log.OpenSpec {
	lc := b.logConfigFor(t.cfg)
	for i := int32(len(t.partitions)); i < partitions; i++ {
		specs = append(specs, log.OpenSpec{Dir: filepath.Join(b.cfg.LogDirs, dirName(t.name, i)), Config: lc})
	}
	return specs
}

func prevPartitions(t *topic) []*partition {
	if t == nil {
		return nil
	}
	return t.partitions
}

func (b *Broker) logConfigFor(t config.Topic) log.Config {
	c := logConfig(t)
	c.Logger = b.logger
	c.OnStorageError = b.logDirFailed
	c.Syncer = b.syncer
	return c
}

var partitionDir = regexp.MustCompile(`^(.+)-([0-9]+)$`)

func (b *Broker) removeStrayDirs(snap *topicSnapshot) {
	entries, err := os.ReadDir(b.cfg.LogDirs)
	if err != nil {
		return
	}
	for _, e := range entries {
		m := partitionDir.FindStringSubmatch(e.Name())
		if !e.IsDir() || m == nil {
			continue
		}
		t := snap.byName[m[1]]
		i, _ := strconv.Atoi(m[2])
		if t != nil && i < len(t.partitions) {
			continue
		}
		b.logger.Warn("broker: removing partition directory of a deleted topic", "dir", e.Name())
		if err := os.RemoveAll(filepath.Join(b.cfg.LogDirs, e.Name())); err != nil {
			b.logger.Error("broker: remove stray directory", "dir", e.Name(), "err", err)
		}
	}
}

// createTopic validates and creates a topic, then opens its logs. It
// returns a Kafka error code and message for the client on failure.
func (b *Broker) createTopic(ctx context.Context, name string, partitions int32, rf int16, configs map[string]string, validateOnly bool) (*topic, errorCode, string) {
	return b.createTopicWith(ctx, name, partitions, rf, nil, configs, validateOnly)
}

// createTopicWith is createTopic with an optional manual assignment. It
// returns once this broker has applied the new partitions' states (or
// ctx ends), so the topic is served as soon as CreateTopics answers.
func (b *Broker) createTopicWith(ctx context.Context, name string, partitions int32, rf int16, assignment [][]int32, configs map[string]string, validateOnly bool) (*topic, errorCode, string) {
	if err := checkTopicName(name); err != nil {
		return nil, errInvalidTopic, err.Error()
	}
	if partitions == -1 {
		partitions = b.cfg.NumPartitions
	}
	if rf == -1 {
		rf = b.cfg.DefaultReplicationFactor
	}
	if partitions <= 0 {
		return nil, errInvalidPartitions, "number of partitions must be at least 1"
	}
	if rf <= 0 {
		return nil, errInvalidReplicationFactor, "replication factor must be at least 1"
	}
	for k, v := range configs {
		if err := config.CheckTopicValue(k, v); err != nil {
			return nil, errInvalidConfig, err.Error()
		}
	}
	if _, err := config.ResolveTopic(b.cfg, configs); err != nil {
		return nil, errInvalidConfig, err.Error()
	}
	t, code, msg := func() (*topic, errorCode, string) {
		b.metaMu.Lock()
		defer b.metaMu.Unlock()
		if b.topic(name) != nil {
			return nil, errTopicAlreadyExists, fmt.Sprintf("topic %q already exists", name)
		}
		if collides := b.collidingTopicLocked(name); collides != "" {
			return nil, errInvalidTopic, fmt.Sprintf("topic %q collides with existing topic %q ('.' and '_' are the same in metric names)", name, collides)
		}
		return b.createClusterTopicLocked(ctx, name, partitions, rf, assignment, configs, validateOnly)
	}()
	if code == 0 && !validateOnly {
		b.waitPartitionStates(ctx, t.partitions)
	}
	return t, code, msg
}

// collidingTopicLocked finds an existing topic whose name differs from name
// only by '.' versus '_', which Kafka refuses.
func (b *Broker) collidingTopicLocked(name string) string {
	norm := strings.ReplaceAll(name, ".", "_")
	for _, n := range b.meta.Load().names() {
		if n != name && strings.ReplaceAll(n, ".", "_") == norm {
			return n
		}
	}
	return ""
}

// deleteTopic removes a topic from the store, then its logs.
func (b *Broker) deleteTopic(ctx context.Context, t *topic) (errorCode, string) {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	cur := b.topic(t.name)
	if cur == nil || cur.id != t.id {
		return errUnknownTopicOrPartition, fmt.Sprintf("topic %q does not exist", t.name)
	}
	// The cluster removes the keys; every broker (this one included)
	// drops its replicas in ApplyTopicDeleted.
	if code, msg, ok := b.storeUnreachable(); ok {
		return code, msg
	}
	b.metaMu.Unlock()
	defer b.metaMu.Lock()
	if err := b.cl.node.DeleteTopic(ctx, t.name); err != nil {
		return clusterErrorCode(err), err.Error()
	}
	b.waitTopicGone(ctx, t)
	return 0, ""
}

// waitPartitionStates waits until this broker has applied a state (a
// leader, or the knowledge that there is none yet) to each of ps, as the
// cluster's watcher delivers them, for at most a few seconds or until ctx
// ends.
func (b *Broker) waitPartitionStates(ctx context.Context, ps []*partition) {
	timer := time.NewTimer(applyWait)
	defer timer.Stop()
	for _, p := range ps {
		for {
			ch := p.HWChanged() // woken by every role or view change
			if p.State().View.Version > 0 {
				break
			}
			select {
			case <-ch:
			case <-timer.C:
				return
			case <-ctx.Done():
				return
			case <-b.stopCh:
				return
			}
		}
	}
}

// waitTopicGone waits until this broker has dropped t (ApplyTopicDeleted),
// for at most a few seconds or until ctx ends.
func (b *Broker) waitTopicGone(ctx context.Context, t *topic) {
	deadline := time.Now().Add(applyWait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if cur := b.topic(t.name); cur == nil || cur.id != t.id {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// applyWait bounds how long a topic change waits for this broker to apply
// it before answering.
const applyWait = 5 * time.Second

func (b *Broker) closeTopics() error {
	var logs []*log.Log
	for _, p := range b.meta.Load().allPartitions() {
		logs = append(logs, p.log)
	}
	err := log.CloseAll(logs)
	b.meta.Store(emptySnapshot())
	return err
}
