#!/usr/bin/env bash
# Builds the graph-format fuzzer (and, when the ONNX frontend builds, the ONNX loader fuzzer) with
# clang, ASan and UBSan in its own build folder and runs each over its seed corpus, then for
# -runs=20000 -max_total_time=60 more inputs (the ONNX one: ONNX_FUZZ_RUNS, ONNX_FUZZ_SECONDS,
# default 5000 and 30). CI calls this.
#   tests/fuzz/run_fuzz.sh [BUILD_DIR]        (default: build-fuzz in the repository root)
# Environment: CXX (default clang++-14, else clang++), FUZZ_RUNS, FUZZ_SECONDS, JOBS (ninja -j).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build-fuzz}"
cxx="${CXX:-}"
if [[ -z "$cxx" ]]; then
  if command -v clang++-14 >/dev/null; then cxx=clang++-14; else cxx=clang++; fi
fi
runs="${FUZZ_RUNS:-20000}"
seconds="${FUZZ_SECONDS:-60}"

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
  -DKILN_BUILD_FUZZERS=ON -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_SAMPLES=OFF -DKILN_BUILD_BENCH=OFF >/dev/null
ninja -C "$build" ${JOBS:+-j "$JOBS"} fuzz_graph_json
onnx_fuzzer=0
# ninja -t query, not `-t targets all | grep -q`: under pipefail, grep -q's exit at the first match
# could fail the pipeline with ninja's SIGPIPE, and the ONNX fuzzer was then skipped.
if ninja -C "$build" -t query fuzz_onnx_model >/dev/null 2>&1; then
  ninja -C "$build" ${JOBS:+-j "$JOBS"} fuzz_onnx_model
  onnx_fuzzer=1
fi

# New inputs go to a scratch corpus, never into the committed seeds.
work="$build/fuzz/graph_json"
mkdir -p "$work/corpus" "$work/artifacts"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
"$build/tests/fuzz/fuzz_graph_json" -dict="$root/tests/fuzz/graph_json.dict" -max_len=65536 \
  -artifact_prefix="$work/artifacts/" -runs="$runs" -max_total_time="$seconds" -print_final_stats=1 \
  "$work/corpus" "$root/tests/fuzz/corpus/graph_json"
echo "fuzz_graph_json: no findings"

# The ONNX loader: protobuf bytes of models (seeds: small models of libonnx-testdata).
if [[ "$onnx_fuzzer" == 1 ]]; then
  work="$build/fuzz/onnx_model"
  mkdir -p "$work/corpus" "$work/artifacts"
  "$build/tests/fuzz/fuzz_onnx_model" -max_len=4096 -artifact_prefix="$work/artifacts/" \
    -runs="${ONNX_FUZZ_RUNS:-5000}" -max_total_time="${ONNX_FUZZ_SECONDS:-30}" -print_final_stats=1 \
    "$work/corpus" "$root/tests/fuzz/corpus/onnx_model"
  echo "fuzz_onnx_model: no findings"
else
  echo "fuzz_onnx_model: not built (no ONNX frontend in this build: libonnx-dev, libprotobuf-dev)"
fi
