#!/usr/bin/env bash
# On the GPU machine (the device tool), from the repository root, with the carry folder made by
# tools/gpu/pack_vulkan.sh (KILN_CARRY, default devcarry-vk) and .gl (the Vulkan loader's .debs,
# see the device README) carried: brings the loader (and NVIDIA's ICD where the loader finds none),
# unpacks the validation layers under /tmp, then runs the steps, logs under $OUT (default out/gpu).
# Usage: tools/gpu/run_vulkan.sh [tests] [bench] [torch]     (default: tests bench)
# tests: test_vulkan_target (every op case, 250 random graphs, runtime and frontend cases) on
#        vulkan:0 with validation layers on (KILN_GPU_TEST_ARGS adds options);
# graphs: each graph or plan file KILN_GRAPHS names (a glob) through `kiln run --target vulkan --random
#        --check` with its kernels logged, outputs of vulkan and reference kept for comparison;
# bench: kiln bench --device vulkan, then --device cuda, in this one call (KILN_BENCH_ARGS adds
#        options to both); torch: torch_anchor.py --device cuda.
set -uo pipefail
cd "$(dirname "$0")/../.."
carry=${KILN_CARRY:-devcarry-vk}
out=${OUT:-out/gpu}
mkdir -p "$out"
start=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - start ))s] $*" | tee -a "$out/summary.txt"; }
if ! ldconfig -p | grep -q libvulkan.so.1; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && ! ls /usr/share/vulkan/icd.d/*nvidia* /etc/vulkan/icd.d/*nvidia* >/dev/null 2>&1; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
bin=/tmp/kiln-vk-bin
rm -rf "$bin" && mkdir -p "$bin"
for f in "$carry"/bin/*.gz; do gunzip -c "$f" >"$bin/$(basename "$f" .gz)"; chmod +x "$bin/$(basename "$f" .gz)"; done
rm -rf /tmp/kiln-vvl && mkdir -p /tmp/kiln-vvl
dpkg -x "$carry"/vulkan-validationlayers_*.deb /tmp/kiln-vvl
export VK_LAYER_PATH=/tmp/kiln-vvl/usr/share/vulkan/explicit_layer.d
export LD_LIBRARY_PATH="$PWD/$carry/lib:/tmp/kiln-vvl/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests bench)
stamp "machine: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
"$bin/kiln" list-devices 2>&1 | tee -a "$out/summary.txt"
status=0
for step in "${steps[@]}"; do
  case "$step" in
    tests)
      stamp "test_vulkan_target on vulkan:0, validation layers on"
      KILN_VULKAN_VALIDATION=1 timeout "${KILN_TEST_TIMEOUT:-300}" "$bin/test_vulkan_target" --log_level=message \
        --report_level=short ${KILN_GPU_TEST_ARGS:-} >"$out/vulkan_target.log" 2>&1
      rc=$?; [ $rc -ne 0 ] && status=$rc
      echo "exit status $rc" | tee -a "$out/summary.txt"
      grep -E "^vulkan target|test cases|assertions|failure|No errors|error: in" "$out/vulkan_target.log" | head -40 | tee -a "$out/summary.txt"
      grep -E "op [a-z_0-9]+: .* cases|random graphs" "$out/vulkan_target.log" | sed 's/\x1b\[[0-9;]*m//g' | grep -v " 0 failing outputs" | tee -a "$out/summary.txt"
      ;;
    graphs)
      mkdir -p "$out/graphs"
      for g in ${KILN_GRAPHS:-}; do
        name=$(basename "$g" .json)
        stamp "kiln run $g --target vulkan --random --check"
        check=--check; grep -q '"kiln.plan"' "$g" && check=  # (a plan file has no graph to check against)
        KILN_VULKAN_VALIDATION=1 KILN_LOGS=output_code "$bin/kiln" run "$g" --target vulkan --random $check \
          --out "$out/graphs/${name}_vulkan" >"$out/graphs/$name.log" 2>&1
        rc=$?; [ $rc -ne 0 ] && status=$rc
        grep -E "^check|rror" "$out/graphs/$name.log" | tee -a "$out/summary.txt"
        [ -n "$check" ] && "$bin/kiln" run "$g" --random --out "$out/graphs/${name}_reference" >/dev/null 2>&1
      done
      ;;
    bench)
      for dev in vulkan cuda; do
        stamp "kiln bench --device $dev ${KILN_BENCH_ARGS:-}"
        # The GPU's clocks and performance state while it runs (read-only queries).
        nvidia-smi --query-gpu=timestamp,pstate,clocks.sm,clocks.mem,power.draw --format=csv,noheader -lms 250 \
          >"$out/clocks_$dev.csv" 2>/dev/null &
        smi=$!
        timeout "${KILN_BENCH_TIMEOUT:-200}" "$bin/kiln" bench --device $dev --modes default --json "$out/bench_$dev.jsonl" \
          ${KILN_BENCH_ARGS:-} >"$out/bench_$dev.log" 2>&1
        rc=$?; [ $rc -ne 0 ] && status=$rc
        kill $smi 2>/dev/null; wait $smi 2>/dev/null
        cat "$out/bench_$dev.log" | tee -a "$out/summary.txt"
        echo "clocks during the $dev bench (pstate, sm MHz, mem MHz: counts):" | tee -a "$out/summary.txt"
        awk -F', ' '{print $2, $3, $4}' "$out/clocks_$dev.csv" | sort | uniq -c | sort -rn | head -4 | tee -a "$out/summary.txt"
      done
      ;;
    torch)
      stamp "python3 torch_anchor.py --device cuda ${TORCH_ANCHOR_ARGS:-}"
      PYTHONUNBUFFERED=1 python3 "$carry/torch_anchor.py" --device cuda ${TORCH_ANCHOR_ARGS:-} >"$out/torch_anchor.jsonl" 2>"$out/torch_anchor.err"
      rc=$?; [ $rc -ne 0 ] && status=$rc
      cat "$out/torch_anchor.jsonl" | tee -a "$out/summary.txt"
      ;;
    *) echo "unknown step $step"; status=2 ;;
  esac
done
stamp "done (status $status)"
exit $status
