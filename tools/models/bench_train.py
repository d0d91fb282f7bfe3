#!/usr/bin/env python3
"""Times a training step (forward, cross-entropy, backward, AdamW) in PyTorch and in Kiln (the
samples/training sample of the same model) on one GPU, same model, batch and precision, side by
side in one run. --model gpt2 (the default): GPT-2 124M against samples/training/train_gpt2;
--model resnet50: torchvision's ResNet-50 against samples/training/train_resnet.

Run on the GPU machine from the repository root, with the sample carried there:

    python3 tools/models/bench_train.py --train-gpt2 devcarry/bin/train_gpt2 --out $OUT \\
        --batch 8 --seq 512 --dtypes bf16 --torch-modes eager,default
    python3 tools/models/bench_train.py --model resnet50 --train-resnet devcarry/bin/train_resnet --out $OUT \\
        --batch 64 --dtypes bf16,fp32 --torch-modes eager,default

torch, gpt2: transformers' GPT2LMHeadModel with GPT-2's sizes and random weights (dropout 0, train
mode); inputs: token ids below 256 (Kiln's sample trains on bytes), new each step. torch,
resnet50: torchvision.models.resnet50(num_classes=1000) with random weights in train mode (batch
norm with the batch's statistics and running averages, as Kiln's sample), images
[batch, 3, --size, --size] from N(0, 1) and uniformly random labels, four fixed batches cycled
(as Kiln's sample; the values differ, the shapes do not). Both: AdamW(lr --lr, betas 0.9/0.95, weight
decay 0.1, fused) as Kiln's sample; bf16 is torch.autocast over f32 parameters (Kiln:
kiln::autocast, f32 parameters and AdamW state), fp32 has TF32 off on both sides (cudnn.benchmark
stays at torch's default, off). torch.compile compiles the model (forward and, through
AOTAutograd, backward; the fused AdamW runs as is), with TORCHINDUCTOR_FORCE_DISABLE_CACHES=1, so
its first step is a cold compile. Each configuration runs in its own process: the first step
(compile included), the median of --steps after --warmup steps (device synchronised per step),
and the peak GPU memory of the process (nvidia-smi polled every 50 ms, both sides; torch's own
max_memory_allocated too). Results: OUT/train_results.json and a table on stdout and
OUT/train_table.md (for resnet50: train_resnet50_results.json, train_resnet50_table.md; the
children's logs are named alike).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time

TORCH_CHILD = r'''
import os, sys, time, json, statistics
os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
import torch, torch.nn.functional as F
a = json.loads(sys.argv[1])
mode, dtype, batch, steps, warmup = a["mode"], a["dtype"], a["batch"], a["steps"], a["warmup"]
torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
torch.manual_seed(0)
gen = torch.Generator(device="cuda").manual_seed(1)
if a["model"] == "gpt2":
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(cfg).cuda().train()
    def next_batch(k):
        x = torch.randint(0, 256, (batch, a["seq"] + 1), device="cuda", generator=gen)
        return x[:, :-1].contiguous(), x[:, 1:].contiguous()
    def logits_of(out):
        return out.logits.float().view(-1, out.logits.size(-1))
else:
    import torchvision
    model = torchvision.models.resnet50(num_classes=1000).cuda().train()
    fixed = [(torch.randn(batch, 3, a["size"], a["size"], device="cuda", generator=gen),
              torch.randint(0, 1000, (batch,), device="cuda", generator=gen)) for _ in range(4)]
    def next_batch(k):
        return fixed[k % len(fixed)]
    def logits_of(out):
        return out.float()
opt = torch.optim.AdamW(model.parameters(), lr=a["lr"], betas=(0.9, 0.95), weight_decay=0.1, fused=True)
run = model if mode == "eager" else torch.compile(model, mode=None if mode == "default" else mode)
def step(k):
    x, targets = next_batch(k)
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=dtype == "bf16"):
        loss = F.cross_entropy(logits_of(run(x)), targets.view(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss
times, losses = [], []
for k in range(steps):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    loss = step(k)
    torch.cuda.synchronize()
    times.append((time.perf_counter() - t0) * 1000)
    losses.append(loss.item())
    if k == 0:
        torch.cuda.reset_peak_memory_stats()
steady = times[warmup:]
print("RESULT " + json.dumps({"first_ms": times[0], "median_ms": statistics.median(steady), "min_ms": min(steady),
                             "steps": len(steady), "loss_first": losses[0], "loss_last": losses[-1],
                             "torch_peak_mib": torch.cuda.max_memory_allocated() / 2**20}))
'''


class PeakMemory:
    """Polls nvidia-smi for the GPU's used memory while a child runs; the peak minus the idle level."""

    def __init__(self):
        self.base = self.used()
        self.peak = self.base
        self.stop = False
        self.thread = threading.Thread(target=self.poll, daemon=True)

    @staticmethod
    def used():
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                                 capture_output=True, text=True, timeout=10).stdout
            return float(out.strip().splitlines()[0])
        except Exception:
            return float("nan")

    def poll(self):
        while not self.stop:
            self.peak = max(self.peak, self.used())
            time.sleep(0.05)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop = True
        self.thread.join()


def run_child(cmd, timeout, log_path):
    with PeakMemory() as mem:
        t0 = time.time()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, errors="replace")
            out, rc = p.stdout + p.stderr, p.returncode
        except subprocess.TimeoutExpired:
            out, rc = "", "timeout"
        wall = time.time() - t0
    with open(log_path, "w") as f:
        f.write(f"cmd: {' '.join(cmd)}\nrc: {rc}\nwall: {wall:.1f} s\n{out[-20000:]}")
    return out, rc, mem.peak - mem.base, wall


