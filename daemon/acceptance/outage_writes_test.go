package acceptance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/daemon/daemontest"
)

// TestStoreOutageRefusesMetadataWrites takes the whole metadata store
// away from a three-broker cluster (core/cluster, "When the whole store
// is down") and sends every request that writes the store to every
// broker: CreateAcls, DeleteAcls, AlterUserScramCredentials,
// AlterClientQuotas, IncrementalAlterConfigs, AlterConfigs,
// CreatePartitions, DeleteTopics, AlterPartitionReassignments,
// CreateTopics and InitProducerId. Each must be answered (a broker that
// hung would fail the request with the client's timeout) with the
// retriable code a Kafka broker gives when its controller is unreachable:
// REQUEST_TIMED_OUT saying the metadata store is unreachable, and
// COORDINATOR_LOAD_IN_PROGRESS for InitProducerId. Once the store is
// back, nothing of them was applied, the same requests succeed, and an
// idempotent producer started during the outage (franz-go retries its
// InitProducerId) has its record written exactly once.
//
// The outage: ZooKeeper and etcd (one server, Debian packages zookeeper
// and etcd-server; skipped when missing) are killed with kill -9 and
// restarted on their data; the raft store runs on three controller-only
// voters (the brokers are non-voters), two of which are stopped with
// SIGSTOP, vltavad and its store plugin both, and continued. (Stopping
// the store plugin of a running broker would not last: the broker's
// plugin host kills and restarts a plugin that fails three health
// checks.)
func TestStoreOutageRefusesMetadataWrites(t *testing.T) {
	for _, store := range metadataStores {
		t.Run(store, func(t *testing.T) {
			cfg := map[string]string{"authorizer": "acl", "allow.everyone.if.no.acl.found": "true"}
			var c *daemontest.Cluster
			var down, up func()
			if store == "raft" {
				c = startClusterWith(t, daemontest.ClusterOptions{Brokers: 3, Controllers: 3, NonVoterBrokers: true}, cfg)
				down, up = stopVoters(t, c, 2)
			} else {
				var servers storeServers
				c, servers = startStoreEnsemble(t, store, 3, 1, cfg)
				restart := servers.(interface{ Restart(int) })
				down, up = func() { servers.Kill(0) }, func() { restart.Restart(0) }
			}
			outageWrites(t, c, down, up)
		})
	}
}

// stopVoters returns the outage of a raft cluster with controllers:
// SIGSTOP (then SIGCONT) n of its controllers, each with its process
// group (vltavad and its store plugin). They are continued when the test
// ends, whatever happened.
func stopVoters(t *testing.T, c *daemontest.Cluster, n int) (down, up func()) {
	var pids []int
	for _, p := range c.Controllers()[:n] {
		pids = append(pids, p.Pid())
	}
	stopped := false
	up = func() {
		if stopped {
			for _, pid := range pids {
				syscall.Kill(-pid, syscall.SIGCONT)
			}
			stopped = false
		}
	}
	t.Cleanup(up)
	down = func() {
		for _, pid := range pids {
			if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil {
				t.Fatalf("SIGSTOP controller process group %d: %v", pid, err)
			}
		}
		stopped = true
	}
	return down, up
}

// The topics of outageWrites: outageTopic is written to and reassigned,
// the others are given partitions, configs, or deleted.
const (
	outageTopic   = "outage"
	outageParts   = "outage-parts"
	outageConfigs = "outage-configs"
	outageDelete  = "outage-delete"
	outageCreate  = "outage-create"
)

// outageWrites runs TestStoreOutageRefusesMetadataWrites on a started
// cluster; down starts the outage and up ends it.
func outageWrites(t *testing.T, c *daemontest.Cluster, down, up func()) {
	for _, name := range []string{outageTopic, outageParts, outageConfigs, outageDelete} {
		createReplicated(t, c, name, 1, 3, nil)
	}
	waitConverged(t, c, outageTopic, 0, 3)
	cl := clusterClient(t, c)
	must(t, "create the ACL to delete", sendOK(t, cl, createACL(outagePreACL), 0))
	st, err := partitionState(t, clusterAdmin(t, c), outageTopic, 0)
	must(t, "partition state", err)
	target := slices.Clone(st.Replicas)
	slices.Reverse(target)
	writeCases := outageWriteCases(target)

	from := time.Now()
	t.Log("metadata store down")
	down()
	waitOutageMode(t, c, cl, from)

	// Every broker refuses every write, at once.
	for _, b := range c.Brokers() {
		bc := cl.Broker(int(b.NodeID()))
		for _, wc := range writeCases {
			start := time.Now()
			resp, err := bc.Request(testCtx(t, 30*time.Second), wc.req())
			took := time.Since(start)
			if err != nil {
				t.Errorf("broker %d, %s during the outage: %v after %v (want an answer)", b.NodeID(), wc.name, err, took)
				continue
			}
			code, msg := firstCode(resp)
			t.Logf("broker %d, %s during the outage: %v %q in %v", b.NodeID(), wc.name, kerr.ErrorForCode(code), msg, took.Round(time.Millisecond))
			if code != wc.refused || (wc.refused == kerr.RequestTimedOut.Code && !strings.Contains(msg, "metadata store")) {
				t.Errorf("broker %d, %s during the outage: %v %q, want %v saying the metadata store is unreachable",
					b.NodeID(), wc.name, kerr.ErrorForCode(code), msg, kerr.ErrorForCode(wc.refused))
			}
		}
	}
	// An idempotent producer started now gets no producer ID yet.
	produced := idempotentProduce(t, c, "written-once")
	select {
	case err := <-produced:
		t.Errorf("an idempotent producer started during the outage produced before the store came back (err %v)", err)
	case <-time.After(2 * time.Second):
	}

	up()
	back := time.Now()
	t.Log("metadata store back")
	afterOutage(t, c, cl, writeCases, produced, back)
}

