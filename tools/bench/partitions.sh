#!/usr/bin/env bash
# partitions.sh measures one broker at growing partition counts (issue 13,
# the partition-count table; issue 15's growth table): for each count it
# starts a fresh single-node vltavad, runs `vltava perf load` with the
# same client settings (spread over 100 topics from 100 partitions up),
# samples the broker's RSS and open descriptors every second during the
# run, and prints one Markdown table row: produce and consume MiB/s,
# produce p99 latency, peak RSS and descriptors.
#
#   tools/bench/partitions.sh                 # 1 10 100 1000 10000
#   COUNTS="1 100" DURATION=10s tools/bench/partitions.sh
#   VARY=producers COUNTS="1 10 100 1000" tools/bench/partitions.sh
#
# With VARY=producers the count is the number of producer clients (each
# with its own connections) instead, over PARTITIONS (6) partitions of
# one topic, with no consumers and --max-buffered 100000/count records per
# client (at least 100) so the clients' memory stays bounded.
#
# Environment: COUNTS, DURATION (20s), LOAD_ARGS (perf load flags; default
# --producers 4 --consumers 4 --record-size 1024 --acks 1), VLTAVAD /
# VLTAVA (prebuilt binaries; built from the tree otherwise), TMPDIR (data
# directories).
set -euo pipefail
COUNTS=${COUNTS:-"1 10 100 1000 10000"}
DURATION=${DURATION:-20s}
VARY=${VARY:-partitions}
PARTITIONS=${PARTITIONS:-6}
if [[ $VARY == producers ]]; then
	LOAD_ARGS=${LOAD_ARGS:-"--consumers 0 --record-size 1024 --acks 1"}
else
	LOAD_ARGS=${LOAD_ARGS:-"--producers 4 --consumers 4 --record-size 1024 --acks 1"}
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/vltava-partitions.XXXXXX")
pid=""
sampler=""
cleanup() {
	if [[ -n $sampler ]]; then kill "$sampler" 2>/dev/null || true; fi
	if [[ -n $pid ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT
if [[ -z ${VLTAVAD:-} ]]; then VLTAVAD=$work/vltavad; (cd "$root" && go build -o "$VLTAVAD" ./daemon); fi
if [[ -z ${VLTAVA:-} ]]; then VLTAVA=$work/vltava; (cd "$root" && go build -o "$VLTAVA" ./tools/vltava); fi
echo "# $(date -u +%FT%TZ) nproc $(nproc) load $(cut -d' ' -f1-3 /proc/loadavg) tree $(cd "$root" && git rev-parse --short HEAD)"
echo "# perf load $LOAD_ARGS --duration $DURATION"
echo "| $VARY | topics | produce MiB/s | consume MiB/s | produce p99 ms | peak RSS MiB | peak fds | load avg |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for n in $COUNTS; do
	topics=1
	if [[ $VARY == producers ]]; then
		vary_args="--producers $n --partitions $PARTITIONS --max-buffered $((100000 / n > 100 ? 100000 / n : 100))"
	else
		if ((n >= 100)); then topics=100; fi
		vary_args="--partitions $n"
	fi
	dir=$work/data-$n
	out=$work/server-$n.out
	mkdir -p "$dir"
	sync
	"$VLTAVAD" --listen 127.0.0.1:0 --data-dir "$dir" --metrics-listen "" --log-level warn >"$out" 2>&1 &
	pid=$!
	addr=""
	for _ in $(seq 3000); do
		addr=$(sed -n 's/.*ready: listening on \([^ ,]*\).*/\1/p' "$out" | head -n1)
		[[ -n $addr ]] && break
		sleep 0.01
	done
	[[ -n $addr ]] || { cat "$out" >&2; exit 1; }
	(
		rss=0 fds=0
		while kill -0 "$pid" 2>/dev/null; do
			r=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
			f=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)
			((r > rss)) && rss=$r
			((f > fds)) && fds=$f
			echo "$rss $fds" >"$work/peak-$n"
			sleep 1
		done
	) &
	sampler=$!
	# shellcheck disable=SC2086
	json=$("$VLTAVA" -b "$addr" --timeout 600s perf load load --topics "$topics" $vary_args \
		--duration "$DURATION" --broker-pid "$pid" $LOAD_ARGS --json 2>"$work/perf-$n.err")
	sleep 1
	kill "$sampler" 2>/dev/null || true
	wait "$sampler" 2>/dev/null || true
	sampler=""
	read -r rss fds <"$work/peak-$n"
	echo "$json" | python3 -c '
import json, sys
r = json.load(sys.stdin)
n, topics, rss, fds, load = sys.argv[1:6]
prod = r["produce"]
cons = r.get("consume") or {}
p99 = (prod.get("latency") or {}).get("p99_ms", 0)
row = [format(int(n), ","), topics, "%.1f" % prod["mb_per_sec"], "%.1f" % cons.get("mb_per_sec", 0),
       "%.1f" % p99, "%.0f" % (int(rss) / 1024), format(int(fds), ","), load]
print("| " + " | ".join(row) + " |")
' "$n" "$topics" "$rss" "$fds" "$(cut -d' ' -f1 /proc/loadavg)"
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=""
	rm -rf "$dir"
done
