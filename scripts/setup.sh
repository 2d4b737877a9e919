#!/usr/bin/env bash
# Installs every dependency (Debian packages, npm test oracles) and builds DeepInfer. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(build-essential cmake ninja-build pkg-config
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libicu-dev libxxhash-dev
  clang libclang-rt-14-dev
  libboost1.81-dev prometheus-cpp-dev)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js may come from another source than Debian's `nodejs` package (whose `npm` then
# conflicts); only ask apt for them when the commands are missing.
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

# npm test oracles (HuggingFace tokenizers, DeepSeek V3 tokenizer.json, openai client, ajv).
if [ ! -f node_modules/.package-lock.json ] || [ package.json -nt node_modules/.package-lock.json ]; then
  npm install --no-audit --no-fund --loglevel=error
fi

# The CUDA backend (issue #6) builds whenever nvcc is present (CI has it, but no GPU: its tests
# skip there); DEEPINFER_CUDA=OFF in the environment turns it off.
CUDA_FLAGS=()
NVCC=$(command -v nvcc || true)
[ -z "$NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc
if [ -n "$NVCC" ] && [ "${DEEPINFER_CUDA:-ON}" != OFF ]; then
  CUDA_FLAGS=(-DDEEPINFER_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC")
fi

BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} "${CUDA_FLAGS[@]}" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
