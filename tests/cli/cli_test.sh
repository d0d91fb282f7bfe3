#!/usr/bin/env bash
# End-to-end test of the `kiln` tool (CTest: cli_kiln).
#   cli_test.sh KILN SAMPLES_DIR WORK_DIR
set -uo pipefail
kiln="$1"; samples="$2"; work="$3"
rm -rf "$work"; mkdir -p "$work"
failures=0
source "$(dirname "$0")/expect.sh"

mlp="$samples/mlp.json"

# Help and usage mistakes.
expect 0 'usage: kiln <command>' -- "$kiln" --help
expect 0 'usage: kiln run GRAPH.json' -- "$kiln" run --help
expect 0 'usage: kiln show GRAPH.json' -- "$kiln" show --help
expect 0 'usage: kiln list-options' -- "$kiln" list-options --help
expect 0 'usage: kiln list-backends' -- "$kiln" list-backends --help
expect 2 "unknown command 'frobnicate'" -- "$kiln" frobnicate
# Nothing at start loads LLVM (docs/target.md, "Modules"): help, and showing a graph, never need
# it; running one on the cpu target loads the cpu target's module, which holds LLVM.
# (The loader's log goes to a file: grep -q ending a pipe early would fail it under pipefail.)
for cmd in "--help" "show $mlp"; do
  LD_DEBUG=files "$kiln" $cmd >/dev/null 2>"$work/ld.log"
  grep -q -E "libLLVM|libkiln_[a-z]+_llvm" "$work/ld.log" && fail "kiln $cmd loaded LLVM"
done
LD_DEBUG=files "$kiln" run "$mlp" --target cpu --random >/dev/null 2>"$work/ld.log"
grep -q "libkiln_cpu_llvm.so" "$work/ld.log" || fail "kiln run --target cpu did not load libkiln_cpu_llvm.so"
expect 2 'usage: kiln <command>' -- "$kiln"
expect 2 "unknown option '--bogus'" -- "$kiln" run "$mlp" --bogus
expect 2 'missing GRAPH.json' -- "$kiln" show
expect 2 "give either --inputs or --random" -- "$kiln" run "$mlp" --random --inputs a.npy
expect 2 "give --inputs" -- "$kiln" run "$mlp"
expect 2 "option '--seed' needs a value" -- "$kiln" run "$mlp" --random --seed

# Errors from Kiln: "kiln: error: ..." and status 1.
expect 1 "^kiln: error: cannot open graph, model or plan file '$work/none.json'" -- "$kiln" show "$work/none.json"
expect 1 "kiln: error: unknown target 'tpu' \(available: reference" -- "$kiln" run "$mlp" --target tpu --random
printf '{"format": "kiln.graph", "version": 2}' >"$work/v2.json"
expect 1 "kiln: error: .*v2.json: field 'version': unsupported graph format version 2" -- "$kiln" show "$work/v2.json"

# show: the listing, symbols and guards.
expect 0 '= linear\(' -- "$kiln" show "$mlp"
expect 0 'input 0 \(x\): size\[1\] == 16' -- "$kiln" show "$mlp"
expect 0 'size\[0\] binds s0, which must lie in \[2, inf\]' -- "$kiln" show "$samples/dynamic_softmax.json"

# run --random on every sample.
expect 0 'output 0 \(node [0-9]+\): f32\[8, 16\]' -- "$kiln" run "$mlp" --random
expect 0 'first 8 of 128' -- "$kiln" run "$mlp" --random --seed 3
for f in softmax layernorm transformer_block dynamic_softmax; do
  expect 0 'output 0' -- "$kiln" run "$samples/$f.json" --random
done

# A graph that would need 4 TiB (an expand to [2^20, 2^20], then exp) is refused before anything
# is allocated, naming the node (reference interpreter) or the buffer and the kernel and nodes
# that write it (cpu runtime), against the memory budget (issue 31); memory_budget_mb lowers it.
cat >"$work/huge.json" <<'JSON'
{"format": "kiln.graph", "version": 1, "symbols": [], "facts": [],
 "nodes": [
  {"id": 0, "op": "input", "name": "x", "attrs": {"index": 0}, "type": {"dtype": "f32", "shape": [1, 1], "device": "cpu"}},
  {"id": 1, "op": "expand", "inputs": [0], "attrs": {"shape": [1048576, 1048576]}, "type": {"dtype": "f32", "shape": [1048576, 1048576], "device": "cpu"}},
  {"id": 2, "op": "exp", "inputs": [1], "type": {"dtype": "f32", "shape": [1048576, 1048576], "device": "cpu"}}
 ],
 "outputs": [2]}
