#!/usr/bin/env bash
# Here (the build machine, no GPU): builds what tools/gpu/run.sh runs on the GPU machine and puts
# it, stripped, with the shared library that machine lacks (Boost.Test; it has CUDA 13, so NVRTC and
# cuBLASLt are its own), into devcarry/
# (git-ignored; name it in the device tool's `carry`). Usage: tools/gpu/pack.sh [build dir]
# KILN_CARRY names another folder (e.g. devcarry-a: one per engineer sharing the tree); run.sh
# reads the same variable.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/cuda}
[ -f "$build/CMakeCache.txt" ] || cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j2 --target test_cuda_target test_onnx_real_models kiln
carry=${KILN_CARRY:-devcarry}
case "$carry" in devcarry*) ;; *) echo "pack.sh: KILN_CARRY must name a devcarry* folder (git-ignored), not $carry" >&2; exit 2 ;; esac
rm -rf "$carry" && mkdir -p "$carry/bin" "$carry/lib"
strip -o "$carry/bin/test_cuda_target" "$build/tests/cuda_target/test_cuda_target"
strip -o "$carry/bin/kiln" "$build/native/kiln"
# The small real-model exports on CUDA (reads tests/onnx/real_models/ of the working tree there).
strip -o "$carry/bin/test_onnx_real_models" "$build/tests/onnx/test_onnx_real_models"
# Kiln's modules (LLVM's code, loaded at first use): beside the binaries, where kiln::modules looks.
for m in "$build"/lib/kiln/*.so; do strip -o "$carry/bin/$(basename "$m")" "$m"; done
# Libraries the GPU machine's image lacks (it has CUDA, LLVM 16 and the C/C++ runtimes).
for lib in $(ldd "$carry"/bin/* | awk '/boost|hiredis|libcrypto|libssl|onnx|protobuf|libgomp|libzip/ {print $3}' | sort -u); do
  cp -L "$lib" "$carry/lib/"
done
# oneDNN (kiln_sgemm opens libdnnl.so.2 where it is installed; the GPU machine has none) and
# the OpenMP and OpenCL loaders it needs.
for lib in /usr/lib/x86_64-linux-gnu/libdnnl.so.2 $(ldd /usr/lib/x86_64-linux-gnu/libdnnl.so.2 2>/dev/null | awk '/libgomp|libOpenCL/ {print $3}'); do
  [ -f "$lib" ] && cp -L "$lib" "$carry/lib/"
done
cp ../shared/bench/torch_anchor.py "$carry/" 2>/dev/null || true
# Debian's redis-server (the GPU machine has none) for run.sh's cache step; redis-check-rdb is the
# same binary, which picks its role by the name it is run as.
if [ -x /usr/bin/redis-check-rdb ]; then
  mkdir -p "$carry/redis"
  cp -L /usr/bin/redis-check-rdb "$carry/redis/redis-server"
  for lib in $(ldd /usr/bin/redis-check-rdb | awk '/liblzf|libjemalloc|libhiredis|libssl|libcrypto/ {print $3}' | sort -u); do
    cp -Ln "$lib" "$carry/lib/" 2>/dev/null || true
  done
fi
# Two stripped binaries are over the device tool's 64 MiB: they travel gzipped (run.sh unpacks).
gzip -5 "$carry"/bin/* "$carry"/lib/*
if [ -d "$carry/redis" ]; then gzip -5 "$carry"/redis/*; fi
du -sh "$carry"; ls -la "$carry/bin" "$carry/lib"
