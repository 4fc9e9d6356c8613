package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/vltava/vltava/core/config"
)

// kafkaBrokerKeys are Apache Kafka's broker config names (from its broker
// configuration reference, Kafka 3.x and 4.x, plus the ZooKeeper-era keys
// still found in old files). A config file key that Vltava does not have
// but that is in this list is Kafka's: vltavad warns once that it has no
// effect here and goes on, so a stock server.properties loads. A key in
// neither is a mistake and stops the broker.
var kafkaBrokerKeys = strings.Fields(`
advertised.host.name advertised.listeners advertised.port alter.config.policy.class.name
alter.log.dirs.replication.quota.window.num alter.log.dirs.replication.quota.window.size.seconds
authorizer.class.name auto.create.topics.enable auto.include.jmx.reporter auto.leader.rebalance.enable
background.threads broker.heartbeat.interval.ms broker.id broker.id.generation.enable broker.rack
broker.session.timeout.ms client.quota.callback.class client.telemetry.max.bytes
compression.gzip.level compression.lz4.level compression.type compression.zstd.level
connection.failed.authentication.delay.ms connections.max.idle.ms connections.max.reauth.ms
control.plane.listener.name controlled.shutdown.enable controlled.shutdown.max.retries
controlled.shutdown.retry.backoff.ms controller.listener.names controller.quorum.append.linger.ms
controller.quorum.bootstrap.servers controller.quorum.election.backoff.max.ms
controller.quorum.election.timeout.ms controller.quorum.fetch.timeout.ms
controller.quorum.request.timeout.ms controller.quorum.retry.backoff.ms controller.quorum.voters
controller.quota.window.num controller.quota.window.size.seconds controller.socket.timeout.ms
create.topic.policy.class.name default.replication.factor delegation.token.expiry.check.interval.ms
delegation.token.expiry.time.ms delegation.token.master.key delegation.token.max.lifetime.ms
delegation.token.secret.key delete.records.purgatory.purge.interval.requests delete.topic.enable
early.start.listeners eligible.leader.replicas.enable fetch.max.bytes fetch.purgatory.purge.interval.requests
group.consumer.assignors group.consumer.heartbeat.interval.ms group.consumer.max.heartbeat.interval.ms
group.consumer.max.session.timeout.ms group.consumer.max.size group.consumer.migration.policy
group.consumer.min.heartbeat.interval.ms group.consumer.min.session.timeout.ms
group.consumer.session.timeout.ms group.coordinator.append.linger.ms group.coordinator.new.enable
group.coordinator.rebalance.protocols group.coordinator.threads group.initial.rebalance.delay.ms
group.max.session.timeout.ms group.max.size group.min.session.timeout.ms group.share.enable
group.share.heartbeat.interval.ms group.share.max.groups group.share.max.size
group.share.record.lock.duration.ms group.share.session.timeout.ms initial.broker.registration.timeout.ms
inter.broker.listener.name inter.broker.protocol.version kafka.metrics.polling.interval.secs
kafka.metrics.reporters leader.imbalance.check.interval.seconds leader.imbalance.per.broker.percentage
listener.security.protocol.map listeners log.cleaner.backoff.ms log.cleaner.dedupe.buffer.size
log.cleaner.delete.retention.ms log.cleaner.enable log.cleaner.io.buffer.load.factor
log.cleaner.io.buffer.size log.cleaner.io.max.bytes.per.second log.cleaner.max.compaction.lag.ms
log.cleaner.min.cleanable.ratio log.cleaner.min.compaction.lag.ms log.cleaner.threads
log.cleanup.policy log.dir log.dir.failure.timeout.ms log.dirs log.flush.interval.messages
log.flush.interval.ms log.flush.offset.checkpoint.interval.ms log.flush.scheduler.interval.ms
log.flush.start.offset.checkpoint.interval.ms log.index.interval.bytes log.index.size.max.bytes
log.initial.task.delay.ms log.local.retention.bytes log.local.retention.ms
log.message.downconversion.enable log.message.format.version log.message.timestamp.after.max.ms
log.message.timestamp.before.max.ms log.message.timestamp.difference.max.ms
log.message.timestamp.type log.preallocate log.retention.bytes log.retention.check.interval.ms
log.retention.hours log.retention.minutes log.retention.ms log.roll.hours log.roll.jitter.hours
log.roll.jitter.ms log.roll.ms log.segment.bytes log.segment.delete.delay.ms
max.connection.creation.rate max.connections max.connections.per.ip max.connections.per.ip.overrides
max.incremental.fetch.session.cache.slots max.request.partition.size.limit message.max.bytes
metadata.log.dir metadata.log.max.record.bytes.between.snapshots metadata.log.max.snapshot.interval.ms
metadata.log.segment.bytes metadata.log.segment.ms metadata.max.idle.interval.ms
metadata.max.retention.bytes metadata.max.retention.ms metric.reporters metrics.num.samples
metrics.recording.level metrics.sample.window.ms min.insync.replicas node.id num.io.threads
num.network.threads num.partitions num.recovery.threads.per.data.dir num.replica.alter.log.dirs.threads
num.replica.fetchers offset.metadata.max.bytes offsets.commit.required.acks offsets.commit.timeout.ms
offsets.load.buffer.size offsets.retention.check.interval.ms offsets.retention.minutes
offsets.topic.compression.codec offsets.topic.num.partitions offsets.topic.replication.factor
offsets.topic.segment.bytes password.encoder.cipher.algorithm password.encoder.iterations
password.encoder.key.length password.encoder.keyfactory.algorithm password.encoder.old.secret
password.encoder.secret port principal.builder.class process.roles producer.id.expiration.check.interval.ms
producer.id.expiration.ms producer.purgatory.purge.interval.requests queued.max.request.bytes
queued.max.requests quota.window.num quota.window.size.seconds remote.fetch.max.wait.ms
remote.log.index.file.cache.total.size.bytes remote.log.manager.copier.thread.pool.size
remote.log.manager.copy.max.bytes.per.second remote.log.manager.expiration.thread.pool.size
remote.log.manager.fetch.max.bytes.per.second remote.log.manager.task.interval.ms
remote.log.manager.thread.pool.size remote.log.metadata.custom.metadata.max.bytes
remote.log.metadata.manager.class.name remote.log.metadata.manager.class.path
remote.log.metadata.manager.impl.prefix remote.log.metadata.manager.listener.name
remote.log.reader.max.pending.tasks remote.log.reader.threads remote.log.storage.manager.class.name
remote.log.storage.manager.class.path remote.log.storage.manager.impl.prefix
remote.log.storage.system.enable replica.fetch.backoff.ms replica.fetch.max.bytes
replica.fetch.min.bytes replica.fetch.response.max.bytes replica.fetch.wait.max.ms
replica.high.watermark.checkpoint.interval.ms replica.lag.time.max.ms replica.selector.class
replica.socket.receive.buffer.bytes replica.socket.timeout.ms replication.quota.window.num
replication.quota.window.size.seconds request.timeout.ms reserved.broker.max.id
sasl.client.callback.handler.class sasl.enabled.mechanisms sasl.jaas.config
sasl.kerberos.kinit.cmd sasl.kerberos.min.time.before.relogin sasl.kerberos.principal.to.local.rules
sasl.kerberos.service.name sasl.kerberos.ticket.renew.jitter sasl.kerberos.ticket.renew.window.factor
sasl.login.callback.handler.class sasl.login.class sasl.login.connect.timeout.ms
sasl.login.read.timeout.ms sasl.login.refresh.buffer.seconds sasl.login.refresh.min.period.seconds
sasl.login.refresh.window.factor sasl.login.refresh.window.jitter sasl.login.retry.backoff.max.ms
sasl.login.retry.backoff.ms sasl.mechanism.controller.protocol sasl.mechanism.inter.broker.protocol
sasl.oauthbearer.clock.skew.seconds sasl.oauthbearer.expected.audience sasl.oauthbearer.expected.issuer
sasl.oauthbearer.jwks.endpoint.refresh.ms sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms
sasl.oauthbearer.jwks.endpoint.retry.backoff.ms sasl.oauthbearer.jwks.endpoint.url
sasl.oauthbearer.scope.claim.name sasl.oauthbearer.sub.claim.name sasl.oauthbearer.token.endpoint.url
sasl.server.callback.handler.class sasl.server.max.receive.size security.inter.broker.protocol
security.providers server.max.startup.time.ms share.coordinator.state.topic.min.isr
share.coordinator.state.topic.replication.factor socket.connection.setup.timeout.max.ms
socket.connection.setup.timeout.ms socket.listen.backlog.size socket.receive.buffer.bytes
socket.request.max.bytes socket.send.buffer.bytes ssl.allow.dn.changes ssl.allow.san.changes
ssl.cipher.suites ssl.client.auth ssl.enabled.protocols ssl.endpoint.identification.algorithm
ssl.engine.factory.class ssl.key.password ssl.keymanager.algorithm ssl.keystore.certificate.chain
ssl.keystore.key ssl.keystore.location ssl.keystore.password ssl.keystore.type ssl.principal.mapping.rules
ssl.protocol ssl.provider ssl.secure.random.implementation ssl.trustmanager.algorithm
ssl.truststore.certificates ssl.truststore.location ssl.truststore.password ssl.truststore.type
telemetry.max.bytes transaction.abort.timed.out.transaction.cleanup.interval.ms
transaction.max.timeout.ms transaction.partition.verification.enable
transaction.remove.expired.transaction.cleanup.interval.ms transaction.state.log.load.buffer.size
transaction.state.log.min.isr transaction.state.log.num.partitions
transaction.state.log.replication.factor transaction.state.log.segment.bytes
transactional.id.expiration.ms unclean.leader.election.enable unclean.leader.election.interval.ms
unstable.api.versions.enable unstable.feature.versions.enable zookeeper.clientCnxnSocket
zookeeper.connect zookeeper.connection.timeout.ms zookeeper.max.in.flight.requests
zookeeper.metadata.migration.enable zookeeper.session.timeout.ms zookeeper.set.acl
zookeeper.ssl.client.enable zookeeper.sync.time.ms
`)

