#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang, ASan and UBSan in their own build folder
# and runs each over its committed seed corpus (tests/fuzz/corpus/<name>), then on new inputs
# until it has run -runs inputs or -max_total_time seconds. CI calls this. The fuzzers:
#   graph_json   the JSON graph format (from_json, round trip)            20000 runs, 20 s
#   graph_run    graph JSON, then small graphs on the reference interpreter and (with the CPU
#                target; the first 48 new graphs, then 1 in 16) compiled for the cpu target, run in
#                guarded memory and compared with the reference                 20000 runs, 20 s
#   npy          .npy bytes (parse_npy, round trip)                        20000 runs, 20 s
#   safetensors  .safetensors bytes (parse, round trip)                    20000 runs, 15 s
#   plan_json    kernel plans (plan_from_json, round trip, bind, reference kernels; cpu plans whose
#                kernel sources are Kiln's for their origin JIT-compiled and run on the cpu
#                runtime in guarded memory, foreign IR calling system() etc. refused)    20000 runs, 20 s
#   cache_entry  cache entries and bundles (decode_entry, the entry's plan validated,
#                load_cache_artifacts)                                     20000 runs, 20 s
#   onnx_model   the ONNX loader (protobuf bytes; input starting with '{': the JSON the browser's
#                decoder hands over, load_decoded), then the reference interpreter (only where
#                the ONNX frontend builds: libonnx-dev, libprotobuf-dev)   5000 runs, 30 s
# Any finding (a crash, a sanitizer report, an exception other than kiln::Error, a failed
# round trip) stops the script with the fuzzer's report; the input is in
# BUILD_DIR/fuzz/<name>/artifacts/. New inputs go to BUILD_DIR/fuzz/<name>/corpus, never into the
# committed seeds. Longer runs by hand: e.g. FUZZERS=plan_json FUZZ_SECONDS=600 FUZZ_RUNS=-1.
#   tests/fuzz/run_fuzz.sh [BUILD_DIR]        (default: build-fuzz in the repository root)
# Environment: CXX (default clang++-14, else clang++), JOBS (ninja -j), FUZZERS (names to run,
# space separated; default all), FUZZ_RUNS and FUZZ_SECONDS (every fuzzer's runs and seconds),
# <NAME>_FUZZ_RUNS and <NAME>_FUZZ_SECONDS for one of them (GRAPH_JSON, GRAPH_RUN, NPY, PLAN_JSON,
# SAFETENSORS, CACHE_ENTRY, ONNX: these win over FUZZ_RUNS and FUZZ_SECONDS).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build-fuzz}"
cxx="${CXX:-}"
if [[ -z "$cxx" ]]; then
  if command -v clang++-14 >/dev/null; then cxx=clang++-14; else cxx=clang++; fi
fi
fuzzers="${FUZZERS:-graph_json graph_run npy safetensors plan_json cache_entry onnx_model}"

# -g1: line tables are all a sanitizer report needs, and full debug info doubles the build.
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_CXX_COMPILER="$cxx" \
  -DKILN_BUILD_FUZZERS=ON -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_SAMPLES=OFF -DKILN_BUILD_BENCH=OFF >/dev/null
# The ONNX fuzzer exists only where the ONNX frontend builds. (ninja -t query, not `-t targets |
# grep -q`: under pipefail grep -q's early exit can fail the pipeline with SIGPIPE.)
targets=()
for f in $fuzzers; do
  if [[ "$f" == onnx_model ]] && ! ninja -C "$build" -t query fuzz_onnx_model >/dev/null 2>&1; then
    echo "fuzz_onnx_model: not built (no ONNX frontend in this build: libonnx-dev, libprotobuf-dev)"
    fuzzers="${fuzzers/onnx_model/}"
    continue
  fi
  targets+=("fuzz_$f")
done
ninja -C "$build" ${JOBS:+-j "$JOBS"} "${targets[@]}"

# intercept_tls_get_addr=0: clang 14's runtime can take a malloc'd block for a pre-2.25 glibc dynamic
# TLS header, and LeakSanitizer's exit tracer then dies ('Tracer caught signal 11') with no leak
# found (the sanitize preset sets it for the same reason). Leaks are still checked.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

# run NAME ENV_PREFIX DEFAULT_RUNS DEFAULT_SECONDS [libFuzzer flags...]
run() {
  local name=$1 prefix=$2 runs=$3 seconds=$4
  shift 4
  local runs_var="${prefix}_FUZZ_RUNS" seconds_var="${prefix}_FUZZ_SECONDS"
  runs="${!runs_var:-${FUZZ_RUNS:-$runs}}"
  seconds="${!seconds_var:-${FUZZ_SECONDS:-$seconds}}"
  local work="$build/fuzz/$name" seeds=()
  mkdir -p "$work/corpus" "$work/artifacts"
  [[ -d "$root/tests/fuzz/corpus/$name" ]] && seeds+=("$root/tests/fuzz/corpus/$name")
  # The scratch corpus first: libFuzzer writes new inputs to the first folder it is given.
  "$build/tests/fuzz/fuzz_$name" "$work/corpus" "${seeds[@]}" "$@" -artifact_prefix="$work/artifacts/" \
    -runs="$runs" -max_total_time="$seconds" -print_final_stats=1
  echo "fuzz_$name: no findings"
}

for f in $fuzzers; do
  case "$f" in
    graph_json) run graph_json GRAPH_JSON 20000 20 -dict="$root/tests/fuzz/graph_json.dict" -max_len=65536 ;;
    # Seeds: the graph_json corpus (the same graphs, now run), and corpus/graph_run's own.
    graph_run)
      run graph_run GRAPH_RUN 20000 20 "$root/tests/fuzz/corpus/graph_json" -dict="$root/tests/fuzz/graph_json.dict" \
        -max_len=65536 ;;
    npy) run npy NPY 20000 20 -dict="$root/tests/fuzz/npy.dict" -max_len=4096 ;;
    safetensors) run safetensors SAFETENSORS 20000 15 -dict="$root/tests/fuzz/safetensors.dict" -max_len=4096 ;;
    plan_json) run plan_json PLAN_JSON 20000 20 -dict="$root/tests/fuzz/plan_json.dict" -max_len=65536 ;;
    cache_entry) run cache_entry CACHE_ENTRY 20000 20 -max_len=65536 ;;
    # Protobuf bytes of models (seeds: small models of libonnx-testdata) and decoded JSON ones.
    onnx_model) run onnx_model ONNX 5000 30 -max_len=4096 ;;
    *) echo "run_fuzz.sh: unknown fuzzer '$f' (graph_json graph_run npy safetensors plan_json cache_entry onnx_model)" >&2; exit 2 ;;
  esac
done
