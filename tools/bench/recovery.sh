#!/usr/bin/env bash
# recovery.sh measures a single-node vltavad's restart after kill -9
# (issue 15, target 6): it produces RECORDS x 1 KiB (default 1 GiB) into
# 6 partitions with the default flush settings (nothing fsynced by the
# broker: the unflushed tail is what recovery must scan), kills the
# broker with SIGKILL, restarts it on the same data directory and prints
# the time from exec to "ready: listening", then checks with `perf
# consume --raw` that every record is there. RUNS (3) repetitions, each on
# a fresh data directory.
#
#   RUNS=3 RECORDS=1048576 TMPDIR=/var/tmp tools/bench/recovery.sh
set -euo pipefail
RUNS=${RUNS:-3}
RECORDS=${RECORDS:-1048576}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/vltava-recovery.XXXXXX")
pid=""
cleanup() {
	if [[ -n $pid ]]; then kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT
if [[ -z ${VLTAVAD:-} ]]; then VLTAVAD=$work/vltavad; (cd "$root" && go build -o "$VLTAVAD" ./daemon); fi
if [[ -z ${VLTAVA:-} ]]; then VLTAVA=$work/vltava; (cd "$root" && go build -o "$VLTAVA" ./tools/vltava); fi
# start DIR OUT: starts the broker and waits for readiness; sets pid, addr
# and elapsed (seconds from exec to ready).
start() {
	: >"$2"
	local t0 t1
	addr=""
	t0=$(date +%s.%N)
	"$VLTAVAD" --listen 127.0.0.1:0 --data-dir "$1" --log-level warn >"$2" 2>&1 &
	pid=$!
	for _ in $(seq 1200); do
		addr=$(sed -n 's/.*ready: listening on \([^ ,]*\).*/\1/p' "$2" | head -n1)
		[[ -n $addr ]] && break
		sleep 0.01
	done
	[[ -n $addr ]] || { cat "$2" >&2; exit 1; }
	t1=$(date +%s.%N)
	elapsed=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b - a}')
}
echo "# $(date -u +%FT%TZ) nproc $(nproc) load $(cut -d' ' -f1-3 /proc/loadavg) tree $(cd "$root" && git rev-parse --short HEAD)"
for run in $(seq "$RUNS"); do
	dir=$work/data-$run
	sync
	start "$dir" "$work/out1"
	cold=$elapsed
	"$VLTAVA" -b "$addr" topic create bench -p 6 >/dev/null
	"$VLTAVA" -b "$addr" perf produce bench --records "$RECORDS" --record-size 1024 --acks 1 --json >/dev/null 2>&1
	kill -9 "$pid"; wait "$pid" 2>/dev/null || true; pid=""
	start "$dir" "$work/out2"
	warm=$elapsed
	got=$("$VLTAVA" -b "$addr" perf consume bench --raw --records "$RECORDS" --json 2>/dev/null | sed -n 's/.*"records":\([0-9]*\).*/\1/p')
	echo "run $run: first start ${cold}s, restart after kill -9 with $((RECORDS / 1024)) MiB unflushed ${warm}s, records back $got of $RECORDS, load $(cut -d' ' -f1 /proc/loadavg)"
	kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
	rm -rf "$dir"
done