JSON
expect 1 '^kiln: error: run_graph: node %1 \(expand\): cannot allocate a f32 tensor of shape \[1048576, 1048576\]: it needs 4\.0 TiB, more than the memory budget of .* \(the host.s physical memory' -- "$kiln" run "$work/huge.json" --random
expect 1 'it needs 4\.0 TiB, more than the memory budget of 64\.0 MiB \(memory_budget_mb\)' -- env KILN_MEMORY_BUDGET_MB=64 "$kiln" run "$work/huge.json" --random

# The reference interpreter counts what it holds: three 16 MiB values live at once pass 40 MiB.
cat >"$work/held.json" <<'JSON'
{"format": "kiln.graph", "version": 1, "symbols": [], "facts": [],
 "nodes": [
  {"id": 0, "op": "input", "name": "x", "attrs": {"index": 0}, "type": {"dtype": "f32", "shape": [2048, 2048], "device": "cpu"}},
  {"id": 1, "op": "exp", "inputs": [0], "type": {"dtype": "f32", "shape": [2048, 2048], "device": "cpu"}},
  {"id": 2, "op": "sin", "inputs": [0], "type": {"dtype": "f32", "shape": [2048, 2048], "device": "cpu"}},
  {"id": 3, "op": "add", "inputs": [1, 2], "type": {"dtype": "f32", "shape": [2048, 2048], "device": "cpu"}}
 ],
 "outputs": [3]}
JSON
expect 1 '^kiln: error: run_graph: node %3 \(add\) would allocate 16\.0 MiB for its f32\[2048, 2048\] output with 32\.0 MiB held, more than the memory budget of 40\.0 MiB \(memory_budget_mb\)$' -- env KILN_MEMORY_BUDGET_MB=40 "$kiln" run "$work/held.json" --random
expect 0 'output 0' -- env KILN_MEMORY_BUDGET_MB=64 "$kiln" run "$work/held.json" --random

# The cpu target (when built): every sample compiled, checked against the reference, and
# deterministic over repeated runs; show --schedule/--plan/--code print the compiler's work.
if "$kiln" run --help | grep -q -- '--check'; then
  for f in mlp softmax layernorm transformer_block dynamic_softmax; do
    expect 0 'check output 0: .* \(ok\)' -- "$kiln" run "$samples/$f.json" --random --target cpu --check --repeat 3
  done
  # NaN where the reference has NaN and the same infinities agree (exp(-inf) = 0, exp(inf) = inf).
  cat >"$work/nonfinite.json" <<'JSON'
{"format": "kiln.graph", "version": 1, "symbols": [], "facts": [],
 "nodes": [
  {"id": 0, "op": "input", "name": "x", "attrs": {"index": 0}, "type": {"dtype": "f32", "shape": [4], "device": "cpu"}},
  {"id": 1, "op": "constant", "attrs": {"value": {"dtype": "f32", "shape": [4], "data_base64": "AACAfwAAgP/K8klxAADAfw=="}}, "type": {"dtype": "f32", "shape": [4], "device": "cpu"}},
  {"id": 2, "op": "mul", "inputs": [0, 1], "type": {"dtype": "f32", "shape": [4], "device": "cpu"}},
  {"id": 3, "op": "exp", "inputs": [1], "type": {"dtype": "f32", "shape": [4], "device": "cpu"}}],
 "outputs": [2, 3]}
