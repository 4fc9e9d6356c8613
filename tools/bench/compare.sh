#!/usr/bin/env bash
# compare.sh — Vltava's produce/consume throughput against franz-go's fake
# broker (kfake), measured as ratios in the same run with the same client.
#
# Targets (each on a fresh server, loopback port chosen at run time, fresh
# temp data dir, a TOPIC with PARTITIONS partitions):
#   kfake-blackhole  kfake acking produce and dropping the data: the
#                    client-bound produce ceiling (produce only)
#   kfake-synthetic  kfake answering every fetch from one canned batch of
#                    SIZE-byte records, no storage (consume only)
#   kfake-datadir    kfake persisting to a data dir
#   vltava           vltavad with defaults (zero copy on)
#   vltava-copy      vltavad with zero.copy.enable: false (opt-in target)
#   vltava-alt       the vltavad binary at $ALT_VLTAVAD, e.g. one built
#                    from a tree with a candidate fix (opt-in A/B target)
# Each target runs `vltava perf produce`, then `vltava perf consume` of the
# same records (franz-go's consumer, decoding every record), then
# `vltava perf consume --raw` (plain Fetch requests with the consumer's
# default sizes, records counted from batch headers: what the broker serves
# rather than what one consumer decodes); the kfake ceilings run only their
# half. Runs are
# interleaved (run 1 of every target, then run 2, ...) so machine noise hits
# all targets alike; the table shows medians over RUNS. Besides MiB/s it
# shows the CPU seconds (user+sys) the server (from /proc) and the client
# (bash's time) spent in each phase: steadier than MiB/s on a shared
# machine, and client and server share the same cores. Two machine ceilings
# are measured each run too: page-cache append and loopback TCP
# (tools/bench/ceilings).
#
# Client settings, identical for every target: franz-go defaults except
# acks=ACKS (idempotence off unless acks=all), compression=COMPRESSION,
# linger=LINGER, the default sticky partitioner (records have no key).
#
# Environment (defaults in brackets):
#   RECORDS [300000]  SIZE [1024]  PARTITIONS [6]  RUNS [3]
#   ACKS [1]  COMPRESSION [none]  LINGER [0s]
#   TARGETS ["kfake-blackhole kfake-synthetic kfake-datadir vltava"]
#   ALT_VLTAVAD       vltavad binary for the vltava-alt target
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
TARGETS=${TARGETS:-"kfake-blackhole kfake-synthetic kfake-datadir vltava"}
CPUPROFILE_DIR=${CPUPROFILE_DIR:-}
KEEP_RESULTS=${KEEP_RESULTS:-}
ALT_VLTAVAD=${ALT_VLTAVAD:-}
TOPIC=bench
READY_TIMEOUT=30 # seconds

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/vltava-bench.XXXXXX")
SERVER_PID=""
CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)

log() { printf '%s\n' "$*" >&2; }

# stop_server sends SIGTERM to the running server and waits for it; after
# 20 s it sends SIGKILL. The server runs in its own process group (setsid),
# so whatever it started (vltavad's plugin processes) is killed with it.
stop_server() {
	[[ -n $SERVER_PID ]] || return 0
	local pid=$SERVER_PID
	SERVER_PID=""
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 200); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL -- "-$pid" 2>/dev/null || true
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

# median FORMAT VALUE... prints the median of the values (empty ones
# skipped) with the printf FORMAT.
median() {
	local fmt=$1
	shift
	printf '%s\n' "$@" | { grep -v '^$' || true; } | sort -g | awk -v fmt="$fmt" '{v[NR]=$1} END {
		if (NR == 0) { print "-"; exit }
		if (NR % 2) m = v[(NR+1)/2]; else m = (v[NR/2] + v[NR/2+1]) / 2
		printf fmt "\n", m }'
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
	kfake-synthetic) cmd=("$WORK/bin/fakebroker" --listen 127.0.0.1:0 --synthetic "$SIZE" --partitions "$PARTITIONS") ;;
	kfake-datadir) cmd=("$WORK/bin/fakebroker" --listen 127.0.0.1:0 --data-dir "$dir" --partitions "$PARTITIONS") ;;
	vltava | vltava-copy | vltava-alt)
		local bin="$WORK/bin/vltavad"
		if [[ $target == vltava-alt ]]; then
			[[ -x $ALT_VLTAVAD ]] || {
				log "vltava-alt needs ALT_VLTAVAD=path/to/vltavad"
				return 1
			}
			bin=$ALT_VLTAVAD
		fi
		cmd=("$bin" --listen 127.0.0.1:0 --data-dir "$dir" --log-level warn)
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
	# Create the output file first: the background child opens its
	# redirections only once it runs, which may be after we first look.
	: >"$out"
	setsid "${cmd[@]}" >"$out" 2>"$WORK/server-$target-$run.err" &
	SERVER_PID=$!
	ADDR=""
	for _ in $(seq $((READY_TIMEOUT * 10))); do
		if [[ ! -e $out ]]; then
			log "$out vanished: something else deleted files under $WORK"
			return 1
		fi
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

