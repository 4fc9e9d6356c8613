package broker

import (
	"context"
	"encoding/hex"
	"errors"
	"maps"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/vltava/vltava/core/cluster"
	"github.com/vltava/vltava/core/config"
)

// Topic configs in cluster mode. AlterConfigs and IncrementalAlterConfigs
// write /topics/<name> through core/cluster (AlterTopicConfigs: a
// compare-and-set that keeps the replica assignment as read); every
// broker, the one that took the request included, hears the new record
// through cluster.TopicApplier and re-resolves the topic's configs on
// its partitions, so retention, segment size, cleanup.policy and
// min.insync.replicas hold on followers as on the leader.

var _ cluster.TopicApplier = clusterApplier{}

// ApplyTopic implements cluster.TopicApplier.
func (a clusterApplier) ApplyTopic(ct cluster.Topic) {
	if err := a.b.applyTopicRecord(ct); err != nil {
		a.b.logger.Error("broker: apply topic record", "topic", ct.Name, "err", err)
	}
}

// applyTopicRecord publishes a topic record read from the cluster: new
// configs reach every partition's log, new partitions are opened. A
// topic this broker has not opened yet is left to ApplyPartition, a
// record no newer than the one held is ignored.
func (b *Broker) applyTopicRecord(ct cluster.Topic) error {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	prev := b.topic(ct.Name)
	if prev == nil || prev.version >= ct.Version || hex.EncodeToString(prev.id[:]) != ct.ID {
		return nil
	}
	rec := cluster.TopicRecord{ID: ct.ID, Partitions: ct.Partitions, Configs: ct.Configs, Replicas: ct.Replicas}
	if rec.Partitions < int32(len(prev.partitions)) {
		rec.Partitions = int32(len(prev.partitions)) // partitions are never removed
	}
	t, err := b.openTopic(ct.Name, rec, ct.Version, prev)
	if err != nil {
		return err
	}
	if !maps.Equal(prev.overrides, t.overrides) {
		for _, p := range t.partitions {
			p.setConfig(t.cfg)
		}
		b.logger.Info("broker: topic configs changed", "topic", ct.Name, "configs", t.overrides)
	}
	b.meta.Store(b.meta.Load().with(t))
	return nil
}

// alterClusterTopicConfigs is alterConfigs in cluster mode: edit runs on
// the overrides as stored, the result is validated and written through
// the cluster, then published here at once (the watcher's ApplyTopic
// for the same version is then a no-op).
func (b *Broker) alterClusterTopicConfigs(ctx context.Context, name string, edit func(cur map[string]string) (map[string]string, errorCode, string)) (errorCode, string) {
	// AlterConfigs carries no timeout: bound the store's part
	// (beginStoreWrite), refused at once while the store is unreachable.
	wctx, cancel, err := b.beginStoreWrite(ctx)
	defer cancel()
	if err != nil {
		return storeErrorCode(err), err.Error()
	}
	var code errorCode
	var msg string
	ct, err := b.cl.node.AlterTopicConfigs(wctx, name, func(cur map[string]string) (map[string]string, error) {
		next, c, m := edit(cur)
		if c == 0 {
			c, m = checkTopicConfigs(b.cfg, next)
		}
		if c != 0 {
			code, msg = c, m
			return nil, errEditRefused
		}
		return next, nil
	})
	if errors.Is(err, errEditRefused) {
		return code, msg
	}
	if err != nil {
		return clusterErrorCode(err), err.Error()
	}
	if err := b.applyTopicRecord(ct); err != nil {
		b.logger.Error("broker: alter configs", "topic", name, "err", err)
		return errKafkaStorage, err.Error()
	}
	b.logger.Info("broker: altered topic configs", "topic", name, "configs", ct.Configs)
	return 0, ""
}

// errEditRefused carries a refused edit out of AlterTopicConfigs; the
// code and message travel beside it.
var errEditRefused = errors.New("broker: config edit refused")

// checkTopicConfigs validates a full set of topic overrides.
func checkTopicConfigs(cfg config.Broker, configs map[string]string) (errorCode, string) {
	for k, v := range configs {
		if err := config.CheckTopicValue(k, v); err != nil {
			return kerr.InvalidConfig.Code, err.Error()
		}
	}
	if _, err := config.ResolveTopic(cfg, configs); err != nil {
		return kerr.InvalidConfig.Code, err.Error()
	}
	return 0, ""
}