// isKafkaKey reports whether key is one of Kafka's broker config names
// (listener-prefixed keys such as listener.name.internal.ssl.keystore.location
// included).
func isKafkaKey(key string) bool {
	if _, ok := slices.BinarySearch(sortedKafkaKeys, key); ok {
		return true
	}
	return strings.HasPrefix(key, "listener.name.")
}

var sortedKafkaKeys = func() []string {
	s := slices.Clone(kafkaBrokerKeys)
	slices.Sort(s)
	return s
}()

// kafkaAlias is a Kafka key that Vltava reads as one of its own: the
// value is converted (hours to milliseconds) and used unless the target
// key is also set, which wins, as in Kafka (log.retention.ms over
// log.retention.minutes over log.retention.hours).
type kafkaAlias struct {
	key, target string
	factor      int64 // multiply integer values by this; 0: copy as is
}

// kafkaAliases are in precedence order: an earlier alias of a target wins
// over a later one.
var kafkaAliases = []kafkaAlias{
	{"log.retention.minutes", "log.retention.ms", 60 * 1000},
	{"log.retention.hours", "log.retention.ms", 60 * 60 * 1000},
	{"log.roll.hours", "log.roll.ms", 60 * 60 * 1000},
	{"broker.id", "node.id", 0},
	{"log.dir", "log.dirs", 0},
}

