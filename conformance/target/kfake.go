package target

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kfake runs franz-go's fake cluster in process. It has many brokers but
// no real replication (followers are bookkeeping only) and no process to
// kill; faults come from its request hooks instead.
type Kfake struct{}

// Name implements Target.
func (Kfake) Name() string { return "kfake" }

// Facts implements Target.
func (Kfake) Facts() Caps {
	return Caps{"kill9": false, "stop": false, "restart": false, "rawtcp": true,
		"multibroker": true, "replication": false, "faults": true, "brokerconfig": true, "sasl": true}
}

// Software implements softwarer.
func (Kfake) Software() string {
	v := moduleVersion("github.com/twmb/franz-go/pkg/kfake")
	if v == "" {
		v = "(version unknown)"
	}
	return "github.com/twmb/franz-go/pkg/kfake " + v + ", in process"
}

// Start implements Target.
func (Kfake) Start(_ context.Context, o Options) (Cluster, error) {
	opts := []kfake.Opt{kfake.NumBrokers(max(o.Brokers, 1))}
	if len(o.Config) > 0 {
		cfg := maps.Clone(o.Config)
		// kfake runs retention on the cleaner's ticker.
		if v, ok := cfg["log.retention.check.interval.ms"]; ok {
			delete(cfg, "log.retention.check.interval.ms")
			cfg["log.cleaner.backoff.ms"] = v
		}
		opts = append(opts, kfake.BrokerConfigs(cfg))
	}
	if o.SASL {
		opts = append(opts, kfake.EnableSASL(), kfake.Superuser("PLAIN", Superuser, SuperuserPassword))
		for u, p := range o.Users {
			opts = append(opts, kfake.User("PLAIN", u, p))
		}
	}
	if o.ACLs {
		opts = append(opts, kfake.EnableACLs())
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("target: kfake: %w", err)
	}
	return &kfakeCluster{c: c}, nil
}

type kfakeCluster struct {
	c      *kfake.Cluster
	mu     sync.Mutex
	faults []*kfake.FaultHandle
}

func (k *kfakeCluster) Bootstrap() []string { return k.c.ListenAddrs() }

func (k *kfakeCluster) Kill9(int32) error {
	return fmt.Errorf("%w: kfake brokers cannot be killed", ErrUnsupported)
}
func (k *kfakeCluster) Stop(int32) error {
	return fmt.Errorf("%w: kfake brokers cannot be stopped", ErrUnsupported)
}
func (k *kfakeCluster) Cont(int32) error {
	return fmt.Errorf("%w: kfake brokers cannot be stopped", ErrUnsupported)
}
func (k *kfakeCluster) Restart(int32) error {
	return fmt.Errorf("%w: kfake brokers cannot be restarted", ErrUnsupported)
}

func (k *kfakeCluster) Close() error {
	k.c.Close()
	return nil
}

// Fault implements Faulter with kfake's Fault hook.
func (k *kfakeCluster) Fault(key int16, errName string, count int) error {
	e := ErrorByName(errName)
	if e == nil {
		return fmt.Errorf("target: unknown Kafka error %q", errName)
	}
	h := k.c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Key(key)}, Err: e, Count: count})
	k.mu.Lock()
	k.faults = append(k.faults, h)
	k.mu.Unlock()
	return nil
}

// ClearFaults implements Faulter.
func (k *kfakeCluster) ClearFaults() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, h := range k.faults {
		h.Remove()
	}
	k.faults = nil
}

// ErrorByName returns the Kafka error named name (e.g.
// "OUT_OF_ORDER_SEQUENCE_NUMBER"), or nil.
func ErrorByName(name string) *kerr.Error {
	for code := int16(-1); code < 200; code++ {
		if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok && e.Message == name {
			return e
		}
	}
	return nil
}