JSON
  expect 0 'check output 1: relative L2 error 0, max abs error 0 \(ok\)' -- "$kiln" run "$work/nonfinite.json" --random --target cpu --check
  # KILN_LOGS=profile: each kernel's time, reported after the 4th call; the device line says
  # which library the matmuls call.
  expect 0 'kernels on cpu \([0-9]+ threads\), [0-9.]+ ms in all' -- env KILN_LOGS=profile "$kiln" run "$samples/transformer_block.json" --random --target cpu --repeat 4
  expect 0 'matmul +k[0-9]+: over [0-9]+, writes f32\[' -- env KILN_LOGS=profile "$kiln" run "$samples/transformer_block.json" --random --target cpu --repeat 4
  expect 0 '^cpu: .*[0-9]+ threads; matmuls through (oneDNN [0-9.]+ sgemm|OpenBLAS|Kiln)' -- "$kiln" list-devices
  # cpu.blas picks the library: OpenBLAS when asked; a bad name is refused.
  expect 0 '^cpu: .*[0-9]+ threads; matmuls through (OpenBLAS|Kiln)' -- env KILN_CPU_BLAS=openblas "$kiln" list-devices
  expect 1 "config option 'cpu.blas': it must be auto, onednn or openblas" -- env KILN_CPU_BLAS=mkl "$kiln" list-devices
  expect 0 'kernel k0 \(reduction\)' -- "$kiln" show "$samples/layernorm.json" --schedule
  expect 0 'fused %[0-9]+ \(var\) into kernel 0' -- "$kiln" show "$samples/layernorm.json" --schedule
  expect 0 'kernel plan v1 for cpu: 1 kernel' -- "$kiln" show "$samples/layernorm.json" --plan
  expect 0 'define void @k0\(ptr noalias %buffers' -- "$kiln" show "$samples/layernorm.json" --code
  # A saved plan is shown and run by itself.
  expect 0 'wrote .*tb_plan.json' -- "$kiln" show "$samples/transformer_block.json" --save-plan "$work/tb_plan.json"
  expect 0 'kernel plan v1 for cpu: [0-9]+ kernels' -- "$kiln" show "$work/tb_plan.json"
  expect 0 'output 0: f32\[8, 16\]' -- "$kiln" run "$work/tb_plan.json" --random
  # A plan is native code: a plan file runs only when Kiln makes the same plan from its origin.
  # An edited kernel is refused by name; so is a plan without an origin; --trust-plan runs them.
  sed -E '/^    \{"name": /s/fadd/fsub/' "$work/tb_plan.json" >"$work/tb_edited.json"
  expect 1 "^kiln: error: kiln run: .*tb_edited.json is not the plan Kiln makes from its origin: kernels\\[[0-9]+\\] \\('[a-z0-9_]+'\\): its 'source' differs \\(it was edited after it was made\\)\\..*--trust-plan" -- "$kiln" run "$work/tb_edited.json" --random
  expect 0 'output 0: f32\[8, 16\]' -- "$kiln" run "$work/tb_edited.json" --random --trust-plan
  expect 1 '^kiln: error: cpu runtime: a call at these sizes would allocate 4\.0 TiB \(intermediates 0 bytes, outputs 4\.0 TiB\), more than the memory budget of .*; the largest is buffer [0-9]+ \(output f32\[1048576, 1048576\]\), written by kernel .* \(nodes %2\), 4\.0 TiB$' -- "$kiln" run "$work/huge.json" --random --target cpu
  # kiln run goes through the compile caches as kiln::compile does: the second run of a graph
  # compiles nothing (assert_no_compile holds), and with an empty cache that is an error.
  expect 0 'output 0' -- env KILN_CACHE_DIR="$work/run_cache" "$kiln" run "$samples/layernorm.json" --random --target cpu
  expect 0 'check output 0: .* \(ok\)' -- env KILN_CACHE_DIR="$work/run_cache" KILN_ASSERT_NO_COMPILE=1 "$kiln" run "$samples/layernorm.json" --random --target cpu --check
  expect 1 'assert_no_compile is set, but .* would be compiled' -- env KILN_CACHE_DIR="$work/run_cache_empty" KILN_ASSERT_NO_COMPILE=1 "$kiln" run "$samples/layernorm.json" --random --target cpu
  grep -v '^  "origin": ' "$work/tb_plan.json" | sed -E 's/^(  "guards": .*),$/\1/' >"$work/tb_no_origin.json"
  expect 1 "^kiln: error: kiln run: .*tb_no_origin.json does not say what made it" -- "$kiln" run "$work/tb_no_origin.json" --random
  sed -E 's/("graph": ")/\1 /' "$work/tb_plan.json" >"$work/tb_graph_edited.json"
  expect 0 'output 0: f32\[8, 16\]' -- "$kiln" run "$work/tb_graph_edited.json" --random
  # Signed plans (builds with native/cache's HMAC): written while KILN_CACHE_SECRET is set, a plan
  # carries a signature; the secret's holders vouch for an edited plan by writing it again
  # (kiln show PLAN --save-plan), and it runs under the secret; another secret, no secret, or an
  # edit after signing falls back to the origin check, which the edited plan fails.
  expect 0 'wrote' -- env KILN_CACHE_SECRET=team "$kiln" show "$samples/transformer_block.json" --save-plan "$work/tb_signed.json"
  if grep -q '^  "signature": "[0-9a-f]\{64\}"' "$work/tb_signed.json"; then
    expect 0 'output 0: f32\[8, 16\]' -- "$kiln" run "$work/tb_signed.json" --random
    expect 0 'wrote .*tb_edited_signed.json' -- env KILN_CACHE_SECRET=team "$kiln" show "$work/tb_edited.json" --save-plan "$work/tb_edited_signed.json"
    expect 0 'output 0: f32\[8, 16\]' -- env KILN_CACHE_SECRET=team "$kiln" run "$work/tb_edited_signed.json" --random
    expect 1 "its 'source' differs .* Its signature does not verify with KILN_CACHE_SECRET" -- env KILN_CACHE_SECRET=other "$kiln" run "$work/tb_edited_signed.json" --random
    expect 1 "It is signed, but KILN_CACHE_SECRET is not set here" -- "$kiln" run "$work/tb_edited_signed.json" --random
    sed -E 's/("graph": ")/\1 /' "$work/tb_edited_signed.json" >"$work/tb_signed_then_edited.json"
    expect 1 "Its signature does not verify with KILN_CACHE_SECRET" -- env KILN_CACHE_SECRET=team "$kiln" run "$work/tb_signed_then_edited.json" --random
    sed -E 's/^  "signature": "[0-9a-f]{64}"/  "signature": "zz"/' "$work/tb_signed.json" >"$work/tb_bad_signature.json"
    expect 1 "tb_bad_signature.json: signature: is not 64 lowercase hex digits" -- "$kiln" run "$work/tb_bad_signature.json" --random
  else
    echo "skip: no signed plans in this build (KILN_WITH_REDIS=OFF: no HMAC)"
  fi
  # An edited plan file run with --trust-plan is still refused with an error naming what is
  # wrong (plan::validate at load, plan::bind at run), never run into a crash: a slot shrunk below
  # its intermediates, a kernel reading buffer 99, an intermediate grown past its slot.
  sed -E '0,/^  "slots": \[[0-9]+/s//  "slots": [4/' "$work/tb_plan.json" >"$work/tb_small_slot.json"
  expect 1 "^kiln: error: kiln run: .*tb_small_slot.json is not the plan Kiln makes from its origin: slots\\[0\\] differs" -- "$kiln" run "$work/tb_small_slot.json" --random
  expect 1 '^kiln: error: cpu runtime: buffer [0-9]+ \(intermediate .* bytes, but its slot 0 holds 4$' -- "$kiln" run "$work/tb_small_slot.json" --random --trust-plan
  sed -E '0,/"reads": \[/s//"reads": [99, /' "$work/tb_plan.json" >"$work/tb_read_99.json"
  expect 1 '^kiln: error: .*tb_read_99.json: kernels\[0\]\.reads\[0\]: buffer 99 does not exist \(the plan has [0-9]+ buffers\)' -- "$kiln" run "$work/tb_read_99.json" --random
  sed -E '0,/("kind": "intermediate", "dtype": "f32", "sizes": \[)([0-9]+)/s//\1\2000/' "$work/tb_plan.json" >"$work/tb_big_buffer.json"
  expect 1 '^kiln: error: ' -- "$kiln" run "$work/tb_big_buffer.json" --random --trust-plan
  # run --save-plan keeps the plan it ran; run again, it gives the same bytes.
  expect 0 'wrote .*r1/out0.npy' -- "$kiln" run "$samples/layernorm.json" --random --target cpu --save-plan "$work/ln_plan.json" --out "$work/r1"
  expect 0 'wrote .*r2/out0.npy' -- "$kiln" run "$work/ln_plan.json" --random --out "$work/r2"
  if cmp -s "$work/r1/out0.npy" "$work/r2/out0.npy"; then echo "ok: run --save-plan round trip"; else fail "run --save-plan: outputs differ"; fi
  expect 0 '\[kiln:output_code\] kernel plan v1 for cpu' -- env KILN_LOGS=output_code "$kiln" run "$work/ln_plan.json" --random
  # On a Vulkan device (lavapipe in CI): GPU time per run and per kernel.
  if "$kiln" list-devices 2>/dev/null | grep -q '^vulkan:0'; then
    expect 0 'median run [0-9.e-]+ ms of GPU time over 3 runs' -- env KILN_VULKAN_WARM_S=0 "$kiln" run "$samples/layernorm.json" --random --target vulkan --repeat 3
  fi
