#!/usr/bin/env bash
# Installs the built tree into a fresh prefix and builds tests/install/consumer against it, the
# way a CPU-only user would on a machine without the CUDA toolkit: find_package(CUDAToolkit) is
# disabled while configuring, the program must not need any library of the toolkit, and it runs
# with the toolkit's folder hidden (an empty folder mounted over it, where this machine lets an
# unprivileged mount namespace be made; said on stdout either way). It must not link LLVM either:
# the CPU target's LLVM code is the installed module libkiln_cpu_llvm.so, which the run loads from
# the prefix (KILN_MODULE_DIR: the package was configured for another prefix than this one).
set -euo pipefail
build_dir=$1; source_dir=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" > "$work/install.log"
cmake -S "$source_dir/tests/install/consumer" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON > "$work/configure.log"
cmake --build "$work/build" > "$work/build.log"
if ldd "$work/build/app" | grep -E "libcuda|libnvrtc|libnvJitLink|libcublas"; then
  echo "check_install: the consumer needs a CUDA toolkit library (above); Kiln's CUDA target must load them when first used" >&2
  exit 1
fi
if ldd "$work/build/app" | grep -E "libLLVM"; then
  echo "check_install: the consumer links LLVM (above); Kiln's LLVM code must be in its modules (docs/target.md)" >&2
  exit 1
fi
module=$(find "$work/prefix" -name libkiln_cpu_llvm.so | head -1)
if [ -z "$module" ]; then
  echo "check_install: libkiln_cpu_llvm.so was not installed" >&2
  exit 1
fi
export KILN_MODULE_DIR=$(dirname "$module")
echo "modules from $KILN_MODULE_DIR"
# What the consumer must run without: the CUDA toolkit, and LLVM (the module links LLVM's
# component libraries into itself). Hidden under empty folders in a mount namespace.
hide=()
for d in /usr/local/cuda /usr/local/cuda-*; do [ -d "$d" ] && hide+=("$(readlink -f "$d")") && break; done
[ -d /usr/lib/llvm-16 ] && hide+=(/usr/lib/llvm-16)
mkdir -p "$work/empty"
if [ ${#hide[@]} -gt 0 ] && unshare -rm sh -c 'mount --bind "$1" "$2"' sh "$work/empty" "${hide[0]}" 2>/dev/null; then
  echo "running the consumer with ${hide[*]} hidden"
  unshare -rm sh -c 'e=$1; app=$2; shift 2; for d in "$@"; do mount --bind "$e" "$d" || exit 1; done; exec "$app"' \
    sh "$work/empty" "$work/build/app" "${hide[@]}"
else
  echo "running the consumer (${hide[*]:-nothing to hide}; not hidden: this machine allows no mount namespace)"
  "$work/build/app"
fi
