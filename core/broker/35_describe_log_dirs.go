package broker

// DescribeLogDirs v0-v4 (KIP-113): the one log directory (log.dirs) and,
// per partition replica this broker holds, its size and how far it is
// behind the leader's high watermark (OffsetLag; 0 on the leader).
//
// Version notes: v2 is flexible; v3 adds a top-level ErrorCode; v4 adds
// TotalBytes and UsableBytes of the directory's file system.
//
// A null Topics means every partition; named topics this broker does not
// know, or partitions it holds no replica of, are left out, as in Kafka.

import (
	"context"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/wire"
)

func handleDescribeLogDirs(b *Broker, _ context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.DescribeLogDirsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir, _ = filepath.Abs(b.cfg.LogDirs)
	dir.TotalBytes, dir.UsableBytes = -1, -1
	var fs unix.Statfs_t
	if unix.Statfs(b.cfg.LogDirs, &fs) == nil {
		dir.TotalBytes = int64(fs.Blocks) * int64(fs.Bsize)
		dir.UsableBytes = int64(fs.Bavail) * int64(fs.Bsize)
	}
	snap := b.meta.Load()
	add := func(t *topic, indexes []int32) {
		dt := kmsg.NewDescribeLogDirsResponseDirTopic()
		dt.Topic = t.name
		for _, i := range indexes {
			p := t.partition(i)
			if p == nil || !b.holdsReplica(p) {
				continue
			}
			dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			dp.Partition = i
			dp.Size = p.log.Size()
			if !p.IsLeader() {
				dp.OffsetLag = max(0, p.HighWatermark()-p.log.EndOffset())
			}
			dt.Partitions = append(dt.Partitions, dp)
		}
		if len(dt.Partitions) > 0 {
			dir.Topics = append(dir.Topics, dt)
		}
	}
	if r.Topics == nil {
		for _, name := range snap.names() {
			t := snap.byName[name]
			all := make([]int32, len(t.partitions))
			for i := range all {
				all[i] = int32(i)
			}
			add(t, all)
		}
	} else {
		for _, rt := range r.Topics {
			if t := snap.byName[rt.Topic]; t != nil {
				add(t, rt.Partitions)
			}
		}
	}
	resp.Dirs = []kmsg.DescribeLogDirsResponseDir{dir}
	return reply(resp)
}

// holdsReplica reports whether this broker is one of p's replicas.
func (b *Broker) holdsReplica(p *partition) bool {
	return slices.Contains(p.State().View.Replicas, b.cfg.NodeID)
}