// waitOutageMode waits until every broker refuses a metadata write (a
// quota for a client ID no test reads) saying the store is unreachable:
// the observable end of its lease, whether it leads on through the
// outage or, when a peer did not answer in time whether it reaches the
// store (a loaded machine), fenced itself (core/cluster lease.go).
func waitOutageMode(t *testing.T, c *daemontest.Cluster, cl *kgo.Client, from time.Time) {
	t.Helper()
	waitUntil(t, 30*time.Second, "every broker refusing metadata writes", func() error {
		for _, b := range c.Brokers() {
			resp, err := cl.Broker(int(b.NodeID())).Request(testCtx(t, 10*time.Second), setQuotaFor("outage-probe"))
			if err != nil {
				return fmt.Errorf("broker %d: %v", b.NodeID(), err)
			}
			code, msg := firstCode(resp)
			if code != kerr.RequestTimedOut.Code || !strings.Contains(msg, "metadata store") {
				return fmt.Errorf("broker %d takes metadata writes: %v %q", b.NodeID(), kerr.ErrorForCode(code), msg)
			}
		}
		return nil
	})
	t.Logf("every broker refuses metadata writes %v after the store went", time.Since(from).Round(time.Millisecond))
}

// afterOutage checks, once the store is back, that none of the refused
// writes was applied, that each succeeds now, and that the idempotent
// producer's record was written exactly once.
func afterOutage(t *testing.T, c *daemontest.Cluster, cl *kgo.Client, writeCases []writeCase, produced <-chan error, back time.Time) {
	// Nothing was applied: what each write would have changed is as
	// before, as soon as the cluster takes writes again.
	createAfterOutage(t, clusterAdmin(t, c))
	t.Logf("the cluster takes writes %v after the store came back", time.Since(back).Round(time.Millisecond))
	for _, wc := range writeCases {
		if wc.applied == nil {
			continue
		}
		if yes, what := wc.applied(t, cl); yes {
			t.Errorf("%s was refused during the outage but applied: %s", wc.name, what)
		}
	}
	// The same requests succeed now, and take effect.
	for _, wc := range writeCases {
		waitUntil(t, 30*time.Second, wc.name+" after the outage", func() error { return sendOK(t, cl, wc.req(), wc.alsoOK) })
		if wc.applied == nil {
			continue
		}
		waitUntil(t, 30*time.Second, wc.name+" in effect", func() error {
			if yes, what := wc.applied(t, cl); !yes {
				return errors.New(what)
			}
			return nil
		})
	}
	select {
	case err := <-produced:
		if err != nil {
			t.Fatalf("the idempotent producer started during the outage: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the idempotent producer started during the outage did not produce within 30s of the store's return")
	}
	n := 0
	for _, v := range readAllValues(t, c, outageTopic, 0) {
		if v == "written-once" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the idempotent producer's record is in %s/0 %d times, want once", outageTopic, n)
	}
}

// idempotentProduce produces value to outageTopic from a new idempotent
// producer (franz-go's default), in the background; the channel gets the
// outcome.
func idempotentProduce(t *testing.T, c *daemontest.Cluster, value string) <-chan error {
	cl := clusterClient(t, c, kgo.DefaultProduceTopic(outageTopic), kgo.RequiredAcks(kgo.AllISRAcks()))
	out := make(chan error, 1)
	cl.Produce(context.Background(), &kgo.Record{Value: []byte(value)}, func(_ *kgo.Record, err error) { out <- err })
	return out
}

// must fails the test on err, naming what.
func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// firstCode is a response's first error code and message, for the
// requests of writeCases.
func firstCode(resp kmsg.Response) (int16, string) {
	msg := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	switch r := resp.(type) {
	case *kmsg.CreateACLsResponse:
		return r.Results[0].ErrorCode, msg(r.Results[0].ErrorMessage)
	case *kmsg.DeleteACLsResponse:
		if r.Results[0].ErrorCode == 0 && len(r.Results[0].MatchingACLs) == 1 {
			return r.Results[0].MatchingACLs[0].ErrorCode, msg(r.Results[0].MatchingACLs[0].ErrorMessage)
		}
		return r.Results[0].ErrorCode, msg(r.Results[0].ErrorMessage)
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		return r.Results[0].ErrorCode, msg(r.Results[0].ErrorMessage)
	case *kmsg.AlterClientQuotasResponse:
		return r.Entries[0].ErrorCode, msg(r.Entries[0].ErrorMessage)
	case *kmsg.IncrementalAlterConfigsResponse:
		return r.Resources[0].ErrorCode, msg(r.Resources[0].ErrorMessage)
	case *kmsg.AlterConfigsResponse:
		return r.Resources[0].ErrorCode, msg(r.Resources[0].ErrorMessage)
	case *kmsg.CreatePartitionsResponse:
		return r.Topics[0].ErrorCode, msg(r.Topics[0].ErrorMessage)
	case *kmsg.DeleteTopicsResponse:
		return r.Topics[0].ErrorCode, msg(r.Topics[0].ErrorMessage)
	case *kmsg.AlterPartitionAssignmentsResponse:
		if r.ErrorCode != 0 {
			return r.ErrorCode, msg(r.ErrorMessage)
		}
		return r.Topics[0].Partitions[0].ErrorCode, msg(r.Topics[0].Partitions[0].ErrorMessage)
	case *kmsg.CreateTopicsResponse:
		return r.Topics[0].ErrorCode, msg(r.Topics[0].ErrorMessage)
	case *kmsg.InitProducerIDResponse:
		return r.ErrorCode, ""
	}
	panic(fmt.Sprintf("firstCode: %T", resp))
}
