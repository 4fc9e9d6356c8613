package group

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vltava/vltava/plugins/sdk"

	"github.com/vltava/vltava/core/invariant"
)

// Config is the coordinator's share of the broker configuration.
type Config struct {
	// OffsetsPartitions is offsets.topic.num.partitions: how many
	// partitions __consumer_offsets has (default 50).
	OffsetsPartitions int32
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms: how long
	// the first rebalance of an empty group waits for more members.
	InitialRebalanceDelay time.Duration
	// MinSessionTimeout and MaxSessionTimeout bound a classic member's
	// session.timeout.ms (group.min/max.session.timeout.ms).
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// ConsumerSessionTimeout and ConsumerHeartbeatInterval are
	// group.consumer.session.timeout.ms and
	// group.consumer.heartbeat.interval.ms (KIP-848 groups).
	ConsumerSessionTimeout, ConsumerHeartbeatInterval time.Duration
	// OffsetsRetention is offsets.retention.minutes; OffsetsRetentionCheck
	// is offsets.retention.check.interval.ms.
	OffsetsRetention, OffsetsRetentionCheck time.Duration
	// MaxMetadataBytes is offset.metadata.max.bytes.
	MaxMetadataBytes int
	// Assignors serve KIP-848 groups, in preference order: the first is
	// the default when members name none (group.consumer.assignors).
	Assignors []sdk.Assignor
	// Topics is the broker's view of topics, read on each request.
	Topics Topics
	// Logger receives the coordinator's log; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns Kafka's defaults (without assignors or topics).
func DefaultConfig() Config {
	return Config{
		OffsetsPartitions:         50,
		InitialRebalanceDelay:     3 * time.Second,
		MinSessionTimeout:         6 * time.Second,
		MaxSessionTimeout:         30 * time.Minute,
		ConsumerSessionTimeout:    45 * time.Second,
		ConsumerHeartbeatInterval: 5 * time.Second,
		OffsetsRetention:          7 * 24 * time.Hour,
		OffsetsRetentionCheck:     10 * time.Minute,
		MaxMetadataBytes:          4096,
	}
}

// TopicInfo describes one topic as the coordinator needs it.
type TopicInfo struct {
	Name       string
	ID         [16]byte
	Partitions int32
}

// Topics is a read-only view of the broker's topics.
type Topics interface {
	// Topic looks a topic up by name.
	Topic(name string) (TopicInfo, bool)
	// TopicByID looks a topic up by ID.
	TopicByID(id [16]byte) (TopicInfo, bool)
	// Names returns every topic name, sorted.
	Names() []string
}

// Client identifies the connection a request came from.
type Client struct {
	ID   string // client.id
	Host string // the peer's address, as DescribeGroups reports it
}

// Waiter identifies a request whose response may come later (JoinGroup,
// SyncGroup) or only once records are durable. The caller chooses the
// values; the coordinator only compares them and hands them back.
type Waiter any

// Record is one record for __consumer_offsets. Value nil is a tombstone.
type Record struct {
	Partition  int32
	Key, Value []byte
	// Txn marks a transactional offset commit (txn_offsets.go): the
	// caller writes it in a transactional batch of ProducerID at
	// ProducerEpoch, and it stays pending until the transaction's marker.
	Txn           bool
	ProducerID    int64
	ProducerEpoch int16
}

// Reply is a response for a Waiter.
type Reply struct {
	To   Waiter
	Resp kmsg.Response
	// Durable replies may be sent only after the Output's Records are
	// appended; if that fails the caller answers with FailReply instead.
	Durable bool
}

// Output is what a step asks of its caller: append Records to
// __consumer_offsets (in order), then send Replies.
type Output struct {
	Records []Record
	Replies []Reply
}

func (o *Output) reply(to Waiter, resp kmsg.Response) {
	o.Replies = append(o.Replies, Reply{To: to, Resp: resp})
}

// Coordinator is the group coordinator of one broker: every classic and
// KIP-848 group and their committed offsets. It does no I/O: each method
// takes the time and returns an Output for the caller to carry out. It is
// not safe for concurrent use; the caller serializes calls.
type Coordinator struct {
	cfg    Config
	logger *slog.Logger
	groups map[string]*group
	// parts holds the __consumer_offsets partitions this coordinator
	// loads or has loaded (load.go); only their groups are served.
	//
	// INVARIANT: every group in groups belongs to a Loaded partition
	// (Replay, for tests and tools, is the exception).
	parts map[int32]Ownership
	// nextRetention is when offsets retention next runs.
	nextRetention time.Time
	// txnOffsets are the offsets of open transactions (txn_offsets.go):
	// group -> producer ID -> partition -> offset.
	txnOffsets map[string]map[int64]map[tp]offset
}

// New returns an empty coordinator that owns no partition: every group
// is answered NOT_COORDINATOR until its __consumer_offsets partition is
// loaded (BeginLoad, FinishLoad).
func New(cfg Config) *Coordinator {
	if cfg.OffsetsPartitions <= 0 {
		cfg.OffsetsPartitions = 50
	}
	if cfg.MaxMetadataBytes <= 0 {
		cfg.MaxMetadataBytes = 4096
	}
	if cfg.OffsetsRetentionCheck <= 0 {
		cfg.OffsetsRetentionCheck = 10 * time.Minute
	}
	if cfg.Topics == nil {
		cfg.Topics = noTopics{}
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	return &Coordinator{cfg: cfg, logger: logger, groups: map[string]*group{}, parts: map[int32]Ownership{}}
}

type noTopics struct{}

func (noTopics) Topic(string) (TopicInfo, bool)       { return TopicInfo{}, false }
func (noTopics) TopicByID([16]byte) (TopicInfo, bool) { return TopicInfo{}, false }
func (noTopics) Names() []string                      { return nil }

// PartitionFor is the __consumer_offsets partition that holds group:
// abs(javaStringHashCode(group)) % partitions, as Kafka computes it.
func PartitionFor(group string, partitions int32) int32 {
	var h int32
	for _, r := range utf16Units(group) {
		h = 31*h + int32(r)
	}
	if h == -2147483648 { // Kafka's Utils.abs maps MinValue to 0
		h = 0
	}
	if h < 0 {
		h = -h
	}
	return h % partitions
}

// utf16Units returns s as Java chars, which String.hashCode iterates.
func utf16Units(s string) []uint16 {
	var out []uint16
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			out = append(out, uint16(0xD800+(r>>10)), uint16(0xDC00+(r&0x3FF)))
			continue
		}
		out = append(out, uint16(r))
	}
	return out
}

