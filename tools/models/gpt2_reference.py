#!/usr/bin/env python3
"""Torch's side of samples/gpt2's check against PyTorch (run on the GPU machine, which has torch,
transformers and safetensors): builds transformers' GPT2LMHeadModel with random weights
(torch.manual_seed(0), eval()), writes its state dict as .safetensors (the tied lm_head cloned:
safetensors refuses shared storage), random ids and torch's fp32 logits (TF32 off), then the
sample reads all three:

    python3 tools/models/gpt2_reference.py --config small --out /tmp/gpt2
    build/release/samples/gpt2 --weights /tmp/gpt2/model.safetensors --ids /tmp/gpt2/ids.npy \\
        --expect /tmp/gpt2/logits.npy [--config 124m] [--device cuda]

--time also prints torch's median wall time per call (device synchronised, after warm-up) in
eager mode and under torch.compile (its first call, the cold compile, timed apart), for the sample's
"median per call" beside it.

--config small matches the sample's default (vocab 100, 64 positions, width 64, 2 layers, 2 heads);
124m is GPT-2's (50257, 1024, 768, 12, 12). --device picks where torch computes the logits.
"""
import argparse
import os

import numpy as np
import torch
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel

CONFIGS = {
    "small": dict(vocab_size=100, n_positions=64, n_embd=64, n_layer=2, n_head=2),
    "124m": dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", choices=sorted(CONFIGS), default="small")
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--time", action="store_true")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    cfg = GPT2Config(**CONFIGS[a.config], resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(cfg).eval().to(a.device)
    os.makedirs(a.out, exist_ok=True)
    state = {k: v.detach().to("cpu").contiguous().clone() for k, v in model.state_dict().items()}
    save_file(state, os.path.join(a.out, "model.safetensors"), metadata={"format": "pt"})
    ids = np.random.default_rng(0).integers(0, cfg.vocab_size, size=(a.batch, a.seq), dtype=np.int64)
    with torch.no_grad():
        logits = model(torch.from_numpy(ids).to(a.device)).logits.float().cpu().numpy()
    np.save(os.path.join(a.out, "ids.npy"), ids)
    np.save(os.path.join(a.out, "logits.npy"), logits)
    print(f"{a.config}: {len(state)} tensors, ids {ids.shape}, logits {logits.shape}, |logits| mean "
          f"{np.abs(logits).mean():.4g}, written to {a.out}")
    if a.time:
        time_torch(model, torch.from_numpy(ids).to(a.device), a.device)


def time_torch(model, ids, device):
    import time

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
        for name, f in (("eager", lambda: model(ids)), ("torch.compile", lambda: compiled(ids))):
            first = wall(f)
            for _ in range(5):
                wall(f)
            times = sorted(wall(f) for _ in range(20))
            print(f"torch {name}: first call {first:.1f} ms, median per call {times[len(times) // 2]:.3f} ms")


if __name__ == "__main__":
    main()
