#!/usr/bin/env bash
# Soak test for `deepinfer serve` (issue #5 item 6): N concurrent streams (default 1,000) on
# loopback, a tenth of the clients hanging up at a random event. Passes when the server survives,
# every stream not dropped on purpose is well-formed (bench serve checks each chunk, the token
# count, usage and [DONE]), and the server's RSS returns to within a bound of its warm baseline.
# usage: scripts/soak_serve.sh [BUILD_DIR] [STREAMS]   (prints the figures docs/server.md quotes)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
streams=${2:-1000}
bin=$build/src/cli/deepinfer
work=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
ulimit -n 8192 2>/dev/null || true
"$bin" init-model --preset mini --out "$work/m" --seed 5 >/dev/null
"$bin" serve --model "$work/m" --port 0 --threads 2 --max-pending $((streams + 64)) \
  >"$work/out" 2>"$work/err" &
pid=$!
port=""
for _ in $(seq 1 600); do
  port=$(sed -n 's/.*listening on [0-9.]*:\([0-9]*\).*/\1/p' "$work/out")
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$work/err"; exit 1; }
rss() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }
url=http://127.0.0.1:$port/v1
# Warm-up: allocator arenas, the state pool's pages and the metrics families reach steady size.
"$bin" bench serve --url "$url" --num-prompts 128 --max-concurrency 128 --input-len 16 \
  --output-len 8 >/dev/null
base=$(rss)
echo "RSS after warm-up: $base KiB"
start=$(date +%s.%N)
"$bin" bench serve --url "$url" --num-prompts "$streams" --max-concurrency "$streams" \
  --input-len 16 --output-len 8 --disconnect-fraction 0.1 --seed 11 | tee "$work/bench"
end=$(date +%s.%N)
peak=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status")
sleep 2
after=$(rss)
kill -0 "$pid" || { echo "FAIL: the server died"; exit 1; }
echo "soak: $streams streams in $(python3 -c "print(round($end - $start, 1))") s;" \
  "RSS warm $base KiB, peak $peak KiB, after $after KiB"
# Back to baseline: within 10% + 16 MiB of the warm RSS (glibc keeps some freed pages).
python3 -c "import sys; sys.exit(0 if $after <= $base * 1.10 + 16384 else 1)" ||
  { echo "FAIL: RSS did not return to baseline"; exit 1; }
kill -TERM "$pid"
wait "$pid"
pid=""
echo "soak: ok (clean exit after SIGTERM)"
