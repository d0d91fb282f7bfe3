"""Exports small versions of the real models (the architectures of tools/models/bench_models.py,
with few layers and narrow widths, random weights) for tests/onnx/real_models.

Run where PyTorch, torchvision, transformers, onnx and onnxscript are installed (the GPU machine):
    python3 tools/models/export_small_models.py OUTDIR [model,...]
Writes OUTDIR/<model>/model.onnx (+ model.onnx.data), in_0.npy (the input) and out.npy (torch's
fp32 output, TF32 off), exported as bench_models.py exports the full models
(torch.onnx.export(dynamo=True, opset 18), static shapes). The graphs keep the patterns the full
models have (attention with its masks and scales, rotary embeddings, relative position biases,
shifted windows) at a size a unit test runs in milliseconds.
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_models as bm  # noqa: E402


def vit():
    from torchvision.models.vision_transformer import VisionTransformer
    m = VisionTransformer(image_size=32, patch_size=8, num_layers=1, num_heads=2, hidden_dim=64, mlp_dim=128,
                          num_classes=10)
    bm.reinit_vit_head(m)
    return m, (torch.randn(2, 3, 32, 32),)


def swin():
    from torchvision.models.swin_transformer import SwinTransformer
    m = SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[1, 2], window_size=[4, 4],
                        num_classes=10)
    return m, (torch.randn(2, 3, 32, 32),)


def random_batch_norms(m):
    """Batch norms with running statistics and affine parameters away from the identity, so that
    folding them into convolutions is checked (fresh ones are nearly the identity in eval)."""
    for b in m.modules():
        if isinstance(b, torch.nn.BatchNorm2d):
            torch.nn.init.uniform_(b.weight, 0.5, 1.5)
            torch.nn.init.uniform_(b.bias, -0.2, 0.2)
            b.running_mean.uniform_(-0.2, 0.2)
            b.running_var.uniform_(0.5, 1.5)
    return m


def resnet():
    """ResNet-50's structure, narrow: the 7x7 stem, batch norms and max pool, torchvision's
    Bottleneck blocks (1x1, 3x3, 1x1) with projection shortcuts where the shape changes, one of
    them strided, then an identity block, the average pool and the classifier."""
    from torchvision.models.resnet import Bottleneck, conv1x1

    def projected(inplanes, planes, stride):
        down = torch.nn.Sequential(conv1x1(inplanes, planes * 4, stride), torch.nn.BatchNorm2d(planes * 4))
        return Bottleneck(inplanes, planes, stride, down)

    m = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 7, 2, 3, bias=False), torch.nn.BatchNorm2d(16), torch.nn.ReLU(inplace=True),
        torch.nn.MaxPool2d(3, 2, 1), projected(16, 8, 1), Bottleneck(32, 8), projected(32, 16, 2),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10))
    return random_batch_norms(m), (torch.randn(2, 3, 32, 32),)


def mobilenet():
    """MobileNetV3-Large's structure at half width and four of its blocks: depthwise convolutions
    (3x3 and 5x5, strided), squeeze-and-excitation with hardsigmoid, ReLU and hardswish blocks,
    a residual one, the last 1x1 convolution, average pool and the classifier."""
    from functools import partial
    from torchvision.models.mobilenetv3 import InvertedResidualConfig, MobileNetV3
    block = partial(InvertedResidualConfig, width_mult=0.5)
    setting = [block(16, 3, 16, 16, True, "RE", 2, 1), block(16, 3, 72, 24, False, "RE", 2, 1),
               block(24, 5, 96, 40, True, "HS", 2, 1), block(40, 3, 120, 40, True, "HS", 1, 1)]
    m = MobileNetV3(setting, last_channel=128, num_classes=10)
    bm.reinit_mobilenet_classifier(m)
    return random_batch_norms(m), (torch.randn(2, 3, 32, 32),)


HF = {
    "bert": ("BertModel", "BertConfig", dict(hidden_size=64, num_hidden_layers=1, num_attention_heads=2,
                                             intermediate_size=128, vocab_size=100, max_position_embeddings=64),
             "last_hidden_state", {}),
    "distilbert": ("DistilBertModel", "DistilBertConfig", dict(dim=64, n_layers=1, n_heads=2, hidden_dim=128,
                                                                vocab_size=100, max_position_embeddings=64),
                   "last_hidden_state", {}),
    "gpt2": ("GPT2LMHeadModel", "GPT2Config", dict(n_embd=64, n_layer=1, n_head=2, vocab_size=100, n_positions=64),
             "logits", bm.NO_CACHE),
    "llama": ("LlamaForCausalLM", "LlamaConfig", dict(hidden_size=128, intermediate_size=256, num_hidden_layers=1,
                                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=100,
                                                      max_position_embeddings=64),
              "logits", bm.NO_CACHE),
    "t5_encoder": ("T5EncoderModel", "T5Config", dict(d_model=64, d_kv=32, d_ff=128, num_layers=1, num_heads=2,
                                                      vocab_size=100), "last_hidden_state", {}),
}

MODELS = {"vit": vit, "swin": swin, "resnet": resnet, "mobilenet": mobilenet}
for _name, (_cls, _cfg, _kw, _field, _call) in HF.items():
    MODELS[_name] = (lambda c=_cls, f=_cfg, k=_kw, o=_field, a=_call: bm.build_hf(c, f, k, o, 2, 16, a))


def main(out, names):
    import onnx
    bm.setup_torch()
    for name in names:
        torch.manual_seed(0)
        model, inputs = MODELS[name]()
        model.eval()
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "model.onnx")
        with torch.no_grad():
            y = bm.first_output(model(*inputs)).float().numpy()
        np.save(os.path.join(d, "in_0.npy"), inputs[0].numpy())
        np.save(os.path.join(d, "out.npy"), y)
        try:
            torch.onnx.export(model, inputs, path, dynamo=True, opset_version=18, external_data=True)
        except Exception as e:  # keep going with the others
            print(f"{name}: export failed: {bm.short_error(e)}", flush=True)
            continue
        m = onnx.load(path, load_external_data=False)
        ops = {}
        for node in m.graph.node:
            ops[node.op_type] = ops.get(node.op_type, 0) + 1
        print(f"{name}: out {list(y.shape)} std {y.std():.3g}, {len(m.graph.node)} nodes: {ops}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2].split(",") if len(sys.argv) > 2 else list(MODELS))
