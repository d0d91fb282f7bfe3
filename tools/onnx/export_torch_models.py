"""Exports small PyTorch models to ONNX the way users do, for tests/onnx/test_torch_models.

Run where PyTorch, onnx and onnxscript are installed (the GPU machine has them):
    python3 tools/onnx/export_torch_models.py OUTDIR
Writes OUTDIR/<model>_<exporter>/model.onnx (weights in model.onnx.data beside it for the
dynamo exports, as large models are saved), with inputs and torch's outputs for two batch sizes
as .npy files (in_<case>_<k>.npy, out_<case>_<k>.npy). Both exporters: the TorchScript one
(dynamo=False, dynamic_axes) and the dynamo one (dynamo=True, dynamic_shapes).
"""
import os
import sys

import numpy as np
import onnx
import torch


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.pool = torch.nn.MaxPool2d(2)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2)
        self.head = torch.nn.Linear(16, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn(self.conv1(x))))
        x = torch.nn.functional.gelu(self.conv2(x))
        x = torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1)
        return torch.softmax(self.head(x), -1)


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)

    def forward(self, x):
        return self.layer(x)


def cases(name):
    g = torch.Generator().manual_seed(7)
    if name == "cnn":
        return [(torch.randn(2, 3, 16, 16, generator=g),), (torch.randn(5, 3, 16, 16, generator=g),)]
    return [(torch.randn(2, 7, 32, generator=g),), (torch.randn(3, 5, 32, generator=g),)]


def main(out):
    torch.manual_seed(0)
    models = {"cnn": SmallCNN().eval(), "encoder": Encoder().eval()}
    with torch.no_grad():
        # Non-trivial BatchNorm statistics.
        models["cnn"].bn.running_mean.uniform_(-0.5, 0.5)
        models["cnn"].bn.running_var.uniform_(0.5, 2.0)
    for name, model in models.items():
        examples = cases(name)
        for exporter in ("torchscript", "dynamo"):
            d = os.path.join(out, f"{name}_{exporter}")
            os.makedirs(d, exist_ok=True)
            path = os.path.join(d, "model.onnx")
            if name == "cnn":
                axes = {"x": {0: "batch"}, "y": {0: "batch"}}
                shapes = {"x": {0: torch.export.Dim("batch", min=1, max=64)}}
            else:
                axes = {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}
                shapes = {"x": {0: torch.export.Dim("batch", min=1, max=64), 1: torch.export.Dim("seq", min=2, max=128)}}
            try:
                if exporter == "torchscript":
                    torch.onnx.export(model, examples[0], path, input_names=["x"], output_names=["y"],
                                      dynamic_axes=axes, opset_version=17, dynamo=False)
                else:
                    prog = torch.onnx.export(model, examples[0], input_names=["x"], output_names=["y"],
                                             dynamic_shapes=shapes, opset_version=17, dynamo=True)
                    prog.save(path)
                    m = onnx.load(path)
                    onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                                    location="model.onnx.data", size_threshold=0)
            except Exception as e:  # record why, keep going with the others
                print(f"{name} {exporter}: export failed: {type(e).__name__}: {e}")
                continue
            with torch.no_grad():
                for c, args in enumerate(examples):
                    np.save(os.path.join(d, f"in_{c}_0.npy"), args[0].numpy())
                    np.save(os.path.join(d, f"out_{c}_0.npy"), model(*args).numpy())
            m = onnx.load(path, load_external_data=False)
            ops = sorted({n.op_type for n in m.graph.node})
            print(f"{name} {exporter}: opset {m.opset_import[0].version}, {len(m.graph.node)} nodes: {' '.join(ops)}")


if __name__ == "__main__":
    main(sys.argv[1])