fi

# .npy round trip: an identity graph writes its random input x; feeding that file to mlp must
# give the same bytes as mlp --random with the same seed.
cat >"$work/identity.json" <<'JSON'
{"format": "kiln.graph", "version": 1,
 "nodes": [{"id": 0, "op": "input", "name": "x", "type": {"dtype": "f32", "shape": [8, 16]}}],
 "outputs": [0]}
JSON
expect 0 'wrote .*x/out0.npy' -- "$kiln" run "$work/identity.json" --random --seed 5 --out "$work/x"
expect 0 'wrote .*a/out0.npy' -- "$kiln" run "$mlp" --inputs "$work/x/out0.npy" --out "$work/a"
expect 0 'wrote .*b/out0.npy' -- "$kiln" run "$mlp" --random --seed 5 --out "$work/b"
if cmp -s "$work/a/out0.npy" "$work/b/out0.npy"; then echo "ok: npy round trip"; else fail "npy round trip: outputs differ"; fi
# A symbolic batch takes the file's size: mlp's output [8, 16] fed to dynamic_softmax.
expect 0 'output 0 \(node 1\): f32\[8, 16\]' -- "$kiln" run "$samples/dynamic_softmax.json" --inputs "$work/a/out0.npy"
# Input checks.
expect 1 'kiln: error: the graph takes 3 inputs, --inputs names 1 file' -- "$kiln" run "$samples/layernorm.json" --inputs "$work/x/out0.npy"
expect 1 'input 0 \(x\) from .*out0.npy: size mismatch at dim 0: expected 4, got 8' -- "$kiln" run "$samples/softmax.json" --inputs "$work/x/out0.npy"
head -c 100 "$work/x/out0.npy" >"$work/truncated.npy"
expect 1 'truncated.npy: truncated .npy file' -- "$kiln" run "$mlp" --inputs "$work/truncated.npy"

