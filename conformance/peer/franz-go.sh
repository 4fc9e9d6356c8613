#!/usr/bin/env bash
# franz-go.sh runs franz-go's own integration tests (package pkg/kgo, the
# tests that talk to a real broker through KGO_SEEDS) against a local
# Vltava cluster started with `vltava cluster up`. The franz-go sources
# come from the Go module cache (`go mod download`), at the version in
# go.mod unless FRANZ_GO_VERSION says otherwise; nothing of franz-go is
# kept in this repository.
#
#   conformance/peer/franz-go.sh                 # 3 brokers, RF 3
#   BROKERS=1 conformance/peer/franz-go.sh       # one broker, RF 1
#   KGO_TEST_CHAOS=1 RUN='TestGroupETL|TestTxnEtl' conformance/peer/franz-go.sh
#
# Environment: BROKERS (3), RECORDS (KGO_TEST_RECORDS, 20000; franz-go's
# default is 500000), RUN (the -run pattern; default: every test that
# needs a broker), KGO_TEST_CHAOS (1: franz-go's dialer injects connection
# failures), FRANZ_GO_VERSION, VLTAVA / VLTAVAD (prebuilt binaries; built
# from the tree otherwise), TMPDIR. It prints franz-go's PASS/FAIL/SKIP
# lines and exits with go test's status.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
BROKERS=${BROKERS:-3}
RECORDS=${RECORDS:-20000}
RUN=${RUN:-'TestGroupETL|TestTxnEtl|TestIssue|TestConsume|TestDirectPartitionPurge|TestAddRemovePartitions|TestPause|TestPooling|TestGroupSimple|TestHookPollStart$|TestPollWaitState|TestClient_Produce|TestPing|TestUnknownGroupOffsetFetchPinned|TestShareGroup'}
version=${FRANZ_GO_VERSION:-$(cd "$root" && go list -m -f '{{.Version}}' github.com/twmb/franz-go)}
work=$(mktemp -d "${TMPDIR:-/tmp}/vltava-peer-franz.XXXXXX")
cluster_pid=""
cleanup() {
	if [[ -n $cluster_pid ]]; then
		kill "$cluster_pid" 2>/dev/null || true
		wait "$cluster_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

if [[ -z ${VLTAVAD:-} ]]; then VLTAVAD=$work/vltavad; (cd "$root" && go build -o "$VLTAVAD" ./daemon); fi
if [[ -z ${VLTAVA:-} ]]; then VLTAVA=$work/vltava; (cd "$root" && go build -o "$VLTAVA" ./tools/vltava); fi

# franz-go's sources at $version, copied out of the read-only module cache.
dir=$(cd "$root" && go mod download -json "github.com/twmb/franz-go@$version" |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
cp -r "$dir" "$work/franz-go"
chmod -R u+w "$work/franz-go"
(cd "$work/franz-go/pkg/kgo" && go test -c -o "$work/kgo.test" .)

# The cluster runs until SIGTERM (cleanup), which stops every broker.
"$VLTAVA" cluster up -n "$BROKERS" --vltavad "$VLTAVAD" --dir "$work/cluster" </dev/null >"$work/cluster.log" 2>&1 &
cluster_pid=$!
seeds=""
for _ in $(seq 600); do
	seeds=$(sed -n 's/^bootstrap: //p' "$work/cluster.log")
	[[ -n $seeds ]] && break
	kill -0 "$cluster_pid" 2>/dev/null || { cat "$work/cluster.log" >&2; exit 1; }
	sleep 0.1
done
[[ -n $seeds ]] || { echo "franz-go.sh: the cluster did not come up" >&2; cat "$work/cluster.log" >&2; exit 1; }
rf=$((BROKERS < 3 ? BROKERS : 3))
echo "# $(date -u +%FT%TZ) franz-go $version pkg/kgo against $BROKERS vltavad broker(s), RF $rf, records $RECORDS, chaos ${KGO_TEST_CHAOS:-0}, tree $(cd "$root" && git rev-parse --short HEAD)"
status=0
(cd "$work/franz-go/pkg/kgo" && KGO_SEEDS=$seeds KGO_TEST_RF=$rf KGO_TEST_RECORDS=$RECORDS \
	"$work/kgo.test" -test.v -test.run "$RUN" -test.timeout 30m >"$work/test.log" 2>&1) || status=$?
grep -E '^(--- |PASS$|FAIL$|panic:)|^\s+\S+_test\.go:[0-9]+: ' "$work/test.log" || true
if ((status != 0)); then
	# franz-go's own error lines sit among its client logs: keep the whole log.
	kept=$(mktemp "${TMPDIR:-/tmp}/franz-go-kgo-test.XXXXXX.log")
	cp "$work/test.log" "$kept"
	echo "# the whole franz-go test log: $kept"
fi
echo "# end $(date -u +%FT%TZ) status $status"
exit "$status"
