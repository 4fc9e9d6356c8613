package inspect

import (
	"context"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Broker is one broker as the cluster sees it. A broker named as a
// replica but absent from Metadata is down (its registration ended).
type Broker struct {
	ID       int32
	Host     string
	Port     int32
	Rack     string
	Up       bool
	Leaders  int   // partitions it leads
	Replicas int   // partition replicas it holds
	LogBytes int64 // bytes in its log dirs; -1 if it did not answer
}

// Cluster is the cluster's overview.
type Cluster struct {
	ID         string
	Controller int32
	Brokers    []Broker
	Topics     int
	Partitions int
	// UnderReplicated counts partitions whose ISR is smaller than their
	// replica set; Offline those without a leader.
	UnderReplicated, Offline int
}

// Topic is one topic's summary.
type Topic struct {
	Name            string
	Internal        bool
	Partitions      int
	Replication     int
	UnderReplicated int
	Offline         int
	Bytes           int64 // summed over the leaders' replicas
}

// Partition is one partition's state and offsets.
type Partition struct {
	ID              int32
	Leader          int32
	LeaderEpoch     int32
	Replicas, ISR   []int32
	UnderReplicated bool
	LogStart        int64
	LogEnd          int64 // the high watermark, as ListOffsets latest answers
	Bytes           int64 // the leader's replica; -1 if unknown
}

// Config is one topic config with its source.
type Config struct {
	Key, Value, Source string
	Sensitive          bool
}

// TopicDetail is one topic's partitions and configs.
type TopicDetail struct {
	Topic
	ID         string
	Parts      []Partition
	Configs    []Config
	ConfigsErr error
}

// Overview reads the cluster, its brokers and topic summaries.
func (in *Inspector) Overview(ctx context.Context) (Cluster, []Topic, error) {
	adm, err := in.Admin()
	if err != nil {
		return Cluster{}, nil, err
	}
	md, err := adm.Metadata(ctx)
	if err != nil {
		return Cluster{}, nil, err
	}
	sizes := in.logSizes(ctx, adm)
	c := Cluster{ID: md.Cluster, Controller: md.Controller}
	brokers := map[int32]*Broker{}
	for _, b := range md.Brokers {
		br := &Broker{ID: b.NodeID, Host: b.Host, Port: b.Port, Up: true, LogBytes: -1}
		if b.Rack != nil {
			br.Rack = *b.Rack
		}
		brokers[b.NodeID] = br
	}
	known := func(id int32) *Broker {
		if brokers[id] == nil {
			brokers[id] = &Broker{ID: id, LogBytes: -1}
		}
		return brokers[id]
	}
	var topics []Topic
	for _, t := range md.Topics.Sorted() {
		if t.Err != nil {
			continue
		}
		tv := Topic{Name: t.Topic, Internal: t.IsInternal, Partitions: len(t.Partitions)}
		for _, p := range t.Partitions {
			tv.Replication = max(tv.Replication, len(p.Replicas))
			for _, r := range p.Replicas {
				known(r).Replicas++
			}
			if p.Leader >= 0 {
				known(p.Leader).Leaders++
				if s, ok := sizes[p.Leader].LookupPartition(t.Topic, p.Partition); ok {
					tv.Bytes += s.Size
				}
			} else {
				tv.Offline++
			}
			if len(p.ISR) < len(p.Replicas) {
				tv.UnderReplicated++
			}
		}
		c.Topics++
		c.Partitions += tv.Partitions
		c.UnderReplicated += tv.UnderReplicated
		c.Offline += tv.Offline
		topics = append(topics, tv)
	}
	for id, ds := range sizes {
		if b := brokers[id]; b != nil && ds.Error() == nil {
			b.LogBytes = ds.Size()
		}
	}
	for _, b := range brokers {
		c.Brokers = append(c.Brokers, *b)
	}
	sort.Slice(c.Brokers, func(i, j int) bool { return c.Brokers[i].ID < c.Brokers[j].ID })
	return c, topics, nil
}

// logSizes asks every live broker for its log dirs; a broker that does
// not answer is simply missing.
func (in *Inspector) logSizes(ctx context.Context, adm *kadm.Client) kadm.DescribedAllLogDirs {
	ds, _ := adm.DescribeAllLogDirs(ctx, nil)
	return ds
}

// Topic reads one topic's partitions, offsets, sizes and configs. ok is
// false when the topic does not exist.
func (in *Inspector) Topic(ctx context.Context, name string) (td TopicDetail, ok bool, err error) {
	adm, err := in.Admin()
	if err != nil {
		return td, false, err
	}
	md, err := adm.Metadata(ctx, name)
	if err != nil {
		return td, false, err
	}
	t, found := md.Topics[name]
	if !found || t.Err != nil {
		return td, false, nil
	}
	sizes := in.logSizes(ctx, adm)
	starts, _ := adm.ListStartOffsets(ctx, name)
	ends, _ := adm.ListEndOffsets(ctx, name)
	td.Topic = Topic{Name: name, Internal: t.IsInternal, Partitions: len(t.Partitions)}
	td.ID = t.ID.String()
	for _, p := range t.Partitions.Sorted() {
		pv := Partition{ID: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
			Replicas: slices.Clone(p.Replicas), ISR: slices.Clone(p.ISR), LogStart: -1, LogEnd: -1, Bytes: -1}
		slices.Sort(pv.Replicas)
		slices.Sort(pv.ISR)
		pv.UnderReplicated = len(p.ISR) < len(p.Replicas)
		td.Replication = max(td.Replication, len(p.Replicas))
		if pv.UnderReplicated {
			td.UnderReplicated++
		}
		if p.Leader < 0 {
			td.Offline++
		}
		if o, ok := starts.Lookup(name, p.Partition); ok && o.Err == nil {
			pv.LogStart = o.Offset
		}
		if o, ok := ends.Lookup(name, p.Partition); ok && o.Err == nil {
			pv.LogEnd = o.Offset
		}
		if s, ok := sizes[p.Leader].LookupPartition(name, p.Partition); ok {
			pv.Bytes = s.Size
			td.Bytes += s.Size
		}
		td.Parts = append(td.Parts, pv)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, name)
	if err == nil {
		var rc kadm.ResourceConfig
		if rc, err = rcs.On(name, nil); err == nil {
			err = rc.Err
			for _, cf := range rc.Configs {
				cv := Config{Key: cf.Key, Source: cf.Source.String(), Sensitive: cf.Sensitive}
				if cf.Value != nil {
					cv.Value = *cf.Value
				}
				td.Configs = append(td.Configs, cv)
			}
		}
	}
	td.ConfigsErr = err
	sort.Slice(td.Configs, func(i, j int) bool { return td.Configs[i].Key < td.Configs[j].Key })
	return td, true, nil
}
