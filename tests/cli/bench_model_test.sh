#!/usr/bin/env bash
# kiln bench-model end to end (CTest: cli_kiln_bench_model) on a small CNN exported by torch
# (tests/onnx/torch_models): two modes, cold compiles, the JSON lines and the outputs, which
# must match torch's within fp32 tolerance (relative L2 <= 1e-5); then kiln run on one image (the
# dynamic batch at size 1).
#   bench_model_test.sh KILN MODEL_DIR WORK_DIR
set -euo pipefail
kiln="$1"; model="$2"; work="$3"
rm -rf "$work"; mkdir -p "$work"
KILN_FORCE_DISABLE_CACHES=1 "$kiln" bench-model "$model/model.onnx" --device cpu --inputs "$model/in_0_0.npy" \
  --modes default,reduce-overhead --reps 2 --out "$work/out" --json "$work/bench.jsonl"
python3 - "$work" "$model/out_0_0.npy" <<'PY'
import array, ast, json, math, sys
work, want_path = sys.argv[1], sys.argv[2]

def load_f32(path):  # a little-endian float32 .npy, C order (what torch's export and kiln write)
    with open(path, "rb") as f:
        data = f.read()
    assert data[:6] == b"\x93NUMPY", path
    header_len = int.from_bytes(data[8:10], "little") if data[6] == 1 else int.from_bytes(data[8:12], "little")
    start = 10 + header_len if data[6] == 1 else 12 + header_len
    header = ast.literal_eval(data[start - header_len:start].decode("latin1"))
    assert header["descr"] == "<f4" and not header["fortran_order"], (path, header)
    values = array.array("f")
    values.frombytes(data[start:])
    return header["shape"], values

lines = [json.loads(l) for l in open(f"{work}/bench.jsonl")]
assert [l["mode"] for l in lines] == ["default", "reduce-overhead"], lines
want_shape, want = load_f32(want_path)
for l in lines:
    assert l["kernels"] >= 5 and l["reference_ops"] == {}, l
    assert l["median_ms"] > 0 and l["first_call_s"] >= l["load_s"] > 0, l
    shape, got = load_f32(l["outputs"][0])
    assert shape == want_shape, (shape, want_shape)
    err = math.sqrt(sum((a - b) ** 2 for a, b in zip(got, want)) / sum(b * b for b in want))
    assert err <= 1e-5, (l["mode"], err)
    print(f"ok: {l['mode']}: {l['kernels']} kernels, relative L2 error {err:.2e}")
PY

# kiln run on the same model (a dynamic batch) with one image: the batch takes the file's size,
# 1 included (the import's example sizes), and the output is the first row of torch's.
python3 - "$model/in_0_0.npy" "$work/one.npy" <<'PY'
import ast, sys
data = open(sys.argv[1], "rb").read()
header_len = int.from_bytes(data[8:10], "little")
header = ast.literal_eval(data[10:10 + header_len].decode("latin1"))
shape = header["shape"]
per_image = 4
for s in shape[1:]:
    per_image *= s
new_header = repr({"descr": "<f4", "fortran_order": False, "shape": (1,) + tuple(shape[1:])})
new_header += " " * (63 - (10 + len(new_header)) % 64) + "\n"
with open(sys.argv[2], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + len(new_header).to_bytes(2, "little") + new_header.encode("latin1"))
    f.write(data[10 + header_len:10 + header_len + per_image])
PY
"$kiln" run "$model/model.onnx" --target cpu --inputs "$work/one.npy" --out "$work/one_out" > "$work/one_run.log"
python3 - "$work/one_out/out0.npy" "$model/out_0_0.npy" <<'PY'
import array, ast, math, sys
def load(path):
    data = open(path, "rb").read()
    n = int.from_bytes(data[8:10], "little")
    header = ast.literal_eval(data[10:10 + n].decode("latin1"))
    values = array.array("f")
    values.frombytes(data[10 + n:])
    return header["shape"], values
shape, got = load(sys.argv[1])
want_shape, want = load(sys.argv[2])
assert shape == (1,) + tuple(want_shape[1:]), (shape, want_shape)
row = want[:len(got)]
err = math.sqrt(sum((a - b) ** 2 for a, b in zip(got, row)) / sum(b * b for b in row))
assert err <= 1e-5, err
print(f"ok: kiln run at batch 1: relative L2 error {err:.2e}")
PY
