#!/usr/bin/env bash
# retained.sh measures a single-node vltavad with growing retained data
# (issue 15, targets 5 and 6). One broker data directory grows through
# SIZES (GiB, ascending) in topic "ret" (PARTITIONS partitions, topic
# configs TOPIC_CONFIG, default segment.bytes 1 GiB). At each size it:
#
#  1. fills "ret" up to the size with `perf produce --acks 1` (1 KiB
#     records), after checking that the disk keeps FREE_MARGIN_GIB free;
#  2. restarts the broker cleanly (SIGTERM, start) and prints the time
#     from exec to "ready: listening" and the broker's CPU seconds then;
#  3. produces a small unflushed tail (TAIL_RECORDS x 1 KiB, acks=1) on
#     top of the flushed log (Close flushed everything), kills the broker
#     with SIGKILL, restarts it and prints the same figures, then checks
#     that the end offsets are those produced and (VERIFY=all, default)
#     reads every record back with `perf consume --raw`;
#  4. restarts cleanly once more and runs `vltava perf load` (LOAD_ARGS,
#     DURATION) against "ret" and, interleaved in the same broker, against
#     a freshly created empty topic "ctl" of the same shape (deleted after
#     each run): produce/consume MiB/s, produce p99 and the broker's
#     CPU-s/GiB for each, RUNS times; the summary gives medians and the
#     per-run ratio ret/ctl, which the box's load cancels out of.
#
# The data directory is deleted at the end, also on failure.
#
#   SIZES="1 10 40" RUNS=3 TMPDIR=/work/tmp tools/bench/retained.sh
#   SIZES=1 TOPIC_CONFIG=segment.bytes=10485760 tools/bench/retained.sh  # 100 segments
#
# Environment: SIZES ("1 10"), PARTITIONS (1), TOPIC_CONFIG (""),
# RUNS (3), DURATION (8s), LOAD_ARGS ("--producers 4 --consumers 1"),
# TAIL_RECORDS (65536), VERIFY (all or ends), FREE_MARGIN_GIB (20),
# MAX_GIB (50: never hold more test data than this), BROKER_ARGS (extra
# vltavad flags, e.g. --in-process-plugins: without plugin processes to
# spawn the restart is the broker's own), VLTAVAD / VLTAVA
# (prebuilt binaries; built from the tree otherwise), TMPDIR.
set -euo pipefail
SIZES=${SIZES:-1 10}
PARTITIONS=${PARTITIONS:-1}
TOPIC_CONFIG=${TOPIC_CONFIG:-}
RUNS=${RUNS:-3}
RESTARTS=${RESTARTS:-3}
DURATION=${DURATION:-8s}
LOAD_ARGS=${LOAD_ARGS:---producers 4 --consumers 1}
TAIL_RECORDS=${TAIL_RECORDS:-65536}
VERIFY=${VERIFY:-all}
FREE_MARGIN_GIB=${FREE_MARGIN_GIB:-20}
MAX_GIB=${MAX_GIB:-50}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/vltava-retained.XXXXXX")
pid=""
cleanup() {
	if [[ -n $pid ]]; then kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log() { echo "retained.sh: $*" >&2; }
if [[ -z ${VLTAVAD:-} ]]; then VLTAVAD=$work/vltavad; (cd "$root" && go build -o "$VLTAVAD" ./daemon); fi
if [[ -z ${VLTAVA:-} ]]; then VLTAVA=$work/vltava; (cd "$root" && go build -o "$VLTAVA" ./tools/vltava); fi
data=$work/data
ctldata=$work/ctl-data
mkdir -p "$data" "$ctldata"
results=$work/results
: >"$results"
note() { echo "$*" | tee -a "$results"; }

# cpu PID: the process's user+system CPU seconds from /proc/PID/stat.
cpu() {
	awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / hz }' "/proc/$1/stat"
}

# start OUT DIR: starts the broker on DIR, waits for readiness; sets pid,
# addr, elapsed (seconds from exec to ready) and startcpu (its CPU-s then).
start() {
	: >"$1"
	local t0 t1
	addr=""
	t0=$(date +%s.%N)
	"$VLTAVAD" --listen 127.0.0.1:0 --metrics-listen "" --data-dir "$2" --log-level warn ${BROKER_ARGS:-} >"$1" 2>&1 &
	pid=$!
	for _ in $(seq 12000); do
		addr=$(sed -n 's/.*ready: listening on \([^ ,]*\).*/\1/p' "$1" | head -n1)
		[[ -n $addr ]] && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.01
	done
	[[ -n $addr ]] || { cat "$1" >&2; exit 1; }
	t1=$(date +%s.%N)
	startcpu=$(cpu "$pid")
	elapsed=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b - a}')
}

stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }
crash() { kill -9 "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }

# retained: bytes of the "ret" partitions' directories.
# retained [DIR], segments [DIR]: bytes and segment files of DIR's "ret".
retained() { du -scb "${1:-$data}"/ret-* 2>/dev/null | tail -n1 | cut -f1; }
segments() { find "${1:-$data}" -path "*/ret-*" -name '*.log' | wc -l; }
# ends TOPIC: the sum of the topic's log end offsets.
ends() { "$VLTAVA" -b "$addr" topic describe "$1" | awk 'f { s += $6 } /^PARTITION/ { f = 1 } END { print s + 0 }'; }
freegib() { df -BG --output=avail "$work" | tail -n1 | tr -dc 0-9; }

# fill GIB: produce 1 KiB records into "ret" until it holds GIB GiB.
fill() {
	local want=$(($1 << 30)) have need free
	have=$(retained)
	need=$(((want - have) / 1024))
	((need > 0)) || return 0
	free=$(freegib)
	if (($1 > MAX_GIB || free - (want - have) / (1 << 30) < FREE_MARGIN_GIB)); then
		log "filling to $1 GiB needs $(((want - have) >> 30)) GiB more: ${free} GiB free, margin ${FREE_MARGIN_GIB} GiB, limit ${MAX_GIB} GiB; stopping"
		exit 1
	fi
	local t0 t1
	t0=$(date +%s.%N)
	"$VLTAVA" -b "$addr" perf produce ret --records "$need" --record-size 1024 --acks 1 --json >/dev/null 2>"$work/fill.err" ||
		{ cat "$work/fill.err" >&2; exit 1; }
	t1=$(date +%s.%N)
	note "# fill to $1 GiB: $need records in $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b - a}') s, ${free} GiB free before, $(freegib) GiB after"
}

echo "# $(date -u +%FT%TZ) nproc $(nproc) load $(cut -d' ' -f1-3 /proc/loadavg) go $(go env GOVERSION) tree $(cd "$root" && git rev-parse --short HEAD)" | tee -a "$results"
shape=(-p "$PARTITIONS")
if [[ -n $TOPIC_CONFIG ]]; then for kv in ${TOPIC_CONFIG//,/ }; do shape+=(-c "$kv"); done; fi
# The control broker's "ret" holds only the unflushed tails of its own
# restarts: the same restart on (nearly) no retained data, interleaved.
start "$work/out" "$ctldata"
"$VLTAVA" -b "$addr" topic create ret "${shape[@]}" >/dev/null
stop
start "$work/out" "$data"
note "# first start of an empty broker: $elapsed s, $startcpu CPU-s"
"$VLTAVA" -b "$addr" topic create ret "${shape[@]}" >/dev/null
for size in $SIZES; do
	fill "$size"
	stop
	for rep in $(seq "$RESTARTS"); do
		for d in ret ctl; do
			dir=$data
			[[ $d == ctl ]] && dir=$ctldata
			sync
			start "$work/out" "$dir"
			clean="$elapsed $startcpu"
			produced=$(ends ret)
			"$VLTAVA" -b "$addr" perf produce ret --records "$TAIL_RECORDS" --record-size 1024 --acks 1 --json >/dev/null 2>&1
			produced=$((produced + TAIL_RECORDS))
			crash
			start "$work/out" "$dir"
			got=$(ends ret)
			back="-"
			if [[ $VERIFY == all && $rep == 1 ]]; then
				back=$("$VLTAVA" -b "$addr" perf consume ret --raw --records "$produced" --json 2>/dev/null | sed -n 's/.*"records":\([0-9]*\).*/\1/p')
			fi
			note "restart $size $d $rep clean $clean kill9 $elapsed $startcpu segments $(segments "$dir") bytes $(retained "$dir") end $got of $produced read $back load $(cut -d' ' -f1 /proc/loadavg)"
			[[ $got == "$produced" ]] || { log "end offsets $got, produced $produced"; exit 1; }
			[[ $back == - || $back == "$produced" ]] || { log "read back $back of $produced"; exit 1; }
			stop
		done
	done
	((RUNS > 0)) || { start "$work/out" "$data"; continue; }
	sync
	start "$work/out" "$data"
	for run in $(seq "$RUNS"); do
		for c in ret ctl; do
			# The load grows "ret" (and "ctl" while it exists): stay in bounds.
			if (($(freegib) < FREE_MARGIN_GIB || $(retained) >> 30 >= MAX_GIB - 4)); then
				log "$(freegib) GiB free, $(($(retained) >> 30)) GiB retained: stopping"
				exit 1
			fi
			if [[ $c == ctl ]]; then
				"$VLTAVA" -b "$addr" topic create ctl "${shape[@]}" >/dev/null
			fi
			# shellcheck disable=SC2086
			line=$("$VLTAVA" -b "$addr" perf load "$c" --duration "$DURATION" --broker-pid "$pid" --json $LOAD_ARGS 2>/dev/null) ||
				log "$c $size run $run: perf load failed"
			note "load $size $c $run $(cut -d' ' -f1 /proc/loadavg) $line"
			if [[ $c == ctl ]]; then
				"$VLTAVA" -b "$addr" topic delete ctl >/dev/null
			fi
		done
	done
done
stop
echo "# end $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$results" <<'PY'
import json, statistics, sys
restarts, loads = [], {}
for line in open(sys.argv[1]):
    f = line.split()
    if not f or f[0] == "#":
        continue
    if f[0] == "restart":
        restarts.append(f)
    elif f[0] == "load":
        size, case, run = f[1], f[2], f[3]
        try:
            d = json.loads(line.split(" ", 5)[5])
        except (ValueError, IndexError):
            continue
        loads.setdefault(size, {}).setdefault(case, {})[run] = d
def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")
rs = {}
for f in restarts:
    rs.setdefault(f[1], {}).setdefault(f[2], []).append((float(f[5]), float(f[6]), float(f[8]), float(f[9]), f[11]))
print("Restart, exec -> ready in s (broker CPU-s at ready), medians; runs in brackets:")
print()
print("| size GiB | segments | clean: retained | clean: control | kill -9: retained | kill -9: control |")
print("| ---: | ---: | --- | --- | --- | --- |")
for size, ds in rs.items():
    cells = []
    for i in (0, 2):
        for d in ("ret", "ctl"):
            xs = ds.get(d, [])
            cells.append(f"**{med([x[i] for x in xs]):.2f}** ({med([x[i+1] for x in xs]):.2f}) [{' / '.join(f'{x[i]:.2f}' for x in xs)}]")
    segs = ds.get("ret", [(0, 0, 0, 0, "?")])[0][4]
    print(f"| {size} | {segs} | " + " | ".join(cells) + " |")
def fig(d):
    c = d.get("consume") or {}
    return (d["produce"]["mb_per_sec"], c.get("mb_per_sec"), d["produce"]["latency"]["p99_ms"], d.get("broker_cpu_seconds_per_gib"))
print()
print("| size GiB | topic | produce MiB/s | consume MiB/s | produce p99 ms | broker CPU-s/GiB (runs) | ret/ctl CPU-s/GiB (runs) |")
print("| ---: | --- | ---: | ---: | ---: | --- | --- |")
for size, cases in loads.items():
    for case in ("ret", "ctl"):
        runs = cases.get(case, {})
        figs = [fig(d) for d in runs.values()]
        if not figs:
            continue
        cpus = [x[3] for x in figs]
        ratio = ""
        if case == "ret":
            rs = [runs[r]["broker_cpu_seconds_per_gib"] / cases["ctl"][r]["broker_cpu_seconds_per_gib"]
                  for r in runs if r in cases.get("ctl", {}) and cases["ctl"][r].get("broker_cpu_seconds_per_gib")]
            ratio = f"**{med(rs):.2f}** ({' / '.join(f'{r:.2f}' for r in rs)})"
        print(f"| {size} | {case} | {med([x[0] for x in figs]):.1f} | {med([x[1] for x in figs]):.1f} | {med([x[2] for x in figs]):.0f} | "
              f"**{med(cpus):.3f}** ({' / '.join(f'{c:.3f}' for c in cpus if c is not None)}) | {ratio} |")
PY
