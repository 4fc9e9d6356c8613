#!/usr/bin/env bash
# load.sh runs `vltava perf load` against fresh single-node vltavad
# brokers, interleaving named cases, and prints one line per run plus the
# medians (issue 15: targets 2 and 4). Each case is NAME=ARGS, ARGS being
# perf load flags; every run gets a fresh data directory, a fresh broker,
# `sync` before it, and --broker-pid for the broker's CPU.
#
#   RUNS=3 tools/bench/load.sh \
#     'plain=--producers 10 --consumers 0 --partitions 6 --acks all' \
#     'durable=--producers 10 --consumers 0 --partitions 6 --acks all --topic-config flush.messages=1'
#
# Environment: RUNS (3), DURATION (8s), VLTAVAD / VLTAVA (prebuilt
# binaries; built from the tree otherwise), TMPDIR (data directories; use
# a real disk, not tmpfs, when fsync matters), FSYNC_BYTES (256 MiB: the
# fsync'd-append ceiling measured once per run set, 0 to skip),
# FSYNC_FILES (6: the same ceiling also over this many files appended and
# fsynced at once, what a broker with that many partitions can do; 0 or 1
# to skip),
# BROKER_ARGS (extra vltavad flags), VLTAVAD_<NAME> (the broker binary
# for case NAME only, for A/B runs of patched builds).
set -euo pipefail
RUNS=${RUNS:-3}
DURATION=${DURATION:-8s}
FSYNC_BYTES=${FSYNC_BYTES:-$((256 << 20))}
FSYNC_FILES=${FSYNC_FILES:-6}
root=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/vltava-load.XXXXXX")
SERVER_PID=""
cleanup() {
	if [[ -n $SERVER_PID ]]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
	rm -rf "$WORK"
}
trap cleanup EXIT
log() { echo "load.sh: $*" >&2; }
if [[ -z ${VLTAVAD:-} ]]; then VLTAVAD=$WORK/vltavad; (cd "$root" && go build -o "$VLTAVAD" ./daemon); fi
if [[ -z ${VLTAVA:-} ]]; then VLTAVA=$WORK/vltava; (cd "$root" && go build -o "$VLTAVA" ./tools/vltava); fi
(cd "$root" && go build -o "$WORK/ceilings" ./tools/bench/ceilings)
echo "# $(date -u +%FT%TZ) nproc $(nproc) load $(cut -d' ' -f1-3 /proc/loadavg) go $(go env GOVERSION) tree $(cd "$root" && git rev-parse --short HEAD)"
for run in $(seq "$RUNS"); do
	for c in "$@"; do
		name=${c%%=*}
		args=${c#*=}
		sync
		dir=$WORK/data-$name-$run
		mkdir -p "$dir"
		out=$WORK/server-$name-$run.out
		: >"$out"
		# shellcheck disable=SC2086
		bin_var=VLTAVAD_$name
		setsid "${!bin_var:-$VLTAVAD}" --listen 127.0.0.1:0 --data-dir "$dir" --log-level warn ${BROKER_ARGS:-} >"$out" 2>&1 &
		SERVER_PID=$!
		addr=""
		for _ in $(seq 300); do
			addr=$(sed -n 's/.*ready: listening on \([^ ,]*\).*/\1/p' "$out" | head -n1)
			[[ -n $addr ]] && break
			sleep 0.1
		done
		[[ -n $addr ]] || { log "$name run $run: broker not ready"; cat "$out" >&2; exit 1; }
		# shellcheck disable=SC2086
		line=$("$VLTAVA" -b "$addr" perf load bench --duration "$DURATION" --broker-pid "$SERVER_PID" --json $args 2>/dev/null) ||
			log "$name run $run: perf load failed"
		echo "$name $run $(cut -d' ' -f1 /proc/loadavg) $line"
		kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
		rm -rf "$dir"
	done
	if ((FSYNC_BYTES > 0)); then
		sync
		echo "ceiling $run $(cut -d' ' -f1 /proc/loadavg) $("$WORK/ceilings" --dir "$WORK" --bytes $((64 << 20)) --fsync-bytes "$FSYNC_BYTES" --fsync-files "$FSYNC_FILES")"
	fi
done | tee "$WORK/results"
echo "# end $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
# Medians per case: produce MiB/s, consume MiB/s, aggregate, broker cpu-s/GiB, produce p99.
python3 - "$WORK/results" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, run, load, js = line.split(" ", 3)
    try:
        d = json.loads(js)
    except ValueError:
        continue
    rows.setdefault(name, []).append(d)
def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")
for name, ds in rows.items():
    if name == "ceiling":
        print(f"median {name}: fsync'd append {med([d.get('fsync_mib_per_sec') for d in ds]):.1f} MiB/s "
              f"({ds[0].get('fsync_chunk')} B chunks), "
              f"over {ds[0].get('fsync_files')} files at once {med([d.get('fsync_files_mib_per_sec') for d in ds]):.1f} MiB/s, "
              f"page cache {med([d['pagecache_mib_per_sec'] for d in ds]):.1f} MiB/s")
        continue
    print(f"median {name} ({len(ds)} runs): produce {med([d['produce']['mb_per_sec'] for d in ds]):.1f} MiB/s "
          f"p99 {med([d['produce']['latency']['p99_ms'] for d in ds]):.1f} ms, "
          f"consume {med([(d.get('consume') or {}).get('mb_per_sec') for d in ds]):.1f} MiB/s, "
          f"aggregate {med([d['aggregate_mb_per_sec'] for d in ds]):.1f} MiB/s, "
          f"broker {med([d.get('broker_cpu_cores') for d in ds]):.2f} cores, "
          f"{med([d.get('broker_cpu_seconds_per_gib') for d in ds]):.3f} cpu-s/GiB")
PY
