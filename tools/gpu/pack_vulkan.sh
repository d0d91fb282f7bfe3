#!/usr/bin/env bash
# Here (the build machine, no GPU): builds what tools/gpu/run_vulkan.sh runs on the GPU machine and
# puts it, stripped, into a carry folder (default devcarry-vk/, git-ignored by /devcarry*/; name it
# in the device tool's `carry`, with .gl for the Vulkan loader, see the device README): kiln (built
# with the CUDA and Vulkan targets, so `kiln bench --device vulkan` and `--device cuda` run in one
# call), test_vulkan_target, Boost.Test's shared library, the validation layers' .deb (unpacked
# there under /tmp, not /) and the torch anchor. The binaries travel gzipped (2 x 36 MB stripped,
# 2 x 11 MB compressed: the carried tree must stay under 64 MiB); run_vulkan.sh unpacks them.
# Usage: KILN_CARRY=devcarry-vk tools/gpu/pack_vulkan.sh [build dir, default build/vulkan]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/vulkan}
carry=${KILN_CARRY:-devcarry-vk}
[ -f "$build/CMakeCache.txt" ] || cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKILN_WITH_CUDA=ON -DKILN_WITH_VULKAN=ON -DKILN_WITH_WASM=OFF
grep -q "KILN_WITH_CUDA:BOOL=ON" "$build/CMakeCache.txt" || { echo "$build: configure with -DKILN_WITH_CUDA=ON"; exit 1; }
grep -q "KILN_WITH_VULKAN:BOOL=ON" "$build/CMakeCache.txt" || { echo "$build: configure with -DKILN_WITH_VULKAN=ON"; exit 1; }
cmake --build "$build" -j2 --target test_vulkan_target kiln
rm -rf "$carry" && mkdir -p "$carry/bin" "$carry/lib"
strip -o "$carry/bin/test_vulkan_target" "$build/tests/vulkan_target/test_vulkan_target"
strip -o "$carry/bin/kiln" "$build/native/kiln"
# Kiln's modules (LLVM's code, loaded at first use): beside the binaries, where kiln::modules looks.
for m in "$build"/lib/kiln/*.so; do strip -o "$carry/bin/$(basename "$m")" "$m"; done
for lib in $(ldd "$carry"/bin/* | awk '/boost|hiredis|libcrypto|libssl|onnx|protobuf|libgomp/ {print $3}' | sort -u); do
  cp -L "$lib" "$carry/lib/"
done
gzip -6 "$carry/bin/test_vulkan_target" "$carry/bin/kiln"
# The validation layers (Debian's vulkan-validationlayers), as the .deb: 4 MB instead of 22.
if ! ls /tmp/kiln-vvl/vulkan-validationlayers_*.deb >/dev/null 2>&1; then
  mkdir -p /tmp/kiln-vvl
  (cd /tmp/kiln-vvl && apt-get -oAPT::Architecture=amd64 download vulkan-validationlayers)
fi
cp /tmp/kiln-vvl/vulkan-validationlayers_*.deb "$carry/"
cp ../shared/bench/torch_anchor.py "$carry/" 2>/dev/null || true
du -sh "$carry"; ls -la "$carry" "$carry/bin" "$carry/lib"