// partitionFor is PartitionFor with the configured partition count.
func (c *Coordinator) partitionFor(group string) int32 {
	return PartitionFor(group, c.cfg.OffsetsPartitions)
}

// NextDeadline is the earliest time Tick has work to do; the zero time if
// there is none.
func (c *Coordinator) NextDeadline() time.Time {
	next := c.nextRetention
	take := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, g := range c.groups {
		take(g.nextDeadline())
	}
	return next
}

// Tick runs everything due at now: session expiry, rebalance and initial
// delay deadlines, revocation timeouts and offsets retention.
func (c *Coordinator) Tick(now time.Time) Output {
	if invariant.Enabled {
		defer c.checkInvariants()
	}
	var out Output
	for _, id := range sortedKeys(c.groups) {
		g := c.groups[id]
		switch {
		case g.classic != nil:
			c.tickClassic(now, g, &out)
		case g.consumer != nil:
			c.tickConsumer(context.Background(), now, g, &out)
			c.persistConsumer(g, &out)
		}
	}
	if c.nextRetention.IsZero() {
		c.nextRetention = now.Add(c.cfg.OffsetsRetentionCheck)
	} else if !now.Before(c.nextRetention) {
		c.expireOffsets(now, &out)
		c.nextRetention = now.Add(c.cfg.OffsetsRetentionCheck)
	}
	return out
}

// FailReply rewrites a durable reply whose records could not be appended
// so that the client sees code instead of success.
func FailReply(resp kmsg.Response, code int16) kmsg.Response {
	switch r := resp.(type) {
	case *kmsg.OffsetCommitResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				if r.Topics[i].Partitions[j].ErrorCode == 0 {
					r.Topics[i].Partitions[j].ErrorCode = code
				}
			}
		}
	case *kmsg.SyncGroupResponse:
		r.ErrorCode, r.MemberAssignment = code, nil
	case *kmsg.DeleteGroupsResponse:
		for i := range r.Groups {
			if r.Groups[i].ErrorCode == 0 {
				r.Groups[i].ErrorCode = code
			}
		}
	case *kmsg.OffsetDeleteResponse:
		r.ErrorCode = code
	case *kmsg.ConsumerGroupHeartbeatResponse:
		r.ErrorCode, r.Assignment = code, nil
	}
	return resp
}

// errStorage is the code a durable reply gets when its append failed.
var errStorage = kerr.CoordinatorNotAvailable.Code

// StorageErrorCode is the code the caller passes to FailReply when an
// append to __consumer_offsets fails: retriable, as in Kafka.
func StorageErrorCode() int16 { return errStorage }

func newMemberID(clientID string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	return clientID + "-" + id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:]
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// ptr returns a pointer to a copy of s. Responses must never point into
// the coordinator's state: the caller encodes them after its lock is
// released, while later steps change that state.
func ptr(s string) *string { return &s }
