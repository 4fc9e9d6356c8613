#!/usr/bin/env bash
# compare.sh — Vltava's produce/consume throughput against franz-go's fake
# broker (kfake), measured as ratios in the same run with the same client.
#
# Targets (each on a fresh server, loopback port chosen at run time, fresh
# temp data dir, a TOPIC with PARTITIONS partitions):
#   kfake-blackhole  kfake acking produce and dropping the data: the
#                    client-bound ceiling (produce only)
#   kfake-datadir    kfake persisting to a data dir
#   vltava           vltavad with defaults (zero copy on)
#   vltava-copy      vltavad with zero.copy.enable: false (opt-in target)
# Each target runs `vltava perf produce` then (except the blackhole)
# `vltava perf consume` of the same records. Runs are interleaved (run 1 of
# every target, then run 2, ...) so machine noise hits all targets alike;
# the table shows medians over RUNS. Two machine ceilings are measured each
# run too: page-cache append and loopback TCP (tools/bench/ceilings).
#
# Environment (defaults in brackets):
#   RECORDS [300000]  SIZE [1024]  PARTITIONS [6]  RUNS [3]
#   ACKS [1]  COMPRESSION [none]  LINGER [0s]
#   TARGETS ["kfake-blackhole kfake-datadir vltava"]
#   CPUPROFILE_DIR    if set, vltavad writes DIR/<target>-run<N>.prof
#   KEEP_RESULTS      if set, the raw JSON of every run is copied there
#
# Usage: tools/bench/compare.sh        (from anywhere; builds what it needs)
set -euo pipefail

RECORDS=${RECORDS:-300000}
SIZE=${SIZE:-1024}
PARTITIONS=${PARTITIONS:-6}
RUNS=${RUNS:-3}
ACKS=${ACKS:-1}
COMPRESSION=${COMPRESSION:-none}
LINGER=${LINGER:-0s}
TARGETS=${TARGETS:-"kfake-blackhole kfake-datadir vltava"}
CPUPROFILE_DIR=${CPUPROFILE_DIR:-}
KEEP_RESULTS=${KEEP_RESULTS:-}
TOPIC=bench
READY_TIMEOUT=30 # seconds

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/vltava-bench.XXXXXX")
SERVER_PID=""

log() { printf '%s\n' "$*" >&2; }

# stop_server sends SIGTERM to the running server and waits for it; after
# 20 s it sends SIGKILL.
stop_server() {
	[[ -n $SERVER_PID ]] || return 0
	local pid=$SERVER_PID
	SERVER_PID=""
	kill -TERM "$pid" 2>/dev/null || return 0
	for _ in $(seq 200); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

cleanup() {
	local rc=$?
	stop_server
	rm -rf "$WORK"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# json_field FILE NAME prints the number NAME of the first JSON object in FILE.
json_field() {
	grep -o "\"$2\":[-0-9.eE+]*" "$1" | head -n1 | cut -d: -f2
}

# median prints the median of its numeric arguments (empty ones skipped).
median() {
	printf '%s\n' "$@" | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {
		if (NR == 0) { print "-"; exit }
		if (NR % 2) m = v[(NR+1)/2]; else m = (v[NR/2] + v[NR/2+1]) / 2
		printf "%.1f\n", m }'
}

# ratio A B prints A/B with two decimals, "-" when either is missing.
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN {
		if (a == "" || b == "" || a == "-" || b == "-" || b + 0 == 0) print "-"
		else printf "%.2f", a / b }'
}

build() {
	log "building into $WORK/bin"
	mkdir -p "$WORK/bin"
	(cd "$ROOT" &&
		go build -o "$WORK/bin/vltavad" ./daemon &&
		go build -o "$WORK/bin/vltava" ./tools/vltava &&
		go build -o "$WORK/bin/fakebroker" ./tools/fakebroker &&
		go build -o "$WORK/bin/ceilings" ./tools/bench/ceilings)
}

# start_server TARGET RUN starts the server for TARGET in the background,
# waits for its ready line and sets ADDR.
start_server() {
	local target=$1 run=$2 dir="$WORK/data-$1-$2" out="$WORK/server-$1-$2.out"
	mkdir -p "$dir"
	local cmd
	case $target in
	kfake-blackhole) cmd=("$WORK/bin/fakebroker" --listen 127.0.0.1:0 --blackhole --partitions "$PARTITIONS") ;;
	kfake-datadir) cmd=("$WORK/bin/fakebroker" --listen 127.0.0.1:0 --data-dir "$dir" --partitions "$PARTITIONS") ;;
	vltava | vltava-copy)
		cmd=("$WORK/bin/vltavad" --listen 127.0.0.1:0 --data-dir "$dir" --log-level warn)
		if [[ $target == vltava-copy ]]; then
			printf 'zero.copy.enable: false\n' >"$WORK/copy.yaml"
			cmd+=(--config "$WORK/copy.yaml")
		fi
		if [[ -n $CPUPROFILE_DIR ]]; then
			mkdir -p "$CPUPROFILE_DIR"
			cmd+=(--cpuprofile "$CPUPROFILE_DIR/$target-run$run.prof")
		fi
		;;
	*)
		log "unknown target $target"
		return 1
		;;
	esac
	"${cmd[@]}" >"$out" 2>"$WORK/server-$target-$run.err" &
	SERVER_PID=$!
	ADDR=""
	for _ in $(seq $((READY_TIMEOUT * 10))); do
		ADDR=$(sed -n 's/.*ready: listening on \([^ ,]*\).*/\1/p' "$out" | head -n1)
		[[ -n $ADDR ]] && return 0
		if ! kill -0 "$SERVER_PID" 2>/dev/null; then
			log "$target exited before it was ready:"
			cat "$WORK/server-$target-$run.err" >&2
			SERVER_PID=""
			return 1
		fi
		sleep 0.1
	done
	log "$target not ready after ${READY_TIMEOUT}s"
	return 1
}

