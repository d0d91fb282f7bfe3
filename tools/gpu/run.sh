#!/usr/bin/env bash
# On the GPU machine (the device tool), from the repository root, with devcarry/ carried (made by
# tools/gpu/pack.sh here): runs the CUDA target's tests on the GPU (every op case and the random
# graph differential tester, compiled for the device and compared with the reference
# interpreter), then optional steps, writing logs under $OUT (default out/gpu).
# Usage: tools/gpu/run.sh [tests] [memcheck] [bench] [torch] [table] [cache]     (default: tests)
# bench: kiln bench --device cuda (KILN_BENCH_ARGS adds options); torch: shared/bench/torch_anchor.py
# --device cuda (copied into devcarry/ by pack.sh; TORCH_ANCHOR_ARGS adds options), same machine;
# table: both in one command, `kiln bench --device cuda --anchor torch_anchor.py`, which prints one
# table of Kiln's best mode against torch's best variant and the CUDA target's goals;
# cache: kiln cache bench --small on each of KILN_CACHE_DEVICES (default "cpu cuda"; KILN_CACHE_ARGS adds options).
# KILN_CARRY: the carried folder pack.sh filled (default devcarry).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out/gpu}
mkdir -p "$out"
carry=${KILN_CARRY:-devcarry}
for z in "$carry"/bin/*.gz "$carry"/lib/*.gz "$carry"/redis/*.gz; do [ -f "$z" ] && gunzip -f "$z"; done
chmod +x "$carry"/bin/* "$carry"/redis/* 2>/dev/null
export LD_LIBRARY_PATH="$PWD/$carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests)
start=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - start ))s] $*" | tee -a "$out/summary.txt"; }
stamp "machine: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
ldd "$carry"/bin/* | grep "not found" | sort -u | tee -a "$out/summary.txt"
status=0
for step in "${steps[@]}"; do
  case "$step" in
    tests)
      stamp "test_cuda_target (ops + differential + runtime) on the GPU"
      $carry/bin/test_cuda_target --log_level=message --report_level=short ${KILN_GPU_TEST_ARGS:-} >"$out/cuda_target.log" 2>&1
      rc=$?; [ $rc -ne 0 ] && status=$rc
      grep -E "^cuda target|test cases|assertions|failure|No errors" "$out/cuda_target.log" | tee -a "$out/summary.txt"
      grep -E "op [a-z_0-9]+: .* cases" "$out/cuda_target.log" | sed 's/\x1b\[[0-9;]*m//g' | grep -v " 0 failing outputs" | tee -a "$out/summary.txt"
      stamp "test_onnx_real_models (small real-model exports against torch) on the GPU"
      $carry/bin/test_onnx_real_models --log_level=message --report_level=short >"$out/real_models.log" 2>&1
      rc=$?; [ $rc -ne 0 ] && status=$rc
      grep -E "skipped|test cases|assertions|failure|error|No errors" "$out/real_models.log" | tee -a "$out/summary.txt"
      ;;
    memcheck)
      stamp "compute-sanitizer memcheck over the op tests of ${KILN_MEMCHECK_OPS:-add,sum,softmax,matmul,layer_norm}"
      filter=$(echo "${KILN_MEMCHECK_OPS:-add,sum,softmax,matmul,layer_norm}" | sed 's/,/:ops\//g')
      timeout "${KILN_MEMCHECK_TIMEOUT:-240}" compute-sanitizer --tool memcheck --error-exitcode 9 \
        $carry/bin/test_cuda_target --run_test="ops/$filter" --log_level=message \
        >"$out/memcheck.log" 2>&1
      rc=$?; [ $rc -ne 0 ] && status=$rc
      grep -E "op [a-z_]+: |ERROR SUMMARY|Invalid|errors detected|failure" "$out/memcheck.log" | sed "s/\x1b\[[0-9;]*m//g" | tee -a "$out/summary.txt"
      ;;
    bench)
      stamp "kiln bench --device cuda ${KILN_BENCH_ARGS:-}"
      $carry/bin/kiln bench --device cuda --json "$out/kiln_bench.jsonl" ${KILN_BENCH_ARGS:-} >"$out/bench.log" 2>&1
      rc=$?; [ $rc -ne 0 ] && status=$rc
      cat "$out/bench.log" | tee -a "$out/summary.txt"
      ;;
    torch)
      stamp "python3 torch_anchor.py --device cuda ${TORCH_ANCHOR_ARGS:-}"
      PYTHONUNBUFFERED=1 python3 $carry/torch_anchor.py --device cuda ${TORCH_ANCHOR_ARGS:-} >"$out/torch_anchor.jsonl" 2>"$out/torch_anchor.err"
      rc=$?; [ $rc -ne 0 ] && status=$rc
      cat "$out/torch_anchor.jsonl" | tee -a "$out/summary.txt"
      tail -5 "$out/torch_anchor.err"
      ;;
    table)
      stamp "kiln bench --device cuda ${KILN_BENCH_ARGS:-} --anchor torch_anchor.py --anchor-args '${TORCH_ANCHOR_ARGS:-}'"
      PYTHONUNBUFFERED=1 $carry/bin/kiln bench --device cuda --json "$out/table.jsonl" ${KILN_BENCH_ARGS:-} \
        --anchor "$carry/torch_anchor.py" --anchor-args "${TORCH_ANCHOR_ARGS:-}" >"$out/table.log" 2>"$out/table.err"
      rc=$?; [ $rc -ne 0 ] && status=$rc
      cat "$out/table.log" | tee -a "$out/summary.txt"
      grep -v "UserWarning\|warn_once" "$out/table.err" | tail -5
      ;;
    cache)
      # The compile caches' benchmark (cold, warm local, warm remote) on the host CPU and the GPU,
      # with the redis-server pack.sh carried when the machine has none.
      [ -x "$carry/redis/redis-server" ] && export PATH="$PWD/$carry/redis:$PATH"
      for dev in ${KILN_CACHE_DEVICES:-cpu cuda}; do
        # The suite's CPU sizes on every device: the bench times compiles and hits, which sizes
        # barely change, and at GPU sizes making the inputs alone takes minutes.
        stamp "kiln cache bench --small --device $dev ${KILN_CACHE_ARGS:-}"
        $carry/bin/kiln cache bench --small --device "$dev" ${KILN_CACHE_ARGS:-} >"$out/cache_$dev.log" 2>&1
        rc=$?; [ $rc -ne 0 ] && status=$rc
        cat "$out/cache_$dev.log" | tee -a "$out/summary.txt"
      done
      ;;
    *) echo "unknown step $step"; status=2 ;;
  esac
done
stamp "done (status $status)"
exit $status