def kiln_command(args, loop, dtype):
    """The Kiln sample's command line for one loop (compiled, outside or eager) and dtype."""
    common = ["--device", "cuda", "--batch", str(args.batch), "--steps", str(args.steps), "--warmup", str(args.warmup),
              "--mode", loop, "--lr", str(args.lr)]
    if args.model == "gpt2":
        cmd = [args.train_gpt2, "--config", "124m", "--seq", str(args.seq), "--corpus", args.corpus] + common
    else:
        cmd = [args.train_resnet, "--config", "resnet50", "--size", str(args.size)] + common
    return cmd + (["--autocast", "bf16"] if dtype == "bf16" else [])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["gpt2", "resnet50"], default="gpt2")
    ap.add_argument("--train-gpt2", help="Kiln's samples/training/train_gpt2 (--model gpt2)")
    ap.add_argument("--train-resnet", help="Kiln's samples/training/train_resnet (--model resnet50)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, help="default: 8 for gpt2, 64 for resnet50")
    ap.add_argument("--seq", type=int, default=512, help="gpt2's sequence length")
    ap.add_argument("--size", type=int, default=224, help="resnet50's image side")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--dtypes", default="bf16")
    ap.add_argument("--torch-modes", default="eager,default")
    ap.add_argument("--kiln", default="compiled", help="Kiln loops: compiled, outside and/or eager")
    ap.add_argument("--corpus", default="samples/training/data/moby_dick.txt", help="gpt2: Kiln's training text")
    ap.add_argument("--lr", type=float, default=3e-4, help="AdamW's learning rate, both sides")
    ap.add_argument("--timeout", type=float, default=400)
    args = ap.parse_args()
    sample = args.train_gpt2 if args.model == "gpt2" else args.train_resnet
    if not sample:
        ap.error(f"--model {args.model} needs --{'train-gpt2' if args.model == 'gpt2' else 'train-resnet'}")
    if args.batch is None:
        args.batch = 8 if args.model == "gpt2" else 64
    prefix = "train" if args.model == "gpt2" else f"train_{args.model}"
    os.makedirs(args.out, exist_ok=True)
    results = {}
    for dtype in args.dtypes.split(","):
        for loop in [m for m in args.kiln.split(",") if m]:
            out, rc, peak, wall = run_child(kiln_command(args, loop, dtype), args.timeout,
                                            os.path.join(args.out, f"{prefix}_kiln_{loop}_{dtype}.log"))
            m = re.search(r"first step ([\d.]+) ms, median step ([\d.]+) ms over (\d+) steps, final loss ([\d.eEnaif+-]+)", out)
            losses = [float(x) for x in re.findall(r"^step \d+: loss ([\d.eEnaif+-]+)", out, re.M)]
            if m and rc == 0:
                r = {"first_ms": float(m.group(1)), "median_ms": float(m.group(2)), "steps": int(m.group(3)),
                     "loss_first": losses[0] if losses else None, "loss_last": float(m.group(4))}
            else:
                r = {"error": f"rc {rc}: {out.strip().splitlines()[-3:]}"}
            r.update({"peak_mib": peak, "wall_s": wall})
            results[f"kiln {loop}|{dtype}"] = r
            print(f"kiln {loop} {dtype}: {r}", flush=True)
        for mode in [m for m in args.torch_modes.split(",") if m]:
            child = {"model": args.model, "mode": mode, "dtype": dtype, "batch": args.batch, "seq": args.seq,
                     "size": args.size, "steps": args.steps, "warmup": args.warmup, "lr": args.lr}
            out, rc, peak, wall = run_child([sys.executable, "-c", TORCH_CHILD, json.dumps(child)], args.timeout,
                                            os.path.join(args.out, f"{prefix}_torch_{mode}_{dtype}.log"))
            m = re.search(r"^RESULT (.*)$", out, re.M)
            r = json.loads(m.group(1)) if m else {"error": f"rc {rc}: {out.strip().splitlines()[-1:] }"}
            r.update({"peak_mib": peak, "wall_s": wall})
            results[f"torch {mode}|{dtype}"] = r
            print(f"torch {mode} {dtype}: {r}", flush=True)
    with open(os.path.join(args.out, f"{prefix}_results.json"), "w") as f:
        json.dump(results, f, indent=1)
    what = (f"GPT-2 124M training step, batch {args.batch} x {args.seq}" if args.model == "gpt2" else
            f"ResNet-50 training step, batch {args.batch} x 3 x {args.size} x {args.size}")
    lines = [f"{what}, AdamW; median of {args.steps - args.warmup} steps after {args.warmup}", "",
             "| impl | dtype | step ms | first step s | peak GPU MiB (nvidia-smi) | loss first -> last |", "|---|---|---|---|---|---|"]
    for key, r in results.items():
        impl, dtype = key.split("|")
        if "error" in r:
            lines.append(f"| {impl} | {dtype} | failed: {r['error']} | | | |")
            continue
        lines.append(f"| {impl} | {dtype} | {r['median_ms']:.2f} | {r['first_ms'] / 1000:.1f} | {r['peak_mib']:.0f} | "
                     f"{r.get('loss_first', float('nan')):.3f} -> {r['loss_last']:.3f} |")
    table = "\n".join(lines)
    print(table)
    with open(os.path.join(args.out, f"{prefix}_table.md"), "w") as f:
        f.write(table + "\n")


if __name__ == "__main__":
    main()