# server_cpu prints the server's CPU seconds so far (user+sys), "" if unknown.
server_cpu() {
	[[ -r /proc/$SERVER_PID/stat ]] || return 0
	awk -v hz="$CLK_TCK" '{printf "%.3f", ($14 + $15) / hz}' "/proc/$SERVER_PID/stat"
}

# cpu_delta A B prints B-A with two decimals, "-" when either is missing.
cpu_delta() {
	awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "") print "-"; else printf "%.2f", b - a }'
}

# run_target TARGET RUN runs one produce and/or consume against TARGET and
# appends "target run produce consume server-cpu(produce consume)
# client-cpu(produce consume) raw-consume server-cpu(raw) client-cpu(raw)"
# to $WORK/results ("-" for a phase not run). Raw consume MiB/s counts
# whole batches (headers and record framing: ~1% over the values at 1 KiB).
run_target() {
	local target=$1 run=$2 res="$WORK/$1-$2"
	start_server "$target" "$run"
	local cli=("$WORK/bin/vltava" -b "$ADDR")
	"${cli[@]}" topic create "$TOPIC" -p "$PARTITIONS" >/dev/null
	local prod=- cons=- pcpu=- ccpu=- pcl=- ccl=- raw=- rcpu=- rcl=- c0 c1
	local TIMEFORMAT='%U %S'
	if [[ $target != kfake-synthetic ]]; then
		c0=$(server_cpu)
		{ time "${cli[@]}" perf produce "$TOPIC" --records "$RECORDS" --record-size "$SIZE" \
			--acks "$ACKS" --compression "$COMPRESSION" --linger "$LINGER" --json \
			>"$res.produce.json" 2>"$res.produce.err"; } 2>"$res.produce.time"
		c1=$(server_cpu)
		prod=$(printf '%.1f' "$(json_field "$res.produce.json" mb_per_sec)")
		pcpu=$(cpu_delta "$c0" "$c1")
		pcl=$(awk '{printf "%.2f", $1 + $2}' "$res.produce.time")
	fi
	if [[ $target != kfake-blackhole ]]; then
		c0=$(server_cpu)
		{ time "${cli[@]}" perf consume "$TOPIC" --records "$RECORDS" --json \
			>"$res.consume.json" 2>"$res.consume.err"; } 2>"$res.consume.time"
		c1=$(server_cpu)
		cons=$(printf '%.1f' "$(json_field "$res.consume.json" mb_per_sec)")
		ccpu=$(cpu_delta "$c0" "$c1")
		ccl=$(awk '{printf "%.2f", $1 + $2}' "$res.consume.time")
		c0=$(server_cpu)
		{ time "${cli[@]}" perf consume "$TOPIC" --raw --records "$RECORDS" --json \
			>"$res.consume-raw.json" 2>"$res.consume-raw.err"; } 2>"$res.consume-raw.time"
		c1=$(server_cpu)
		raw=$(printf '%.1f' "$(json_field "$res.consume-raw.json" mb_per_sec)")
		rcpu=$(cpu_delta "$c0" "$c1")
		rcl=$(awk '{printf "%.2f", $1 + $2}' "$res.consume-raw.time")
	fi
	stop_server
	rm -rf "$WORK/data-$target-$run"
	log "run $run $target: produce $prod MiB/s (cpu server $pcpu s, client $pcl s), consume $cons MiB/s (cpu server $ccpu s, client $ccl s), raw consume $raw MiB/s (cpu server $rcpu s, client $rcl s)"
	echo "$target $run $prod $cons $pcpu $ccpu $pcl $ccl $raw $rcpu $rcl" >>"$WORK/results"
}

# ceilings RUN appends "ceilings run pagecache loopback" to $WORK/results.
ceilings() {
	local out="$WORK/ceilings-$1.json" pc lo
	"$WORK/bin/ceilings" --dir "$WORK" --bytes $((RECORDS * SIZE)) >"$out"
	pc=$(printf '%.1f' "$(json_field "$out" pagecache_mib_per_sec)")
	lo=$(printf '%.1f' "$(json_field "$out" loopback_mib_per_sec)")
	log "run $1 ceilings: page-cache append ${pc} MiB/s, loopback TCP ${lo} MiB/s"
	echo "ceilings $1 $pc $lo - - - - - - -" >>"$WORK/results"
}