# bench --anchor: a stand-in anchor (the JSON lines torch_anchor.py prints) run after Kiln's
# workloads, one table of both; an anchor that fails is an error naming its command.
cat >"$work/anchor.py" <<'PY'
import argparse, json
ap = argparse.ArgumentParser()
ap.add_argument("--device"); ap.add_argument("--small", action="store_true"); ap.add_argument("--only", default="")
ap.add_argument("--modes", default="eager,default")
a = ap.parse_args()
print(json.dumps({"info": {"torch": "stand-in", "device": a.device}}))
for w in a.only.split(","):
    print(json.dumps({"workload": w, "impl": "torch_eager", "median_ms": 1000.0, "gbps": 0.1}))
    print(json.dumps({"workload": w, "impl": "torch_default", "median_ms": 500.0, "gbps": 0.2, "compile_s": 20.0}))
print(json.dumps({"workload": "col_sum", "impl": "torch_max_autotune", "error": "RuntimeError: stand-in"}))
PY
expect 0 'col_sum +[0-9.]+ \(default\) +500 \(default\) +[0-9.]+x .* 20\.000 +1/[0-9.]+' -- \
  "$kiln" bench --small --only col_sum --modes default --no-references --reps 2 --anchor "$work/anchor.py" --anchor-args "--modes eager,default"
expect 1 "bench --anchor: 'python3 .*missing.py.*' failed \(exit status 2\)" -- \
  "$kiln" bench --small --only col_sum --modes default --no-references --reps 2 --anchor "$work/missing.py"

# weights: an ONNX model's initializers (names as the exporter gave them) saved as .safetensors
# with a wrapper's prefix dropped, read back, and a damaged file refused by name.
gpt2="$(cd "$samples/../.." && pwd)/tests/onnx/real_models/gpt2/model.onnx"
if "$kiln" weights "$work/none.onnx" 2>&1 | grep -q "no ONNX frontend"; then
  echo "weights: this build has no ONNX frontend"
else
  expect 0 '^transformer\.h\.0\.attn\.c_attn\.weight  f32 \[64, 192\]' -- \
    "$kiln" weights "$gpt2" --strip-prefix inner. --save "$work/gpt2.safetensors"
  expect 0 '^28 tensors, 63654 values, 254740 bytes$' -- "$kiln" weights "$work/gpt2.safetensors" --quiet
  head -c 1000 "$work/gpt2.safetensors" > "$work/cut.safetensors"
  expect 1 "kiln: error: .*cut\.safetensors.*truncated" -- "$kiln" weights "$work/cut.safetensors"
  expect 1 "kiln: error: .*cannot open" -- "$kiln" weights "$work/none.onnx"
fi

# list-options and list-backends.
expect 0 'KILN_' -- "$kiln" list-options
expect 0 '.' -- "$kiln" list-backends

if [[ $failures -ne 0 ]]; then echo "$failures check(s) failed" >&2; exit 1; fi
echo "all kiln CLI checks passed"