// translateKafkaKeys rewrites m's Kafka-only keys that have a meaning here
// into Vltava's keys, and removes the Kafka keys that have none, returning
// them sorted (the caller warns). Keys in neither set are left for
// decodeMap to refuse.
func translateKafkaKeys(m map[string]any) (ignored []string, err error) {
	known := vltavaKeys()
	if err := translateAuthorizer(m); err != nil {
		return nil, err
	}
	for _, a := range kafkaAliases {
		v, ok := m[a.key]
		if !ok {
			continue
		}
		delete(m, a.key)
		if _, set := m[a.target]; set {
			continue // the more precise key wins
		}
		if a.factor != 0 {
			n, perr := strconv.ParseInt(strings.TrimSpace(fmt.Sprint(v)), 10, 64)
			if perr != nil {
				return nil, fmt.Errorf("%s: bad value %s: not an integer", a.key, fmtValue(v))
			}
			v = n * a.factor
		}
		m[a.target] = v
	}
	for k := range m {
		if !known[k] && isKafkaKey(k) {
			ignored = append(ignored, k)
			delete(m, k)
		}
	}
	slices.Sort(ignored)
	return ignored, nil
}

// vltavaKeys is the set of config.Broker's keys.
func vltavaKeys() map[string]bool {
	known := map[string]bool{}
	for _, v := range config.BrokerValues(config.Broker{}) {
		known[v.Name] = true
	}
	return known
}

// suggest returns the known key closest to an unknown one, or "" if none
// is close enough to be a likely typo.
func suggest(key string) string {
	best, bestD := "", len(key)/3+1
	try := func(k string) {
		if d := editDistance(key, k); d < bestD {
			best, bestD = k, d
		}
	}
	for k := range vltavaKeys() {
		try(k)
	}
	for _, a := range kafkaAliases {
		try(a.key)
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// kafkaACLAuthorizers are Kafka's ACL authorizer classes; Vltava's
// authorizer "acl" enforces the same ACLs.
var kafkaACLAuthorizers = []string{
	"org.apache.kafka.metadata.authorizer.StandardAuthorizer",
	"kafka.security.authorizer.AclAuthorizer",
	"kafka.security.auth.SimpleAclAuthorizer",
}

// translateAuthorizer reads Kafka's authorizer.class.name: one of Kafka's
// ACL authorizers means authorizer: acl (unless authorizer is set); any
// other class is refused, since ignoring it would run without the
// authorization the file asks for.
func translateAuthorizer(m map[string]any) error {
	v, ok := m["authorizer.class.name"]
	if !ok {
		return nil
	}
	delete(m, "authorizer.class.name")
	class := strings.TrimSpace(fmt.Sprint(v))
	switch {
	case class == "":
		return nil
	case !slices.Contains(kafkaACLAuthorizers, class):
		return fmt.Errorf("authorizer.class.name %q: Vltava runs no Java authorizer; authorizer: acl enforces Kafka's ACLs", class)
	}
	if _, set := m["authorizer"]; !set {
		m["authorizer"] = "acl"
	}
	return nil
}
