package conformance

import (
	"fmt"
	"io"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"
)

// verb is one script command this package adds: its name, its synopsis
// and what it does. The table is the single source of the verb
// reference in README.md (TestVerbReference keeps the two equal; run
// 'go test ./conformance -run TestVerbReference -update' after a change).
type verb struct {
	name, usage, doc string
	run              func(ts *testscript.TestScript, neg bool, args []string)
}

var verbs = []verb{
	{"cluster", clusterUsage,
		"start N brokers (an external target starts nothing and checks -require preconditions, skipping with the reason); sets `$BOOTSTRAP`, `$NODES` and `$NODE_1..$NODE_N` (the node IDs the cluster reports, ascending)", cmdCluster},
	{"broker", "broker kill|stop|cont|restart ID",
		"SIGKILL, SIGSTOP, SIGCONT, clean restart of node ID (use `$NODE_i`, a leader/follower variable)", cmdBroker},
	{"leader", "leader TOPIC PART VAR", "`$VAR` = the partition's leader node, `$VAR_EPOCH` = its leader epoch", cmdLeader},
	{"follower", "follower TOPIC PART VAR", "`$VAR` = the lowest replica that is not the leader", cmdFollower},
	{"controller", "controller VAR", "`$VAR` = the controller's node ID", cmdController},
	{"topic", "topic create|alter-config|delete|partitions|describe-config NAME ...",
		"`create NAME [-partitions N] [-rf N] [-config k=v]...` (waits for leaders on every broker); `alter-config NAME k=v...` (IncrementalAlterConfigs); `delete NAME`; `partitions NAME N` (CreatePartitions); `describe-config NAME KEY` prints `KEY=VALUE source=SOURCE`; errors print `error=NAME`", cmdTopic},
	{"offsets", "offsets TOPIC PART", "prints `log-start=N high-watermark=N`, sets `$LOG_START`, `$HW`", cmdOffsets},
	{"list-offsets", listOffsetsUsage, "one ListOffsets (earliest, latest, max-timestamp or a timestamp in ms); prints `offset=N timestamp=T`, sets `$OFFSET`", cmdListOffsets},
	{"delete-records", "delete-records TOPIC PART OFFSET", "DeleteRecords (OFFSET -1: the high watermark); prints `low-watermark=N`", cmdDeleteRecords},
	{"produce", produceUsage, "unique values `proc-i`, every send recorded in the history; fails on any failed/unknown send unless `-allow-errors`", cmdProduce},
	{"consume", consumeUsage, "every poll recorded; `-until end` reads to the high watermarks (last stable offsets under read_committed) at start, group members from their commits: the final read", cmdConsume},
	{"send", sendUsage, "one record exactly as described (null keys/values, headers, CreateTime); prints `offset=N partition=P` and `send: ok` or `send: ERROR`; sets `$OFFSET`", cmdSend},
	{"dump", dumpUsage, "reads a partition to its high watermark (or LSO) and prints one line per record, then `records=N`", cmdDump},
	{"await", awaitUsage, "wait for a condition; `! await COND` means it must not hold for the whole timeout (testscript's `wait` is for exec'd processes)", cmdAwait},
	{"check", checkUsage, "run the checker over history files; prints `sends= acked= failed= unknown= [aborted=] read= redelivered= anomalies: ...`; fails on an anomaly not allowed or a count not met", cmdCheck},
	{"raw", "raw produce|fetch|frame ...", "hand-built requests: `produce T P [-batch valid|bad-crc|corrupt-gzip] [-records N] [-size B] [-seq N] [-repeat N] [-expect ok|ERR]` (a rejected batch must not move the high watermark); `fetch T P OFFSET [-leader-epoch N] [-max-bytes B]` (fails if a record at/after the HW comes back); `frame oversized|negative-length|unknown-api|unsupported-version|apiversions-future|garbage|truncated` prints `closed` or `response error=NAME`; a 10 s hang fails", cmdRaw},
	{"fault", "fault produce|fetch|API-KEY ERROR_NAME [-count N] | fault clear", "inject Kafka errors (targets with the faults capability)", cmdFault},
	{"group", groupUsage, "in-process franz-go members recording every assignment and revocation (`settled`, `events`, `check`: never two owners); `raw` classic members and `raw848` KIP-848 members from hand-built requests, for fencing", cmdGroup},
	{"committed", "committed GROUP TOPIC PART", "prints `committed=N` (-1: none), the group's committed offset", cmdCommitted},
	{"txnraw", txnRawUsage, "a transactional producer of hand-built requests (InitProducerId, AddPartitionsToTxn, Produce, EndTxn at the highest common version, adopting the epoch EndTxn v5 answers); `resend-end` repeats the last EndTxn as a delayed duplicate would arrive", cmdTxnRaw},
	{"txn", txnUsage, "a transactional producer (KIP-98): sends and end-txn are recorded with the transaction's name, so `check` finds aborted-read, dirty-read and torn-transaction", cmdTxn},
	{"acl", aclUsage, "CreateAcls as the superuser for User:USER (SASL clusters)", cmdACL},
	{"quota", quotaUsage, "AlterClientQuotas / DescribeClientQuotas (KIP-546)", cmdQuota},
	{"sleep", "sleep DURATION", "let time pass (segment.ms, delete.retention.ms)", cmdSleep},
}

// commands is the table of script commands this package adds.
func commands() map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	m := map[string]func(ts *testscript.TestScript, neg bool, args []string){}
	for _, v := range verbs {
		m[v.name] = v.run
	}
	return m
}

// WriteVerbReference writes the verb table of README.md.
func WriteVerbReference(w io.Writer) {
	fmt.Fprintln(w, "| command | synopsis | does |")
	fmt.Fprintln(w, "|---|---|---|")
	for _, v := range verbs {
		var lines []string
		for _, l := range strings.Split(v.usage, "\n") {
			lines = append(lines, "`"+strings.ReplaceAll(l, "|", `\|`)+"`")
		}
		fmt.Fprintf(w, "| `%s` | %s | %s |\n", v.name, strings.Join(lines, "<br>"), strings.ReplaceAll(v.doc, "|", `\|`))
	}
}
