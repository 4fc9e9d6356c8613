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
# includes the one produce). Environment: VLTAVAD, VLTAVA (prebuilt
# binaries; built from the tree otherwise), TMPDIR (data directory).
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
echo "$kind: broker cpu ticks $((c1 - c0)) for 6 x 293 MiB ($(awk -v t=$((c1 - c0)) 'BEGIN{printf "%.3f", t / 100 / (6 * 300000 * 1024 / 2^30)}') cpu-s/GiB), load $(cut -d' ' -f1 /proc/loadavg)"
kill "$pid"
wait "$pid" 2>/dev/null || true
pid=""
