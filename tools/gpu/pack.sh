#!/usr/bin/env bash
# Here (the build machine, no GPU): builds what tools/gpu/run.sh runs on the GPU machine and puts
# it, stripped, with the shared library that machine lacks (Boost.Test; it has CUDA 13, so NVRTC and
# cuBLASLt are its own), into devcarry/
# (git-ignored; name it in the device tool's `carry`). Usage: tools/gpu/pack.sh [build dir]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/cuda}
[ -f "$build/CMakeCache.txt" ] || cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j2 --target test_cuda_target kiln
rm -rf devcarry && mkdir -p devcarry/bin devcarry/lib
strip -o devcarry/bin/test_cuda_target "$build/tests/cuda_target/test_cuda_target"
strip -o devcarry/bin/kiln "$build/native/kiln"
for lib in $(ldd devcarry/bin/* | awk '/boost/ {print $3}' | sort -u); do
  cp -L "$lib" devcarry/lib/
done
cp ../shared/bench/torch_anchor.py devcarry/ 2>/dev/null || true
du -sh devcarry; ls -la devcarry/bin devcarry/lib
