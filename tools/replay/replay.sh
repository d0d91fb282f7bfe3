#!/usr/bin/env bash
# Process replay: every kernel plan that the tests, samples and the benchmark suite make, at two
# commits, diffed (the tinygrad practice). A change below the scheduler should leave generated
# kernels byte-identical, or explain each difference in its commit.
#
#   tools/replay/replay.sh [OLD [NEW]]    (default: HEAD~1 and the working tree's HEAD)
#
# Each commit is checked out in a worktree under $KILN_REPLAY_WORK (default /tmp/kiln-replay),
# built there (release preset; ccache is used when installed) and run with KILN_REPLAY_DIR set,
# so that every codegen writes each plan it makes as text (sdk/plan/include/kiln/plan/replay.h).
# What runs: the ctest tests matching $KILN_REPLAY_TESTS (default: the codegen and target tests,
# the frontend, capture and format tests, and the samples) and `kiln show --plan` of every sample
# graph. Both commits must have the replay hook (sdk/plan/src/replay.cpp).
# Prints a summary and writes the full diff to $KILN_REPLAY_WORK/replay.diff; exits 1 when any
# plan differs or exists at one commit only.
set -euo pipefail
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
old=$(git -C "$repo" rev-parse "${1:-HEAD~1}")
new=$(git -C "$repo" rev-parse "${2:-HEAD}")
work=${KILN_REPLAY_WORK:-/tmp/kiln-replay}
tests=${KILN_REPLAY_TESTS:-'^(test_cpu_target|test_cpu_target_ops|test_cuda_target|test_vulkan_target|test_schedule|test_format|test_frontend|test_capture|sample_.*)$'}
mkdir -p "$work"
command -v ccache >/dev/null && export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache

record() {  # record <sha> <out dir>
  local sha=$1 out=$2 tree="$work/tree-${1:0:12}"
  if [ ! -d "$tree" ]; then git -C "$repo" worktree add --detach "$tree" "$sha" >/dev/null; fi
  [ -f "$tree/sdk/plan/src/replay.cpp" ] || { echo "replay: commit ${sha:0:12} has no replay hook (sdk/plan/src/replay.cpp)"; exit 2; }
  echo "replay: building ${sha:0:12} in $tree"
  (cd "$tree" && cmake --preset release -DKILN_WITH_WASM=OFF >"$work/configure-${sha:0:12}.log" 2>&1 &&
     cmake --build --preset release >"$work/build-${sha:0:12}.log" 2>&1) ||
    { echo "replay: the build of ${sha:0:12} failed (see $work/build-${sha:0:12}.log)"; exit 2; }
  rm -rf "$out" && mkdir -p "$out"
  echo "replay: running ${sha:0:12}'s tests and samples"
  (cd "$tree/build/release" && KILN_REPLAY_DIR="$out" KILN_FORCE_DISABLE_CACHES=1 \
     ctest -R "$tests" -j2 >"$work/ctest-${sha:0:12}.log" 2>&1) || echo "replay: some tests of ${sha:0:12} failed (see $work/ctest-${sha:0:12}.log)"
  for g in "$tree"/samples/graphs/*.json; do
    KILN_REPLAY_DIR="$out" KILN_FORCE_DISABLE_CACHES=1 "$tree/build/release/native/kiln" show "$g" --plan >/dev/null 2>&1 || true
  done
  echo "replay: ${sha:0:12} made $(ls "$out" | wc -l) plans"
}

record "$old" "$work/plans-old"
record "$new" "$work/plans-new"
set +e
diff -r "$work/plans-old" "$work/plans-new" >"$work/replay.diff"
status=$?
set -e
only_old=$(grep -c "^Only in $work/plans-old" "$work/replay.diff" || true)
only_new=$(grep -c "^Only in $work/plans-new" "$work/replay.diff" || true)
changed=$(grep -c "^diff -r" "$work/replay.diff" || true)
echo "replay: ${old:0:12} -> ${new:0:12}: $changed plans differ, $only_old only before, $only_new only after (diff in $work/replay.diff)"
exit $(( status == 0 ? 0 : 1 ))
