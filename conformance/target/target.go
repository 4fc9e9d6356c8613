// Package target says how the conformance suite reaches a system under
// test: how to start a cluster, address it, and kill, stop, continue or
// restart one of its brokers. Three targets exist: vltava (vltavad
// processes), kfake (franz-go's fake cluster, in process) and external
// (any running cluster plus optional shell hooks).
//
// Capabilities are named facts ("kill9", "groups", ...) that scripts guard
// on with [!cap:NAME]. Some come from the target (only a process can be
// killed with SIGKILL); the protocol ones come from ApiVersions of a
// running broker, so a capability appears the day a broker advertises it.
package target

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrUnsupported is returned for an operation the target cannot do; the
// capability guarding it should have been missing.
var ErrUnsupported = errors.New("target: unsupported")

// Options shape a cluster.
type Options struct {
	Brokers int               // number of brokers, at least 1
	Config  map[string]string // broker config keys (Kafka names)
	// SASL starts the cluster with SASL/PLAIN required on its listener,
	// the superuser Superuser and the users Users (name -> password);
	// ACLs turns authorization on (superusers bypass it). Only targets
	// with the sasl capability honor them.
	SASL  bool
	ACLs  bool
	Users map[string]string
}

// The superuser of SASL clusters (Options.SASL).
const (
	Superuser         = "admin"
	SuperuserPassword = "admin-secret"
)

// Target starts clusters of one kind.
type Target interface {
	Name() string
	// Facts are the capabilities the target has regardless of what the
	// brokers advertise (kill9, stop, restart, multibroker, ...).
	Facts() Caps
	Start(ctx context.Context, o Options) (Cluster, error)
}

// Cluster is one running cluster.
type Cluster interface {
	// Bootstrap is the seed broker list.
	Bootstrap() []string
	// Kill9 kills broker node as a crash would (SIGKILL).
	Kill9(node int32) error
	// Stop pauses broker node (SIGSTOP); Cont resumes it.
	Stop(node int32) error
	Cont(node int32) error
	// Restart stops broker node cleanly (SIGTERM) and starts it again
	// with the same data; a killed broker is just started.
	Restart(node int32) error
	// Close stops everything the cluster started.
	Close() error
}

// Faulter is a cluster that can fail requests on demand (kfake).
type Faulter interface {
	// Fault makes the next count requests of API key fail with the
	// Kafka error errName (count -1: until cleared); if applied, the
	// broker still does the work (REQUEST_TIMED_OUT on Produce).
	Fault(key int16, errName string, count int) error
	ClearFaults()
}

// Caps is a set of capability names (without the "cap:" prefix).
type Caps map[string]bool

// String lists the capabilities, sorted.
func (c Caps) String() string {
	var names []string
	for k, v := range c {
		if v {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// apiCaps maps a capability to the API keys a broker must advertise.
var apiCaps = map[string][]int16{
	"idempotence":      {22},                       // InitProducerId
	"deleterecords":    {21},                       // DeleteRecords
	"alterconfig":      {44},                       // IncrementalAlterConfigs
	"describeconfig":   {32},                       // DescribeConfigs
	"createpartitions": {37},                       // CreatePartitions
	"deletetopics":     {20},                       // DeleteTopics
	"groups":           {8, 9, 10, 11, 12, 13, 14}, // commit, fetch offsets, coordinator, join, heartbeat, leave, sync
	"kip848":           {8, 9, 10, 68},             // ConsumerGroupHeartbeat
	"transactions":     {22, 24, 25, 26, 28},       // AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit
	"leaderepoch":      {23},                       // OffsetForLeaderEpoch
	"acls":             {29, 30, 31},               // DescribeAcls, CreateAcls, DeleteAcls
	"quotas":           {48, 49},                   // DescribeClientQuotas, AlterClientQuotas
}

// versionCaps maps a capability to an API key and the least maximum
// version a broker must advertise for it.
var versionCaps = map[string]struct{ key, min int16 }{
	"kip890p2": {26, 5}, // EndTxn v5: an epoch bump per transaction (KIP-890 part 2)
}

// factCaps are the capabilities a target states about itself (Facts).
var factCaps = map[string]string{
	"kill9":        "a broker can be killed with SIGKILL (external: VLTAVA_CONFORMANCE_KILL_CMD)",
	"stop":         "a broker can be paused and resumed (external: VLTAVA_CONFORMANCE_STOP_CMD and _CONT_CMD)",
	"restart":      "a broker can be restarted cleanly (external: VLTAVA_CONFORMANCE_RESTART_CMD)",
	"rawtcp":       "hand-built frames can reach a broker over TCP",
	"multibroker":  "clusters of several brokers",
	"replication":  "partitions replicated across brokers (rf > 1)",
	"faults":       "Kafka errors injected on demand (fault)",
	"brokerconfig": "cluster start applies broker configs (-config); elsewhere -require checks them",
	"sasl":         "cluster start -sasl: a cluster requiring SASL/PLAIN with the suite's users",
}

// KnownCaps returns every capability name, sorted, with what it means.
func KnownCaps() map[string]string {
	out := map[string]string{}
	for k, v := range factCaps {
		out[k] = v
	}
	for k, keys := range apiCaps {
		var names []string
		for _, key := range keys {
			names = append(names, kmsg.NameForKey(key))
		}
		out[k] = "the broker advertises " + strings.Join(names, ", ")
	}
	for k, v := range versionCaps {
		out[k] = fmt.Sprintf("the broker advertises %s v%d", kmsg.NameForKey(v.key), v.min)
	}
	return out
}

// ValidCap reports whether name is a capability the suite knows.
func ValidCap(name string) bool {
	_, fact := factCaps[name]
	_, api := apiCaps[name]
	_, version := versionCaps[name]
	return fact || api || version
}

// CapsFromAPIs derives protocol capabilities from advertised API keys.
func CapsFromAPIs(keys []int16) Caps {
	c := Caps{}
	for name, need := range apiCaps {
		ok := true
		for _, k := range need {
			ok = ok && slices.Contains(keys, k)
		}
		c[name] = ok
	}
	return c
}

// CapsFromVersions derives the version capabilities from advertised API
// ranges.
func CapsFromVersions(apis []APIRange) Caps {
	c := Caps{}
	for name, need := range versionCaps {
		c[name] = slices.ContainsFunc(apis, func(a APIRange) bool { return a.Key == need.key && a.Max >= need.min })
	}
	return c
}

// ByName returns the target called name, configured from the
// environment where it needs more (see NewExternal). vltavad is the
// daemon binary for the vltava target.
func ByName(name, vltavad string, env func(string) string) (Target, error) {
	switch name {
	case "vltava":
		if vltavad == "" {
			return nil, errors.New("target: vltava needs the vltavad binary")
		}
		return &Vltava{Bin: vltavad}, nil
	case "kfake":
		return Kfake{}, nil
	case "external":
		return NewExternal(env)
	}
	return nil, fmt.Errorf("target: unknown target %q (want vltava, kfake or external)", name)
}
