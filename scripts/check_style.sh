#!/usr/bin/env bash
# House-style checks (shared/spec/house-style.md §4.13): clang-format clean, and no source file over
# the 600-line cap.
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files '*.cc' '*.h' '*.cu' '*.cuh' 2>/dev/null || find src tests bench -name '*.cc' -o -name '*.h')
clang-format --dry-run -Werror $files
long=$(wc -l $files | awk '$2 != "total" && $1 > 600 {print $2 " (" $1 " lines)"}')
if [ -n "$long" ]; then
  echo "files over the 600-line cap:"; echo "$long"; exit 1
fi
echo "style: clang-format clean, no file over 600 lines"
