#!/usr/bin/env bash
# check-golden must report failures (exit 1) when the model differs from the reference: copy a
# golden folder, change the checkpoint's rope_theta, and expect failed checks on logits.
set -euo pipefail
bin=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$src"/. "$tmp"/
chmod -R u+w "$tmp"
sed -i 's/"rope_theta": 10000/"rope_theta": 5000/' "$tmp/checkpoint/config.json"
grep -q '"rope_theta": 5000' "$tmp/checkpoint/config.json"
set +e
"$bin" check-golden "$tmp" >"$tmp/out.txt" 2>&1
rc=$?
set -e
tail -1 "$tmp/out.txt"
[ "$rc" -eq 1 ] || { echo "expected exit 1, got $rc"; exit 1; }
grep -q '^FAIL  seq0.layer0.block_out' "$tmp/out.txt" || { echo "layer 0 (ratio 0, main RoPE) should fail"; exit 1; }
echo "check-golden detected the wrong RoPE base"
