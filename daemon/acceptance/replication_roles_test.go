package acceptance

import (
	"strings"
	"testing"

	"github.com/vltava/vltava/daemon/daemontest"
)

// twoBrokerFailover kills the leader of an RF=2 partition in a two-broker
// cluster and checks that the metadata quorum still commits: a new leader
// is elected and the ISR shrinks, then grows back after the restart.
func twoBrokerFailover(t *testing.T, c *daemontest.Cluster, topic string) {
	t.Helper()
	createReplicated(t, c, topic, 1, 2, map[string]string{"min.insync.replicas": "1"})
	leader := waitLeader(t, c, topic, 0, 0)
	c.Broker(leader).Kill9()
	if got := waitLeader(t, c, topic, 0, leader); got == leader {
		t.Fatalf("leader still %d", got)
	}
	waitISR(t, c, topic, 0, 1)
	c.Broker(leader).Restart(t)
	waitISR(t, c, topic, 0, 2)
}

// TestTwoBrokersAndAController: two combined brokers plus one
// controller-only voter make a three-voter quorum, so losing a broker
// leaves a majority (FINDINGS.md V3). The controller exits cleanly on
// SIGTERM.
func TestTwoBrokersAndAController(t *testing.T) {
	extra := map[string]string{"default.replication.factor": "2", "offsets.topic.replication.factor": "2"}
	c := startClusterWith(t, daemontest.ClusterOptions{Brokers: 2, Controllers: 1}, extra)
	if got := c.Voters(); strings.Count(got, "@") != 3 {
		t.Fatalf("voters %q, want 3", got)
	}
	twoBrokerFailover(t, c, "roles-combined")
	ctrl := c.Controllers()[0]
	if err := ctrl.Stop(); err != nil {
		t.Fatalf("controller stop: %v\n%s", err, tail(ctrl.Log(), 40))
	}
	log := ctrl.Log()
	for _, want := range []string{"vltavad controller ready", "shut down cleanly"} {
		if !strings.Contains(log, want) {
			t.Errorf("controller log lacks %q:\n%s", want, tail(log, 40))
		}
	}
	if strings.Contains(log, "listening on") {
		t.Errorf("controller-only process served Kafka:\n%s", tail(log, 40))
	}
}

// TestNonVoterBrokers: brokers with process.roles=broker use the quorum of
// three controller-only voters without voting (Kafka's isolated mode).
func TestNonVoterBrokers(t *testing.T) {
	extra := map[string]string{"default.replication.factor": "2", "offsets.topic.replication.factor": "2"}
	c := startClusterWith(t, daemontest.ClusterOptions{Brokers: 2, Controllers: 3, NonVoterBrokers: true}, extra)
	if got := c.Voters(); strings.HasPrefix(got, "1@") || strings.Contains(got, ",2@") {
		t.Fatalf("voters %q list a broker", got)
	}
	twoBrokerFailover(t, c, "roles-isolated")
	if log := c.Broker(1).Log(); !strings.Contains(log, "non-voter") {
		t.Errorf("broker 1 log does not mention joining as a non-voter:\n%s", tail(log, 40))
	}
}
