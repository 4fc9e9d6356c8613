#!/usr/bin/env bash
# cluster-load.sh compares replication factors on a local three-broker
# vltavad cluster (issue 15, target 3: RF=3 CPU <= 1.5x RF=1): per run it
# starts a fresh cluster (raft metadata among the three, log level warn),
# and runs `vltava perf load` once per case against it, each case on its
# own topic, with --broker-pid summing all three brokers' CPU. Cases are
# NAME=ARGS as in load.sh, ARGS including --partitions and
# --replication-factor:
#
#   RUNS=3 tools/bench/cluster-load.sh \
#     'rf1=--producers 4 --consumers 0 --partitions 6 --replication-factor 1' \
#     'rf3=--producers 4 --consumers 0 --partitions 6 --replication-factor 3'
#
# Environment: RUNS (3), DURATION (8s), VLTAVAD / VLTAVA (prebuilt
# binaries), TMPDIR, PROFILE_DIR (when set, each broker writes a pprof CPU
# profile of its whole life to PROFILE_DIR/NAME-RUN-NODE.prof; node 1 is
# the first started, usually not the only leader).
set -euo pipefail
RUNS=${RUNS:-3}
DURATION=${DURATION:-8s}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/vltava-cluster-load.XXXXXX")
pids=()
# stop_all stops the brokers: SIGTERM, then SIGKILL after 10 s (a broker
# whose peers already stopped may not finish a clean shutdown).
stop_all() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for _ in $(seq 100); do
		alive=0
		for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
		((alive == 0)) && break
		sleep 0.1
	done
	for p in "${pids[@]}"; do pkill -9 -P "$p" 2>/dev/null || true; kill -9 "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
}
cleanup() { stop_all; rm -rf "$work"; }
trap cleanup EXIT
if [[ -z ${VLTAVAD:-} ]]; then VLTAVAD=$work/vltavad; (cd "$root" && go build -o "$VLTAVAD" ./daemon); fi
if [[ -z ${VLTAVA:-} ]]; then VLTAVA=$work/vltava; (cd "$root" && go build -o "$VLTAVA" ./tools/vltava); fi
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
echo "# $(date -u +%FT%TZ) nproc $(nproc) load $(cut -d' ' -f1-3 /proc/loadavg) tree $(cd "$root" && git rev-parse --short HEAD)"
for run in $(seq "$RUNS"); do
	for c in "$@"; do
		name=${c%%=*}
		args=${c#*=}
		sync
		q=() l=()
		for i in 1 2 3; do q+=("127.0.0.1:$(freeport)"); l+=("127.0.0.1:$(freeport)"); done
		voters="1@${q[0]},2@${q[1]},3@${q[2]}"
		for i in 1 2 3; do
			prof=()
			[[ -n ${PROFILE_DIR:-} ]] && prof=(--cpuprofile "$PROFILE_DIR/$name-$run-$i.prof")
			"$VLTAVAD" "${prof[@]}" --listen "${l[i - 1]}" --node-id "$i" --data-dir "$work/$name-$run-$i" \
				--quorum-listen "${q[i - 1]}" --quorum-voters "$voters" --metrics-listen= --log-level warn \
				>"$work/$name-$run-$i.log" 2>&1 &
			pids+=($!)
		done
		for _ in $(seq 600); do
			n=$( (grep -l "ready: listening" "$work/$name-$run"-?.log 2>/dev/null || true) | wc -l)
			((n == 3)) && break
			sleep 0.1
		done
		seeds="${l[0]},${l[1]},${l[2]}"
		# shellcheck disable=SC2086
		line=$("$VLTAVA" -b "$seeds" perf load bench --duration "$DURATION" \
			--broker-pid "$(IFS=,; echo "${pids[*]}")" --json $args 2>"$work/err") ||
			{ echo "cluster-load.sh: $name run $run failed:" >&2; tail -3 "$work/err" >&2; }
		echo "$name $run $(cut -d' ' -f1 /proc/loadavg) $line"
		stop_all
		rm -rf "$work/$name-$run"-?
	done
done
echo "# end $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
