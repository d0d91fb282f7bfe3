#!/usr/bin/python3
"""A BERT-base-structured encoder as ONNX (opset 18, random weights, one external data file),
written with onnx.helper: embeddings (word, position, token type), 12 layers of attention and
MLP with layer norms, as an exporter writes them (nodes named by module scope, as torch.onnx's
TorchScript exporter names them: "/encoder/layer.3/attention/self/query/MatMul_40"). For timing what reads models (the importer, the
inspector page) at a real model's size where torch is not installed: Debian's python3-onnx is
enough (run it with /usr/bin/python3). Weights are 436 MB at the defaults.
    /usr/bin/python3 tools/models/make_bert_onnx.py OUT_DIR [--layers 12] [--hidden 768] [--heads 12]"""
import argparse, os
import numpy as np
import onnx
from onnx import helper, TensorProto, numpy_helper

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--layers", type=int, default=12)
p.add_argument("--hidden", type=int, default=768)
p.add_argument("--heads", type=int, default=12)
p.add_argument("--vocab", type=int, default=30522)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--seq", type=int, default=128)
a = p.parse_args()
H, NH, I, L = a.hidden, a.heads, 4 * a.hidden, a.layers
rng = np.random.default_rng(0)
inits, nodes = [], []
def w(name, *shape, scale=0.02):
    inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)); return name
def c(name, arr):
    inits.append(numpy_helper.from_array(np.asarray(arr), name)); return name
n = [0]
scope = []  # module scopes, named into the nodes as torch.onnx's TorchScript exporter does ("/encoder/layer.0/.../MatMul_7")
def op(t, ins, **attrs):
    n[0] += 1; out = f"{t.lower()}_{n[0]}"
    name = "/" + "/".join(scope + [f"{t}_{n[0]}"]) if scope else f"node_{out}"
    nodes.append(helper.make_node(t, ins, [out], name=name, **attrs)); return out
def scoped(path, f, *args):
    scope.extend(path.split("/")); r = f(*args); del scope[-len(path.split("/")):]; return r
def linear(x, i, o, name):
    return scoped(name.split(".")[-1], lambda: op("Add", [op("MatMul", [x, w(name + ".weight", i, o)]), w(name + ".bias", o, scale=0.0)]))
def ln(x, name):
    return scoped(name.split(".")[-1], lambda: ln_(x, name))
def ln_(x, name):
    return op("LayerNormalization", [x, c(name + ".weight", np.ones(H, np.float32)), c(name + ".bias", np.zeros(H, np.float32))], axis=-1, epsilon=1e-12)
ids, mask = "input_ids", "attention_mask"
pos = c("position_ids", np.arange(a.seq, dtype=np.int64)[None, :])
scope.append("embeddings")
x = op("Add", [op("Gather", [w("embeddings.word", a.vocab, H), ids]), op("Gather", [w("embeddings.position", 512, H), pos])])
x = op("Add", [x, op("Gather", [w("embeddings.token_type", 2, H), c("token_type_ids", np.zeros((1, a.seq), np.int64))])])
x = ln(x, "embeddings.LayerNorm")
scope.pop()
# additive mask: (1 - mask) * lowest, [B, 1, 1, S]
m = op("Cast", [op("Unsqueeze", [mask, c("axes12", np.array([1, 2], np.int64))])], to=TensorProto.FLOAT)
m = op("Mul", [op("Sub", [c("one", np.array(1.0, np.float32)), m]), c("lowest", np.array(np.finfo(np.float32).min, np.float32))])
heads = c("heads_shape", np.array([a.batch, a.seq, NH, H // NH], np.int64))
flat = c("flat_shape", np.array([a.batch, a.seq, H], np.int64))
for l in range(L):
    pre = f"encoder.layer.{l}"
    scope[:] = ["encoder", f"layer.{l}", "attention", "self"]
    def split(t):
        return op("Transpose", [op("Reshape", [t, heads])], perm=[0, 2, 1, 3])
    q = split(linear(x, H, H, pre + ".attention.self.query"))
    k = split(linear(x, H, H, pre + ".attention.self.key"))
    v = split(linear(x, H, H, pre + ".attention.self.value"))
    s = op("Div", [op("MatMul", [q, op("Transpose", [k], perm=[0, 1, 3, 2])]), c(pre + ".scale", np.array(np.sqrt(H // NH), np.float32))])
    pr = op("Softmax", [op("Add", [s, m])], axis=-1)
    ctx = op("Reshape", [op("Transpose", [op("MatMul", [pr, v])], perm=[0, 2, 1, 3]), flat])
    scope[:] = ["encoder", f"layer.{l}", "attention", "output"]
    x = ln(op("Add", [linear(ctx, H, H, pre + ".attention.output.dense"), x]), pre + ".attention.output.LayerNorm")
    scope[:] = ["encoder", f"layer.{l}", "intermediate"]
    h = linear(x, H, I, pre + ".intermediate.dense")
    g = op("Mul", [op("Mul", [h, c(pre + ".half", np.array(0.5, np.float32))]),
                   op("Add", [c(pre + ".one", np.array(1.0, np.float32)), op("Erf", [op("Div", [h, c(pre + ".sqrt2", np.array(np.sqrt(2.0), np.float32))])])])])
    scope[:] = ["encoder", f"layer.{l}", "output"]
    x = ln(op("Add", [linear(g, I, H, pre + ".output.dense"), x]), pre + ".output.LayerNorm")
    scope[:] = []
nodes[-1].output[0] = "last_hidden_state"
graph = helper.make_graph(nodes, "bert", [helper.make_tensor_value_info(ids, TensorProto.INT64, [a.batch, a.seq]),
                                          helper.make_tensor_value_info(mask, TensorProto.INT64, [a.batch, a.seq])],
                          [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [a.batch, a.seq, H])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], producer_name="kiln make_bert_onnx.py")
model.ir_version = 8
os.makedirs(a.out, exist_ok=True)
onnx.save_model(model, os.path.join(a.out, "model.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                location="model.onnx.data", size_threshold=1024)
print(f"{len(nodes)} nodes, {os.path.getsize(os.path.join(a.out, 'model.onnx.data'))} bytes of weights in {a.out}")
