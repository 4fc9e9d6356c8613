// Package cluster is a broker's membership in a Vltava cluster: broker
// registration, controller election, replica placement, leader
// election, the ISR-change protocol, unclean and preferred leader
// election, controlled shutdown and reassignments, all through an
// sdk.MetadataStore (never go-plugin or gRPC). Kafka's semantics (KIP-500
// style controller, AlterPartition, KIP-455 reassignments) apply where
// this comment is silent.
//
// # Store keys
//
// Values are JSON. Every write that depends on a read is a
// compare-and-set on the key's version.
//
//	/brokers/<id>             ephemeral (the broker's session)
//	    {"id":1,"host":"127.0.0.1","port":9092,"rack":"","incarnation":"<hex>","shutting_down":false}
//	/controller               ephemeral (the controller's session), create-only
//	    {"id":1,"epoch":7}
//	/controller-epoch         persistent decimal counter, bumped by each new controller
//	    7
//	/topics/<name>            persistent
//	    {"id":"<32 hex>","partitions":2,"configs":{...},"replicas":[[1,2,3],[2,3,1]]}
//	/partitions/<name>/<p>    persistent
//	    {"leader":1,"leader_epoch":4,"isr":[1,2,3],"partition_epoch":9,"adding":[],"removing":[]}
//	/suspects/<id>            ephemeral (the suspecting broker's session)
//	    {"by":2,"session":<the suspected registration's session>}
//
// A topic without "replicas" was written by a single-broker Vltava; the
// controller gives it to itself (replicas [[self],...]) and writes the
// missing partition keys.
//
// # Registration and fencing
//
// Start grants a session (Config.SessionTTL) and creates /brokers/<id>
// with it; the session keeper renews it every TTL/3. A registration left
// by another incarnation of the same ID (a process killed before its
// session ended) makes Start wait, logging, until it expires: Kafka
// refuses duplicate registrations the same way.
//
// The broker fences itself from its own clock, like a Kafka broker whose
// heartbeat lease lapsed: the lease runs from the moment the last
// successful grant or keep-alive was SENT, and once TTL minus a margin
// (TTL/20, at least 100ms) has passed without another success the Node
// tells a FenceApplier to stop leading, whatever the network does, unless
// its peers say that none of them reaches the store either (see "When the
// whole store is down"). Every
// keep-alive carries a deadline (the next keep-alive's time, never past
// the lease's end), so a quorum whose packets are silently dropped can
// not hold the keeper. The store starts the session's deadline when the
// keep-alive reaches it, after it was sent, and expires it only then
// (its reaper, then the controller's election, come later still), so the
// broker is fenced before the controller can have given its leaderships
// to anyone else. A keep-alive that succeeds again (the session lived
// on) unfences it once its view has caught up with the store's current
// revision, so it acts on the controller's current decisions. If the
// store says the session ended (a long pause, a store restart), the
// broker stays fenced, registers with a new session, catches up, and
// unfences. While fenced, the Applier is not told of states that name the
// broker leader (it keeps following other leaders); when that ends (a
// keep-alive succeeded, or the session expired and the broker registered
// again, and in both cases the view caught up with the store's current
// revision) it is told every partition's current state. This holds for
// an ended session too: a store can answer "session expired" before the
// broker's watch has delivered the election that followed (a store
// plugin resuming after a pause), and a broker that re-applied its view
// then would lead again at the epoch it was deposed from, answering
// Metadata as leader and serving reads up to a high watermark that can
// no longer move (TestExpiredSessionGivesNoStaleLeadership). Kafka's
// brokers learn of their fencing from the metadata they replay and from
// their lease; this rule bounds the time a deposed leader accepts acks=1
// writes that are lost.
//
// The store must honor context deadlines: the raft store bounds every
// forwarded call, the plugin bridge carries deadlines over gRPC.
//
// # When the whole store is down
//
// A lapsed lease does not tell a broker whether it alone is cut off from
// the store (then the controller will move its leaderships once its
// session expires, and it must stop leading first) or nobody reaches the
// store (then nobody can elect anyone: the controller acts through the
// store, and a broker learns of a leadership only from it). With
// Config.AskPeers (core/broker answers over the inter-broker listener,
// BrokerHeartbeat), a broker whose keep-alives fail asks every other
// registered broker of its view, a little more than one ask budget
// (TTL/8, at least 100ms) before its lease lapses, whether it reaches the
// store. A peer says yes if its own last keep-alive succeeded less than
// 0.42 TTL ago (keep-alives succeed every TTL/3 while the store answers,
// and in a whole-store outage the peer's last success is about TTL/2 old
// or more by then, whatever the phases of the two brokers' keep-alives),
// no if its keep-alives fail since and the latest failed within two
// budgets and a retry, else if it reads the store's current revision
// within half a budget. So a slow read on a loaded machine does not make
// a store that answers the peer's keep-alives look down, and a peer that
// leads through the outage answers at once.
//
//   - Some peer reaches the store, or some peer can not be asked (it may
//     be the one that reaches it: a partition that leaves the store and a
//     peer on the other side), or there is no peer: the broker fences
//     itself when its lease lapses, as before.
//   - Every peer answered and none reaches the store: the broker leads on
//     (outage mode, StoreOutage). Its partitions keep serving produce and
//     fetch; its ISR changes are not attempted (they need the store), so
//     the ISR stays as it was, and metadata changes are refused with a
//     retriable REQUEST_TIMED_OUT saying the store is unreachable
//     (StoreUnreachable; core/broker's doc lists every request refused,
//     and InitProducerId's COORDINATOR_LOAD_IN_PROGRESS). Every TTL/10 (at least 100ms) it asks again;
//     once a peer reaches the store (or does not answer two rounds in a
//     row: one slow answer on a loaded machine is forgiven, once) it
//     tries a keep-alive of its own and, if that fails too, fences
//     itself. A
//     keep-alive that succeeds ends the outage: the session lived on (etcd
//     extends leases when it comes back, the ZooKeeper store restarts its
//     local TTLs when its client gets its ZooKeeper session back, raft's
//     new leader grants every session a fresh TTL). A store that ended the
//     session sends the broker through re-registration, fenced.
//
// Why no acknowledged acks=all write is lost, case by case: a write is
// acknowledged once the high watermark passes it, that is once every
// member of the ISR the leader uses has it, and that ISR is never smaller
// than the one in the store (ISR changes go through the store, and a
// proposal whose outcome is unknown stays in it: core/replica,
// LeaderState). A new leader is only elected from the store's ISR, so it
// has every acknowledged write, and it truncates nothing below its own
// log end (KIP-101). (1) The broker alone is cut off: it fences itself
// before its session can expire, so it acknowledges nothing once another
// leader can exist. (2) Nobody reaches the store: nobody is elected, the
// leaders go on acknowledging what their whole ISR has, and when the
// store returns the sessions live on and nothing is elected either. (3)
// The store comes back for others but not for this broker while it leads
// through an outage: it learns of it at its next round of asking, within
// TTL/10 plus one budget (two rounds if that peer was slow to answer the
// round before); should its session expire and the controller
// elect a successor before that, the successor was in the ISR, stops
// fetching from it once it leads, and the old leader's high watermark can
// then not move: it acknowledges no acks=all write the successor lacks
// (acks=1 writes in that window can be lost, as Kafka allows). The peer
// set is the registered brokers of the broker's view: a broker registered
// since it last heard from the store is not asked.
//
// # Ending a dead broker's session
//
// A process that died is visible at once: its listener refuses TCP
// connections. The controller keeps one idle connection open to the
// Kafka listener (the registered host:port) of every other registered
// broker, and every other Node keeps one to the controller's broker. When
// such a connection ends, or can not be opened, the watcher dials again.
// On a refusal it asks the broker, through the quorum, whether it lives:
// it writes /suspects/<id> naming the registration's session, and every
// Node deletes a suspicion of its own current session as soon as its
// view shows it (answerSuspicions). 500ms later it dials once more; if
// that is refused too, one Txn, conditioned on the suspicion being
// unanswered (same version) and the registration unchanged, deletes
// /brokers/<id> and the suspicion; then it revokes the session (so
// /controller goes too, if it was the controller's), logging why. The
// controller's next pass elects the first live ISR member in the same
// write that shrinks the ISR, so the partition never goes through
// "offline" while an ISR member lives. A live broker is never ended this
// way: a registered broker binds its listener before it registers and
// closes it only once it is leaving, and should its listener refuse
// anyway (a firewall's reset, a full accept queue with
// tcp_abort_on_overflow), its answer fails the Txn and the watcher leaves
// it to its session timeout. A hung process (SIGSTOP, a GC pause) or a
// partition accepts connections into its backlog or times out, is never
// refused, and only the session timeout declares it dead.
// Config.NoDeadBrokerProbe turns the probe off (Kafka's behavior: the
// session timeout alone); brokers still answer suspicions.
//
// # Controller election
//
// Every Node is a candidate. When its view shows no /controller and it
// is registered, it campaigns with one Txn: /controller must not exist
// and /controller-epoch must be at the version read; it creates
// /controller with its session and epoch+1, and writes the new epoch.
// Every controller write is a Txn conditioned on /controller still
// having the version this term created, so a deposed controller (whose
// session ended, deleting /controller) writes nothing. The other Nodes
// watch /controller and campaign when it goes.
//
// # The controller
//
// The controller is level-triggered: on every change of its view (broker
// up/down, topic created, ISR changed), a timer (the imbalance check) or
// a failed write, it runs plan over the whole view. plan is a pure
// function of the view (rules.go; table tests in rules_test.go) that
// proposes partition writes; reconcile writes them, each a Txn
// conditioned on the term, the partition's version and, when the replica
// list changes, the topic's version. A stale proposal fails its
// condition and is planned again from the newer view. A pass starts only
// once the view has caught up with the term's previous write.
//
// A broker whose registration was recreated between two passes (it went
// away and came back) is treated as dead for one pass: it loses its
// leaderships and ISR places like a broker that stayed away, and comes
// back through the ISR (or, if the partition went offline with it as the
// last ISR member, by being re-elected with a new leader epoch).
//
// Election rules (decidePartition):
//   - a dead or absent leader is replaced by the first live ISR member in
//     replica order (brokers not shutting down first); the leader epoch
//     and partition epoch grow by one; dead brokers leave the ISR;
//   - with no live ISR member the partition goes offline (leader -1) and
//     keeps its ISR, so it comes back when an ISR member returns; with
//     unclean.leader.election.enable (the topic's, else
//     Config.UncleanLeaderElection) the first live replica leads instead
//     with ISR = [itself], logged as possible data loss;
//   - a leader in controlled shutdown hands over to the first eligible
//     ISR member; brokers in controlled shutdown leave every ISR (a
//     leader that can not hand over keeps leading until it stops);
//   - a reassignment completes when every target replica is in the ISR.
//
// With AutoLeaderRebalance, every LeaderImbalanceCheckInterval the
// controller moves leadership back to preferred replicas (the first of
// each list) of every broker whose share of partitions it prefers but
// does not lead exceeds LeaderImbalancePerBrokerPercentage.
//
// Topic writes (CreateTopic, CreatePartitions, AlterTopicConfigs,
// DeleteTopic) and requested
// changes (ElectLeaders, AlterReassignments) run on whichever Node gets
// the request: each is a single compare-and-set Txn, safe against every
// other writer. AlterISR is the leader's own change (AlterPartition).
//
// # The broker side
//
// Each Node keeps a view of the cluster keys: it lists /brokers/,
// /topics/, /partitions/ and /controller, then watches "/" from the
// lowest listing revision, skipping events a listing already holds and
// keys outside those prefixes. Events of one revision are applied
// together, then the Applier hears what changed, in revision order. When
// a watch ends (store restart, ErrCompacted, overflow, ErrUnavailable)
// the Node lists again, compares with its view, and tells the Applier the
// difference, so no change is missed.
//
// A watch can also stall without failing (a store node that stopped
// receiving the log, a connection whose packets are dropped), so the
// watcher checks its own liveness every TTL/3: it reads the store's
// current revision (a linearizable List of /controller-epoch, no write)
// and, when two checks in a row find the view short of the revision read
// at the check before with no event in between, lists again and starts a
// new watch. This assumes every key in
// the store begins with "/" (all of Vltava's do): a key outside the
// watched prefix would move the store's revision without an event.
//
// Topic records reach the broker through the optional TopicApplier: every
// write of /topics/<name> (created, configs altered, partitions added,
// replicas reassigned) — and, after a re-listing, every topic whose
// version moved — is delivered as ApplyTopic(Topic), after the
// ApplyTopicDeleted calls and before the ApplyPartition calls of the same
// revision. This is how a config change made through one broker
// (AlterTopicConfigs, a compare-and-set that writes the replica
// assignment back as read) takes effect on every replica. ApplyPartition
// is not repeated for a config-only change: a partition's role does not
// depend on its topic's configs.
//
// # Goroutines
//
// Start starts five, all stopped and waited for by Close: the session
// keeper (which also asks the peers, through Config.AskPeers, on its own
// goroutine), the watcher (plus one pump per watch stream, which the watcher
// stops and waits for when the stream ends), the controller candidacy,
// which runs the controller loop while elected, the suspicion answerer,
// and the peer watch (watchPeers, plus one goroutine per watched
// registration, which it stops and waits for when the registration
// leaves its set; not started with Config.NoDeadBrokerProbe). Applier calls
// are serialized by Node.applyMu.
package cluster