# run_target TARGET RUN runs one produce (and consume) against TARGET and
# appends "target run produce consume" to $WORK/results.
run_target() {
	local target=$1 run=$2 res="$WORK/$1-$2"
	start_server "$target" "$run"
	local cli=("$WORK/bin/vltava" -b "$ADDR")
	"${cli[@]}" topic create "$TOPIC" -p "$PARTITIONS" >/dev/null
	"${cli[@]}" perf produce "$TOPIC" --records "$RECORDS" --record-size "$SIZE" \
		--acks "$ACKS" --compression "$COMPRESSION" --linger "$LINGER" --json \
		>"$res.produce.json" 2>"$res.produce.err"
	local prod cons=""
	prod=$(printf '%.1f' "$(json_field "$res.produce.json" mb_per_sec)")
	if [[ $target != kfake-blackhole ]]; then
		"${cli[@]}" perf consume "$TOPIC" --records "$RECORDS" --json \
			>"$res.consume.json" 2>"$res.consume.err"
		cons=$(printf '%.1f' "$(json_field "$res.consume.json" mb_per_sec)")
	fi
	stop_server
	rm -rf "$WORK/data-$target-$run"
	log "run $run $target: produce ${prod} MiB/s, consume ${cons:--} MiB/s"
	echo "$target $run $prod ${cons:--}" >>"$WORK/results"
}

# ceilings RUN appends "ceilings run pagecache loopback" to $WORK/results.
ceilings() {
	local out="$WORK/ceilings-$1.json" pc lo
	"$WORK/bin/ceilings" --dir "$WORK" --bytes $((RECORDS * SIZE)) >"$out"
	pc=$(printf '%.1f' "$(json_field "$out" pagecache_mib_per_sec)")
	lo=$(printf '%.1f' "$(json_field "$out" loopback_mib_per_sec)")
	log "run $1 ceilings: page-cache append ${pc} MiB/s, loopback TCP ${lo} MiB/s"
	echo "ceilings $1 $pc $lo" >>"$WORK/results"
}

# col TARGET FIELD prints the median of column FIELD (3 or 4) for TARGET.
col() {
	# shellcheck disable=SC2046
	median $(awk -v t="$1" -v f="$2" '$1 == t && $f != "-" {print $f}' "$WORK/results")
}

report() {
	local bh kd kdc v vc pc lo
	bh=$(col kfake-blackhole 3)
	kd=$(col kfake-datadir 3)
	kdc=$(col kfake-datadir 4)
	v=$(col vltava 3)
	vc=$(col vltava 4)
	pc=$(col ceilings 3)
	lo=$(col ceilings 4)
	echo
	echo "records=$RECORDS size=$SIZE partitions=$PARTITIONS acks=$ACKS compression=$COMPRESSION linger=$LINGER runs=$RUNS (medians, MiB/s)"
	printf '%-18s %14s %14s\n' target produce consume
	for t in $TARGETS; do
		printf '%-18s %14s %14s\n' "$t" "$(col "$t" 3)" "$(col "$t" 4)"
	done
	printf '%-18s %14s %14s\n' "page-cache append" "$pc" "-"
	printf '%-18s %14s %14s\n' "loopback TCP" "$lo" "-"
	echo
	echo "vltava / kfake-blackhole produce: $(ratio "$v" "$bh")   (target >= 0.9)"
	echo "vltava / kfake-datadir   produce: $(ratio "$v" "$kd")   (target >= 1.2)"
	echo "vltava / kfake-datadir   consume: $(ratio "$vc" "$kdc")   (target >= 3)"
	echo "vltava produce / page-cache append: $(ratio "$v" "$pc")"
	echo "vltava produce / loopback TCP:      $(ratio "$v" "$lo")"
	echo "vltava consume / loopback TCP:      $(ratio "$vc" "$lo")"
	if [[ " $TARGETS " == *" vltava-copy "* ]]; then
		echo "vltava zero-copy / copy consume:    $(ratio "$vc" "$(col vltava-copy 4)")"
	fi
	echo
	echo "per run (target run produce consume):"
	sort -k1,1 -k2,2n "$WORK/results" | sed 's/^/  /'
}

build
: >"$WORK/results"
for run in $(seq "$RUNS"); do
	for t in $TARGETS; do
		run_target "$t" "$run"
	done
	ceilings "$run"
done
if [[ -n $KEEP_RESULTS ]]; then
	mkdir -p "$KEEP_RESULTS"
	cp "$WORK"/*.json "$WORK/results" "$KEEP_RESULTS"/
fi
report
