#!/usr/bin/env python3
"""Where torch's time goes on a real model, kernel by kernel: the counterpart of Kiln's
KILN_LOGS=profile for side-by-side reading (GPU machine; models as bench_models.py builds them).

    python3 tools/models/torch_profile.py --models bert,vit_b_16 --modes eager,default [--dtype bf16]

Per model and mode: warm-up calls, then torch.profiler over --calls calls; prints the CUDA
kernels by total device time per call (top --top) and the sum. fp32 runs with TF32 off, as the
benchmark does.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_models as bm  # noqa: E402


def profile(name, mode, dtype, calls, top):
    torch = bm.setup_torch()
    from torch.profiler import ProfilerActivity, profile as tprofile
    model, inputs = bm.build_model(name)
    if dtype == "bf16":
        model.to(torch.bfloat16)
    model.to("cuda")
    inputs = [bm.cast_input(torch, x, dtype).to("cuda") for x in inputs]
    fn = model if mode == "eager" else torch.compile(model, mode=mode)
    with torch.no_grad():
        for _ in range(5):
            fn(*inputs)
        torch.cuda.synchronize()
        with tprofile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fn(*inputs)
            torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        t = getattr(e, "device_time_total", None)
        if t is None:
            t = e.cuda_time_total
        if t > 0 and e.count > 0:
            rows.append((t / calls / 1e3, e.count // calls, e.key))
    rows.sort(reverse=True)
    total = sum(r[0] for r in rows)
    print(f"== {name} {dtype} torch {mode}: {total:.3f} ms of kernels per call, {sum(r[1] for r in rows)} launches")
    print("      ms  share  launches  kernel")
    for ms, n, key in rows[:top]:
        print(f"{ms:8.3f} {100 * ms / total:5.1f}%  {n:8d}  {key[:150]}")
    rest = rows[top:]
    if rest:
        print(f"{sum(r[0] for r in rest):8.3f}  ({len(rest)} more kernels)")
    sys.stdout.flush()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="bert")
    p.add_argument("--modes", default="eager,default")
    p.add_argument("--dtype", default="fp32", choices=("fp32", "bf16"))
    p.add_argument("--calls", type=int, default=5)
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args()
    for name in args.models.split(","):
        for mode in args.modes.split(","):
            profile(name, mode, args.dtype, args.calls, args.top)


if __name__ == "__main__":
    main()
