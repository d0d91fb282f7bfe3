#!/usr/bin/python3
"""A ConvNeXt-structured image classifier as ONNX (opset 18, random weights), written with
onnx.helper as torch's dynamo exporter writes torchvision's convnext: a 4x4/4 stem convolution,
stages of blocks (7x7 depthwise convolution, permute to channels last, layer norm, MLP with GELU,
layer scale, permute back, residual), layer-normed 2x2/2 downsampling, pooled head. For reading
Kiln's schedules of a conv net whose layer norms run over channels where torch is not installed
(Debian's python3-onnx; run with /usr/bin/python3).
    /usr/bin/python3 tools/models/make_convnext_onnx.py OUT.onnx [--depths 3,3,9,3] [--dims 96,192,384,768]
        [--batch 16] [--size 224] [--dtype bf16]"""
import argparse
import numpy as np
import onnx
from onnx import helper, TensorProto, numpy_helper

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--depths", default="3,3,9,3")
p.add_argument("--dims", default="96,192,384,768")
p.add_argument("--batch", type=int, default=16)
p.add_argument("--size", type=int, default=224)
p.add_argument("--classes", type=int, default=1000)
p.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
a = p.parse_args()
depths = [int(v) for v in a.depths.split(",")]
dims = [int(v) for v in a.dims.split(",")]
ET = TensorProto.BFLOAT16 if a.dtype == "bf16" else TensorProto.FLOAT
rng = np.random.default_rng(0)
inits, nodes = [], []

def tensor(name, arr):
    arr = np.asarray(arr, np.float32)
    if ET == TensorProto.FLOAT:
        inits.append(numpy_helper.from_array(arr, name))
    else:  # bf16: the top half of each f32, rounded to nearest even
        u = arr.astype(np.float32).view(np.uint32)
        b = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        t = helper.make_tensor(name, ET, arr.shape, b.tobytes(), raw=True)
        inits.append(t)
    return name

def w(name, *shape, scale=0.02):
    return tensor(name, rng.standard_normal(shape) * scale)

def ints(name, v):
    inits.append(numpy_helper.from_array(np.asarray(v, np.int64), name)); return name

n = [0]
def op(t, ins, **attrs):
    n[0] += 1; out = f"{t.lower()}_{n[0]}"
    nodes.append(helper.make_node(t, ins, [out], name=f"node_{out}", **attrs)); return out

def ln(x, c, name, eps=1e-6):
    return op("LayerNormalization", [x, tensor(name + ".weight", np.ones(c)), tensor(name + ".bias", np.zeros(c))],
              axis=-1, epsilon=eps, stash_type=1)

def ln2d(x, c, name):
    return op("Transpose", [ln(op("Transpose", [x], perm=[0, 2, 3, 1]), c, name)], perm=[0, 3, 1, 2])

def linear(x, i, o, name):
    return op("Add", [op("MatMul", [x, w(name + ".weight", i, o)]), w(name + ".bias", o)])

def gelu(x):
    half, one, r2 = tensor(f"half{n[0]}", 0.5), tensor(f"one{n[0]}", 1.0), tensor(f"sqrt2_{n[0]}", np.sqrt(2.0))
    return op("Mul", [op("Mul", [x, half]), op("Add", [one, op("Erf", [op("Div", [x, r2])])])])

x = "x"
x = op("Conv", [x, w("stem.weight", dims[0], 3, 4, 4), w("stem.bias", dims[0])], kernel_shape=[4, 4], strides=[4, 4])
x = ln2d(x, dims[0], "stem.norm")
for s, (depth, c) in enumerate(zip(depths, dims)):
    if s > 0:
        x = ln2d(x, dims[s - 1], f"down{s}.norm")
        x = op("Conv", [x, w(f"down{s}.weight", c, dims[s - 1], 2, 2), w(f"down{s}.bias", c)], kernel_shape=[2, 2], strides=[2, 2])
    for b in range(depth):
        pre = f"stage{s}.{b}"
        y = op("Conv", [x, w(pre + ".dw.weight", c, 1, 7, 7), w(pre + ".dw.bias", c)], kernel_shape=[7, 7], pads=[3, 3, 3, 3], group=c)
        y = ln(op("Transpose", [y], perm=[0, 2, 3, 1]), c, pre + ".norm")
        y = linear(gelu(linear(y, c, 4 * c, pre + ".fc1")), 4 * c, c, pre + ".fc2")
        y = op("Mul", [op("Transpose", [y], perm=[0, 3, 1, 2]), tensor(pre + ".gamma", np.full((c, 1, 1), 1e-6 * 1e5))])
        x = op("Add", [y, x])
x = op("ReduceMean", [x, ints("hw", [2, 3])], keepdims=1)
x = ln2d(x, dims[-1], "head.norm")
x = op("Flatten", [x], axis=1)
x = linear(x, dims[-1], a.classes, "head.fc")
graph = helper.make_graph(nodes, "convnext", [helper.make_tensor_value_info("x", ET, [a.batch, 3, a.size, a.size])],
                          [helper.make_tensor_value_info(x, ET, None)], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
onnx.save(model, a.out)