# col TARGET FIELD prints the median of column FIELD (3-11) for TARGET.
col() {
	local fmt=%.2f
	[[ $2 -le 4 || $2 -eq 9 ]] && fmt=%.1f
	# shellcheck disable=SC2046
	median "$fmt" $(awk -v t="$1" -v f="$2" '$1 == t && $f != "-" {print $f}' "$WORK/results")
}

report() {
	local bh syn kd kdc kdr synr v vc vr pc lo
	bh=$(col kfake-blackhole 3)
	syn=$(col kfake-synthetic 4)
	kd=$(col kfake-datadir 3)
	kdc=$(col kfake-datadir 4)
	v=$(col vltava 3)
	vc=$(col vltava 4)
	kdr=$(col kfake-datadir 9)
	synr=$(col kfake-synthetic 9)
	vr=$(col vltava 9)
	pc=$(col ceilings 3)
	lo=$(col ceilings 4)
	echo
	echo "records=$RECORDS size=$SIZE partitions=$PARTITIONS acks=$ACKS compression=$COMPRESSION linger=$LINGER runs=$RUNS"
	echo "$START_TIME-$(date -u +%H:%M) UTC, load average (1/5/15 min) at start $LOAD_START, at end $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")"
	echo "medians; MiB/s = 2^20 bytes/s of record values; cpu = CPU seconds (user+sys) in the phase"
	printf '%-18s %9s %9s %9s   %-23s %-23s\n' "" "MiB/s" "" "" "server cpu s" "client cpu s"
	printf '%-18s %9s %9s %9s   %7s %7s %7s %7s %7s %7s\n' target produce consume raw produce consume raw produce consume raw
	for t in $TARGETS; do
		printf '%-18s %9s %9s %9s   %7s %7s %7s %7s %7s %7s\n' "$t" "$(col "$t" 3)" "$(col "$t" 4)" "$(col "$t" 9)" \
			"$(col "$t" 5)" "$(col "$t" 6)" "$(col "$t" 10)" "$(col "$t" 7)" "$(col "$t" 8)" "$(col "$t" 11)"
	done
	printf '%-18s %9s\n' "page-cache append" "$pc"
	printf '%-18s %9s\n' "loopback TCP" "$lo"
	echo
	echo "vltava / kfake-blackhole produce:   $(ratio "$v" "$bh")   (target >= 0.9)"
	echo "vltava / kfake-datadir   produce:   $(ratio "$v" "$kd")   (target >= 1.2)"
	echo "vltava / kfake-datadir   consume:   $(ratio "$vc" "$kdc")   (target >= 3)"
	echo "vltava / kfake-datadir   raw cons:  $(ratio "$vr" "$kdr")   (target >= 3)"
	echo "vltava / kfake-synthetic consume:   $(ratio "$vc" "$syn")"
	echo "vltava / kfake-synthetic raw cons:  $(ratio "$vr" "$synr")"
	echo "vltava produce / page-cache append: $(ratio "$v" "$pc")"
	echo "vltava produce / loopback TCP:      $(ratio "$v" "$lo")"
	echo "vltava consume / loopback TCP:      $(ratio "$vc" "$lo")"
	echo "vltava raw consume / loopback TCP:  $(ratio "$vr" "$lo")"
	if [[ " $TARGETS " == *" vltava-copy "* ]]; then
		echo "vltava zero-copy / copy consume:    $(ratio "$vc" "$(col vltava-copy 4)")"
		echo "vltava zero-copy / copy raw cons:   $(ratio "$vr" "$(col vltava-copy 9)")"
	fi
	if [[ " $TARGETS " == *" vltava-alt "* ]]; then
		echo "vltava-alt / kfake-blackhole produce: $(ratio "$(col vltava-alt 3)" "$bh")"
		echo "vltava-alt / kfake-datadir produce:   $(ratio "$(col vltava-alt 3)" "$kd")"
		echo "vltava-alt / kfake-datadir consume:   $(ratio "$(col vltava-alt 4)" "$kdc")"
		echo "vltava-alt / kfake-datadir raw cons:  $(ratio "$(col vltava-alt 9)" "$kdr")"
	fi
	echo
	echo "per run (target run produce consume server-cpu-produce server-cpu-consume client-cpu-produce client-cpu-consume raw-consume server-cpu-raw client-cpu-raw):"
	sort -k1,1 -k2,2n "$WORK/results" | sed 's/^/  /'
}

build
: >"$WORK/results"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")
START_TIME=$(date -u +%H:%M)
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
