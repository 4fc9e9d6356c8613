#!/usr/bin/env bash
# profile.sh KIND OUT.prof runs one fresh single-node vltavad with
# --cpuprofile OUT.prof and drives it with `vltava perf` (issue 15, target
# 3), printing the broker's CPU ticks (1/100 s, /proc/PID/stat utime +
# stime) spent in the measured phase:
#
#   produce: 6 x `perf produce bench --records 300000 --record-size 1024
#            --acks 1 --compression none --linger 0s` into 6 partitions
#   consume: one such produce (not counted), then 6 x `perf consume bench
#            --records 300000 --raw`
#
# Each phase moves 6 x 293 MiB = 1.72 GiB, so CPU-s/GiB = ticks / 100 /
# 1.72. The profile covers the broker's whole life (the consume profile
# includes the one produce).
#
# Before the broker starts and again right after the phase (broker still
# up) it measures the kernel floors on this machine at this moment
# (tools/bench/ceilings --floors,
# FLOOR_BYTES, 1 GiB by default, in the same data directory): CPU-s/GiB
# of write(2) into a fresh file, of sendfile(2) over loopback to another
# process (streaming, and in 6 MiB answers each followed by a 1-byte
# reply: one consumer's fetch loop), of a loopback receive and of CRC-32C
# (over a 64 MiB buffer). A produce's floor is write + receive + CRC-32C,
# a consume's is the fetch-loop sendfile; it prints the
# broker's figure, both floors and the broker's excess over each. On a VM
# that returns freed memory to its host the write floor moves by up to
# 13× with the host's state, within a minute (BENCHMARKS.md, issue 15
# session 4), so a broker's figure means little without them.
# FLOORS=0 skips them.
#
# Environment: VLTAVAD, VLTAVA, CEILINGS (prebuilt binaries; built from
# the tree otherwise), TMPDIR (data directory), FLOOR_BYTES, FLOORS.
#
#   tools/bench/profile.sh produce /tmp/produce.prof
#   go tool pprof -top VLTAVAD /tmp/produce.prof
set -euo pipefail
kind=${1:?usage: profile.sh produce|consume OUT.prof}
prof=${2:?usage: profile.sh produce|consume OUT.prof}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/vltava-profile.XXXXXX")
pid=""
cleanup() {
	if [[ -n $pid ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT
if [[ -z ${VLTAVAD:-} ]]; then VLTAVAD=$work/vltavad; (cd "$root" && go build -o "$VLTAVAD" ./daemon); fi
if [[ -z ${VLTAVA:-} ]]; then VLTAVA=$work/vltava; (cd "$root" && go build -o "$VLTAVA" ./tools/vltava); fi
FLOORS=${FLOORS:-1}
if [[ $FLOORS != 0 && -z ${CEILINGS:-} ]]; then CEILINGS=$work/ceilings; (cd "$root" && go build -o "$CEILINGS" ./tools/bench/ceilings); fi
floors() { # floors NAME: measure the floors into $work/floors-NAME.json and print them
	"$CEILINGS" --floors --dir "$work" --bytes "${FLOOR_BYTES:-1073741824}" >"$work/floors-$1.json"
	echo "$kind: kernel floors $1 (cpu-s/GiB): write fresh $(f "$1" write_fresh), recv $(f "$1" recv), crc32c $(f "$1" crc32c), sendfile $(f "$1" sendfile), sendfile in 6 MiB answers with a round trip $(f "$1" sendfile_fetch), load $(cut -d' ' -f1 /proc/loadavg)"
}
f() { sed -n "s/.*\"floor_$2_cpu_s_per_gib\":\([0-9.e+-]*\).*/\1/p" "$work/floors-$1.json" | xargs printf %.3f; }
if [[ $FLOORS != 0 ]]; then floors before; fi
out=$work/out
: >"$out"
"$VLTAVAD" --listen 127.0.0.1:0 --data-dir "$work/data" --log-level warn --cpuprofile "$prof" >"$out" 2>&1 &
pid=$!
addr=""
for _ in $(seq 300); do
	addr=$(sed -n 's/.*ready: listening on \([^ ,]*\).*/\1/p' "$out" | head -n1)
	[[ -n $addr ]] && break
	sleep 0.1
done
[[ -n $addr ]] || { cat "$out" >&2; exit 1; }
"$VLTAVA" -b "$addr" topic create bench -p 6 >/dev/null
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
produce() { "$VLTAVA" -b "$addr" perf produce bench --records 300000 --record-size 1024 --acks 1 --compression none --linger 0s --json 2>/dev/null; }
case $kind in
produce)
	c0=$(ticks)
	for _ in 1 2 3 4 5 6; do produce; done
	;;
consume)
	produce >/dev/null
	c0=$(ticks)
	for _ in 1 2 3 4 5 6; do "$VLTAVA" -b "$addr" perf consume bench --records 300000 --raw --json 2>/dev/null; done
	;;
*)
	echo "profile.sh: KIND is produce or consume" >&2
	exit 2
	;;
esac
c1=$(ticks)
perGiB=$(awk -v t=$((c1 - c0)) 'BEGIN{printf "%.3f", t / 100 / (6 * 300000 * 1024 / 2^30)}')
echo "$kind: broker cpu ticks $((c1 - c0)) for 6 x 293 MiB ($perGiB cpu-s/GiB), load $(cut -d' ' -f1 /proc/loadavg)"
if [[ $FLOORS != 0 ]]; then
	floors after
	for when in before after; do
		floor=$(f $when "$kind")
		echo "$kind: broker $perGiB, floor $when $floor, excess $(awk -v b="$perGiB" -v f="$floor" 'BEGIN{printf "%.3f (%.0f%% of the broker)", b - f, 100 * (b - f) / b}') cpu-s/GiB"
	done
fi
kill "$pid"
wait "$pid" 2>/dev/null || true
pid=""
