#!/usr/bin/env python3
"""Torch's side of the model samples' check against PyTorch (samples/models; run on the GPU
machine, which has torch, torchvision, transformers and safetensors): builds the model with random
weights (torch.manual_seed(0), eval()), writes its state dict as .safetensors, an input and torch's
fp32 output (TF32 off), then the sample reads all three:

    python3 tools/models/model_reference.py --model llama --config small --out /tmp/llama
    build/release/samples/models/llama --weights /tmp/llama/model.safetensors \\
        --input /tmp/llama/input.npy --expect /tmp/llama/expect.npy [--config small] [--device cuda]

Models and configurations (the sample's --config of the same name):
  gpt2    small, 124m          transformers' GPT2LMHeadModel, logits
  llama   small, bench         transformers' LlamaForCausalLM, logits (bench: bench_models.py's)
  bert    small, base          transformers' BertModel, last hidden state
  resnet  small, resnet18, resnet50   torchvision's ResNet (batch norm statistics calibrated on
                               random batches, as bench_models.py does), logits

--time also prints torch's median wall time per call (device synchronised, after warm-up) in
eager mode and under torch.compile (its first call, the cold compile, timed apart), for the
sample's "median per call" beside it. --autocast bf16|f16 computes the output and times torch
under torch.autocast with that type (give the sample the same flag); expect_f32.npy then holds
torch's f32 output, for the sample's --expect-f32. --onnx also exports the model (torch.onnx.export,
dynamo=True) to model.onnx, for `kiln bench` on the same weights.
"""
import argparse
import os
import time

import numpy as np
import torch


def hf(model_class, config_class, **config):
    import transformers
    cfg = getattr(transformers, config_class)(**config)
    return getattr(transformers, model_class)(cfg), cfg.vocab_size


def build(model, config):
    """(module whose forward(x) returns the sample's output, vocabulary size or None)."""
    drop = dict(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    if model == "gpt2":
        sizes = {"small": dict(vocab_size=100, n_positions=64, n_embd=64, n_layer=2, n_head=2),
                 "124m": dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)}[config]
        inner, vocab = hf("GPT2LMHeadModel", "GPT2Config", **sizes, **drop)
        return Field(inner, "logits", use_cache=False), vocab
    if model == "llama":
        sizes = {"small": dict(vocab_size=100, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64),
                 "bench": dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
                               num_attention_heads=16, num_key_value_heads=4,
                               max_position_embeddings=1024)}[config]
        inner, vocab = hf("LlamaForCausalLM", "LlamaConfig", **sizes)
        return Field(inner, "logits", use_cache=False), vocab
    if model == "bert":
        sizes = {"small": dict(vocab_size=100, max_position_embeddings=64, hidden_size=64, intermediate_size=128,
                               num_hidden_layers=2, num_attention_heads=2),
                 "base": dict()}[config]
        inner, vocab = hf("BertModel", "BertConfig", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                          **sizes)
        return Field(inner, "last_hidden_state"), vocab
    if model == "resnet":
        import torchvision
        from torchvision.models.resnet import Bottleneck, ResNet
        net = {"small": lambda: ResNet(Bottleneck, [1, 1, 1, 1], num_classes=10),
               "resnet18": lambda: torchvision.models.resnet18(weights=None),
               "resnet50": lambda: torchvision.models.resnet50(weights=None)}[config]()
        return net, None
    raise SystemExit(f"unknown model {model}")


class Field(torch.nn.Module):
    """forward(input_ids) -> one output field of a transformers model; its state dict keeps the
    inner model's names."""

    def __init__(self, inner, field, **kwargs):
        super().__init__()
        self.inner, self.field, self.kwargs = inner, field, kwargs

    def forward(self, input_ids):
        return getattr(self.inner(input_ids=input_ids, **self.kwargs), self.field)


def calibrate_batchnorm(model, example):
    """Batch norm's initial statistics (mean 0, variance 1) shrink random-weight activations layer
    after layer: set them from a few random batches in training mode, as a trained model's are."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None
    if norms:
        model.train()
        with torch.no_grad():
            for _ in range(3):
                model(torch.randn_like(example))
    model.eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["gpt2", "llama", "bert", "resnet"], required=True)
    ap.add_argument("--config", default="small")
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=16, help="tokens per sequence (gpt2, llama, bert)")
    ap.add_argument("--size", type=int, default=None, help="image side (resnet; 32 for small, else 224)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--time", action="store_true")
    ap.add_argument("--onnx", action="store_true")
    ap.add_argument("--autocast", choices=["bf16", "f16"], default=None)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    model, vocab = build(a.model, a.config)
    rng = np.random.default_rng(0)
    if vocab is not None:
        x = rng.integers(0, vocab, size=(a.batch, a.seq), dtype=np.int64)
    else:
        size = a.size or (32 if a.config == "small" else 224)
        x = rng.standard_normal((a.batch, 3, size, size)).astype(np.float32)
        calibrate_batchnorm(model, torch.from_numpy(x))
    model = model.eval().to(a.device)
    os.makedirs(a.out, exist_ok=True)
    from safetensors.torch import save_file
    prefix = "inner." if isinstance(model, Field) else ""
    # Clones: safetensors refuses tensors that share storage (GPT-2's tied lm_head).
    state = {k[len(prefix):]: v.detach().to("cpu").contiguous().clone() for k, v in model.state_dict().items()}
    save_file(state, os.path.join(a.out, "model.safetensors"), metadata={"format": "pt"})
    xt = torch.from_numpy(x).to(a.device)
    low = {"bf16": torch.bfloat16, "f16": torch.float16}.get(a.autocast)
    mixed = lambda: torch.autocast(a.device.split(":")[0], dtype=low, enabled=low is not None)
    with torch.no_grad(), mixed():
        y = model(xt).float().cpu().numpy()
    if low is not None:  # the f32 output too: how far autocast itself moves it
        with torch.no_grad():
            y32 = model(xt).float().cpu().numpy()
        np.save(os.path.join(a.out, "expect_f32.npy"), y32)
        print(f"torch under autocast({a.autocast}) against torch in f32: relative L2 "
              f"{np.linalg.norm(y - y32) / np.linalg.norm(y32):.3g}")
    np.save(os.path.join(a.out, "input.npy"), x)
    np.save(os.path.join(a.out, "expect.npy"), y)
    print(f"{a.model} {a.config}: {len(state)} tensors, input {x.shape}, output {y.shape}, |output| mean "
          f"{np.abs(y).mean():.4g}, std {y.std():.4g}, written to {a.out}")
    if a.onnx:
        torch.onnx.export(model, (xt,), os.path.join(a.out, "model.onnx"), dynamo=True, external_data=False)
    if a.time:
        with mixed():
            time_torch(model, xt, a.device)


def time_torch(model, x, device):
    def wall(f):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t = time.perf_counter()
        f()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return (time.perf_counter() - t) * 1e3

    compiled = torch.compile(model)
    with torch.no_grad():
        for name, f in (("eager", lambda: model(x)), ("torch.compile", lambda: compiled(x))):
            first = wall(f)
            for _ in range(5):
                wall(f)
            times = sorted(wall(f) for _ in range(20))
            print(f"torch {name}: first call {first:.1f} ms, median per call {times[len(times) // 2]:.3f} ms")


if __name__ == "__main__":
    main()
