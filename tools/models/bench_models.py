#!/usr/bin/env python3
"""Times real models in PyTorch (eager, torch.compile) and Kiln on one GPU and compares their outputs.

Run on the GPU machine (PyTorch with CUDA, torchvision, transformers, onnx, onnxscript, numpy), from
the repository root, with the Kiln CLI carried there (e.g. devcarry-new/ made by tools/gpu/pack.sh;
gunzip its bin/ and lib/ first, as tools/gpu/run.sh does):

    python3 tools/models/bench_models.py --work /tmp/models --out $OUT --kiln devcarry-new/bin/kiln
    python3 tools/models/bench_models.py --work /tmp/models --out $OUT --kiln devcarry-new/bin/kiln \\
        --kiln-old devcarry-old/bin/kiln --models resnet50,bert --dtypes bf16 --warm

Models are built from their libraries with random weights (torch.manual_seed(0), eval()); nothing is
downloaded. Every measurement runs in a fresh subprocess with a timeout (--timeout). Phases:
  export  WORK/<model>_<dtype>/: in_<k>.npy (inputs), out.npy (torch eager output), out_fp32.npy (bf16
          only: the fp32 model on the same inputs), out_fp64.npy (fp32 only: the model in float64, where
          it runs so) and model.onnx (+ model.onnx.data), from
          torch.onnx.export(dynamo=True, opset 18). Skipped when these files already exist.
  torch   eager and torch.compile per --torch-modes: median and min ms over --reps synchronised calls
          after 5 warm-ups; compile modes also the cold first call (TORCHINDUCTOR_FORCE_DISABLE_CACHES=1
          and an empty cache dir) and, with --warm, the first call of a fresh process on a populated
          cache (WORK/inductor_cache).
  kiln    `KILN bench-model` per binary (--kiln as "kiln", --kiln-old as "kiln-old") and per mode, each
          in its own process: median/min ms, cold first call (KILN_FORCE_DISABLE_CACHES=1), with --warm
          the first call of a fresh process on a populated KILN_CACHE_DIR (WORK/kiln_cache_<tag>; its
          KILN_LOGS=cache split of that call into import, cache load, upload and first run as warm_split,
          and the CUDA runtime's account of its first call as warm_runtime),
          kernel counts; outputs compared with out.npy (relative L2 over float64 and max abs error;
          bf16 also against out_fp32.npy; fp32 also against out_fp64.npy, as torch's outputs are, "[fp64 ..]"
          in the table). With --profile, each binary also runs each model once under
          KILN_LOGS=profile (default mode): the report to OUT/profiles/<tag>_<model>_<dtype>.txt, its top
          kernels and totals by kind into the results. --kiln-devices runs each binary on each device
          named (torch stays on --device): on --device as "kiln" / "kiln-old", on another as
          "kiln@<device>" (e.g. --device cuda --kiln-devices cuda,vulkan: Kiln's Vulkan target beside
          its CUDA one and torch.compile on the same GPU).
Results are merged into OUT/results.json after each measurement, keyed "<model>|<dtype>|<impl>|<mode>"
(impl: export (mode "-"), torch, kiln, kiln-old, kiln@<device>), so phases can be split across invocations (--phases;
pass the same --models/--dtypes/modes so the table covers them; --phases "" only prints the table).
The tables (one per dtype) are printed and written to OUT/table.md; subprocess log tails go to OUT/logs/.
fp32 runs torch with TF32 off (Kiln's fp32 matmuls don't use TF32 either). bf16 inputs and outputs are
stored as float32 .npy (Kiln converts an f32 .npy to bf16 where the model input is bf16). All torch
calls run under torch.no_grad().
"""
import argparse
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

DTYPES = ("fp32", "bf16")
PHASES = ("export", "torch", "kiln")
WARMUPS = 5
START = time.time()


def log(msg):
    print(f"[{time.time() - START:7.1f}s] {msg}", flush=True)


# ---------------------------------------------------------------------------------------------
# Model registry: name -> builder returning (fp32 module on CPU, tuple of example inputs on CPU).
# Builders import their libraries lazily so that this file loads without torch.


def calibrate_batchnorm(model, batch):
    """Random weights with batch norm's initial statistics (mean 0, variance 1) shrink activations
    layer after layer (mobilenet_v3's output had a standard deviation of 6e-9): set the running
    statistics from a few random batches in training mode, as a trained model's would be."""
    import torch
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average over the calibration batches
    model.train()
    with torch.no_grad():
        for _ in range(3):
            model(torch.randn(batch, 3, 224, 224))
    model.eval()


def build_vision(name, batch, reinit=None):
    import torch
    import torchvision
    model = getattr(torchvision.models, name)(weights=None)
    if reinit is not None:
        reinit(model)
    calibrate_batchnorm(model, batch)
    return model, (torch.randn(batch, 3, 224, 224),)


def reinit_mobilenet_classifier(model):
    """torchvision initialises the classifier's Linear layers with std 0.01: outputs are near zero."""
    import torch
    for layer in model.classifier:
        if isinstance(layer, torch.nn.Linear):
            torch.nn.init.normal_(layer.weight, 0.0, 0.05)
            torch.nn.init.zeros_(layer.bias)


def reinit_vit_head(model):
    """torchvision zero-initialises the ViT head."""
    import torch
    torch.nn.init.normal_(model.heads.head.weight, 0.0, 0.02)
    torch.nn.init.normal_(model.heads.head.bias, 0.0, 0.02)


def hf_wrapper(inner, field, call_kwargs):
    """A module whose forward(input_ids) returns one output field of a transformers model."""
    import torch

    class HFWrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids):
            return getattr(self.inner(input_ids=input_ids, **call_kwargs), field)

    return HFWrapper()


def build_hf(model_class, config_class, config_kwargs, field, batch, seq, call_kwargs=None):
    import torch
    import transformers
    config = getattr(transformers, config_class)(**config_kwargs)
    inner = getattr(transformers, model_class)(config)
    ids = torch.randint(0, config.vocab_size, (batch, seq), dtype=torch.int64)
    return hf_wrapper(inner, field, call_kwargs or {}), (ids,)


LLAMA_SMALL = dict(hidden_size=1024, intermediate_size=2816, num_hidden_layers=4, num_attention_heads=16,
                   num_key_value_heads=4, vocab_size=32000, max_position_embeddings=1024)
T5_SMALL = dict(d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8, vocab_size=32128)
NO_CACHE = {"use_cache": False}

MODELS = {
    "resnet50": lambda: build_vision("resnet50", 16),
    "mobilenet_v3_large": lambda: build_vision("mobilenet_v3_large", 16, reinit_mobilenet_classifier),
    "vit_b_16": lambda: build_vision("vit_b_16", 8, reinit_vit_head),
    "bert": lambda: build_hf("BertModel", "BertConfig", {}, "last_hidden_state", 8, 128),
    "gpt2": lambda: build_hf("GPT2LMHeadModel", "GPT2Config", {}, "logits", 8, 128, NO_CACHE),
    "llama": lambda: build_hf("LlamaForCausalLM", "LlamaConfig", LLAMA_SMALL, "logits", 4, 256, NO_CACHE),
    # Extras (not in the default list).
    "efficientnet_b0": lambda: build_vision("efficientnet_b0", 16),
    "convnext_tiny": lambda: build_vision("convnext_tiny", 16),
    "swin_t": lambda: build_vision("swin_t", 8),
    "distilbert": lambda: build_hf("DistilBertModel", "DistilBertConfig", {}, "last_hidden_state", 8, 128),
    "t5_encoder": lambda: build_hf("T5EncoderModel", "T5Config", T5_SMALL, "last_hidden_state", 8, 128),
    # BART-large's decoder as a causal LM: post-norm, learned positions, a vocabulary of 50265
    # (odd, as GPT-2's 50257: its LM head's rows are not 16-byte aligned).
    "bart_decoder": lambda: build_hf("BartForCausalLM", "BartConfig", {}, "logits", 8, 128, NO_CACHE),
}
DEFAULT_MODELS = "resnet50,mobilenet_v3_large,vit_b_16,bert,gpt2,llama"


def build_model(name):
    """The fp32 model (eval, on CPU) and its example inputs, the same in every process."""
    import torch
    torch.manual_seed(0)
    model, inputs = MODELS[name]()
    return model.eval(), inputs


# ---------------------------------------------------------------------------------------------
# Workers: this script run as a subprocess with --worker '<json spec>'; they write a JSON result.


def setup_torch():
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch


def cast_input(torch, x, dtype):
    return x.to(torch.bfloat16) if dtype == "bf16" and x.is_floating_point() else x


def first_output(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def input_paths(model_dir):
    paths = []
    while os.path.exists(os.path.join(model_dir, f"in_{len(paths)}.npy")):
        paths.append(os.path.join(model_dir, f"in_{len(paths)}.npy"))
    return paths


def compare_arrays(got, ref, suffix=""):
    """Relative L2 and max abs error of got against ref, over float64."""
    import numpy as np
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        return {"compare_error" + suffix: f"shape {list(got.shape)} vs torch {list(ref.shape)}"}
    diff = got - ref
    res = {"rel_l2" + suffix: float(np.linalg.norm(diff) / max(float(np.linalg.norm(ref)), 1e-300)),
           "max_abs" + suffix: float(np.max(np.abs(diff))) if diff.size else 0.0}
    nonfinite = int(got.size - np.count_nonzero(np.isfinite(got)))
    if nonfinite:
        res["nonfinite" + suffix] = nonfinite
    return res


def compare_references(got, d, dtype):
    """got against the export's references in d: torch eager's output; for bf16 also the fp32
    model's (suffix _fp32); for fp32 also the float64 model's where it ran so (suffix _fp64)."""
    import numpy as np
    res = compare_arrays(got, np.load(os.path.join(d, "out.npy")))
    if dtype == "bf16":
        res.update(compare_arrays(got, np.load(os.path.join(d, "out_fp32.npy")), "_fp32"))
    path = os.path.join(d, "out_fp64.npy")
    if os.path.exists(path):
        res.update(compare_arrays(got, np.load(path), "_fp64"))
    return res


def short_error(e):
    lines = [l for l in f"{type(e).__name__}: {e}".splitlines() if l.strip()]
    return " / ".join(lines[:6])[:800]


def worker_export(spec):
    import numpy as np
    torch = setup_torch()
    d, dtype, device = spec["dir"], spec["dtype"], spec["device"]
    os.makedirs(d, exist_ok=True)
    model, inputs = build_model(spec["model"])
    inputs = tuple(cast_input(torch, x, dtype) for x in inputs)
    for k, x in enumerate(inputs):
        np.save(os.path.join(d, f"in_{k}.npy"), (x.float() if x.is_floating_point() else x).numpy())
    res = {"inputs": [[list(x.shape), str(x.dtype)] for x in inputs]}
    with torch.no_grad():
        model.to(device)
        if dtype == "bf16":
            upcast = [(x.float() if x.is_floating_point() else x).to(device) for x in inputs]
            ref32 = first_output(model(*upcast)).float().cpu().numpy()
            np.save(os.path.join(d, "out_fp32.npy"), ref32)
            model.to(torch.bfloat16)
        out = first_output(model(*[x.to(device) for x in inputs])).float().cpu().numpy()
    np.save(os.path.join(d, "out.npy"), out)
    if dtype == "fp32":
        # The model in float64 on the same inputs: the reference that says how much of an fp32
        # output's difference from torch eager is each side's own rounding (a 50-layer resnet's
        # eager and torch.compile outputs differ by 2e-5 between themselves).
        try:
            with torch.no_grad():
                model.to(device).double()
                ref64 = first_output(model(*[(x.double() if x.is_floating_point() else x).to(device)
                                             for x in inputs])).double().cpu().numpy()
                model.float()
            np.save(os.path.join(d, "out_fp64.npy"), ref64)
            res.update(compare_arrays(out, ref64, "_fp64"))
        except Exception as e:  # a model that does not run in float64 has no such reference
            model.float()
            res["fp64_error"] = short_error(e)
    res["out_shape"] = list(out.shape)
    res["out_std"] = float(out.astype(np.float64).std())
    if not res["out_std"] > 1e-3:
        res["warning"] = f"torch output std {res['out_std']:.3g} <= 1e-3: output is nearly trivial"
        print("WARNING: " + res["warning"], flush=True)
    if dtype == "bf16":
        res.update(compare_arrays(out, ref32, "_fp32"))

    path = os.path.join(d, "model.onnx")
    for stale in (path, path + ".data"):
        if os.path.exists(stale):
            os.remove(stale)
    errors = []
    for export_device in dict.fromkeys(["cpu", device]):
        try:
            model.to(export_device)
            args = tuple(x.to(export_device) for x in inputs)
            t0 = time.perf_counter()
            torch.onnx.export(model, args, path, dynamo=True, opset_version=18, external_data=True)
            res["export_s"] = time.perf_counter() - t0
            res["export_device"] = export_device
            break
        except Exception as e:  # try the next device, keep the reason
            traceback.print_exc()
            errors.append(f"export on {export_device}: {short_error(e)}")
    else:
        res["error"] = " ; ".join(errors)
        return res
    import onnx
    m = onnx.load(path, load_external_data=False)
    ops = {}
    for node in m.graph.node:
        ops[node.op_type] = ops.get(node.op_type, 0) + 1
    res.update(onnx=path, nodes=len(m.graph.node), op_types=ops)
    return res


def timed_call(torch, fn, inputs, device):
    """Wall time of one synchronised call, and its output."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn(*inputs)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - t0, out


def worker_torch(spec):
    import numpy as np
    torch = setup_torch()
    d, dtype, device, mode = spec["dir"], spec["dtype"], spec["device"], spec["mode"]
    model, _ = build_model(spec["model"])
    if dtype == "bf16":
        model.to(torch.bfloat16)
    model.to(device)
    inputs = [cast_input(torch, torch.from_numpy(np.load(p)), dtype).to(device) for p in input_paths(d)]
    fn = model if mode == "eager" else torch.compile(model, mode=mode)
    res = {"torch": torch.__version__,
           "gpu": torch.cuda.get_device_name() if device.startswith("cuda") else device}
    with torch.no_grad():
        first_s, out = timed_call(torch, fn, inputs, device)
        res["first_call_s"] = first_s
        out = first_output(out).float().cpu().numpy()
        res.update(compare_references(out, d, dtype))
        if spec["reps"] > 0:
            for _ in range(WARMUPS):
                fn(*inputs)
            times = [timed_call(torch, fn, inputs, device)[0] * 1e3 for _ in range(spec["reps"])]
            res.update(median_ms=statistics.median(times), min_ms=min(times), reps=len(times))
    return res


def worker_main(spec_json):
    spec = json.loads(spec_json)
    rc = 0
    try:
        res = worker_export(spec) if spec["kind"] == "export" else worker_torch(spec)
    except Exception as e:
        traceback.print_exc()
        res, rc = {"error": short_error(e)}, 1
    with open(spec["result"], "w") as f:
        json.dump(res, f)
    sys.exit(rc)


# ---------------------------------------------------------------------------------------------
# Driver: subprocesses, results file.


def tail_lines(text, n=6, max_chars=800):
    lines = [l.strip() for l in (text or "").splitlines() if l.strip()]
    return " / ".join(lines[-n:])[-max_chars:]


def run_cmd(args, cmd, env, name, output=None):
    """Runs cmd with a timeout in its own process group; writes the output tails to OUT/logs/<name>.log
    and, given a list as output, appends the whole of stderr and stdout to it."""
    try:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                errors="replace", start_new_session=True)
    except OSError as e:
        return f"could not start {cmd[0]}: {e}"
    timed_out = False
    try:
        stdout, stderr = proc.communicate(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            stdout, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            stdout, stderr = "", "(output lost after the timeout)"
    if output is not None:
        output.append((stderr or "") + (stdout or ""))
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    with open(os.path.join(args.out, "logs", name + ".log"), "w") as f:
        f.write(f"cmd: {' '.join(cmd)}\nrc: {proc.returncode}{' (timeout)' if timed_out else ''}\n")
        f.write(f"--- stdout (tail) ---\n{(stdout or '')[-4000:]}\n--- stderr (tail) ---\n{(stderr or '')[-4000:]}\n")
    failure = None
    if timed_out:
        failure = f"timeout after {args.timeout:g}s: {tail_lines(stderr or stdout)}"
    elif proc.returncode != 0:
        failure = f"exit {proc.returncode}: {tail_lines(stderr or stdout)}"
    return failure


def run_worker(args, spec, name, env):
    result_path = os.path.join(args.work, "tmp", name + ".json")
    os.makedirs(os.path.dirname(result_path), exist_ok=True)
    if os.path.exists(result_path):
        os.remove(result_path)
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(dict(spec, result=result_path))]
    failure = run_cmd(args, cmd, env, name)
    result = {}
    if os.path.exists(result_path):
        with open(result_path) as f:
            result = json.load(f)
    if failure and not result:  # a result written before a hang at exit is kept
        result["error"] = failure
    return result


def load_results(path):
    if not os.path.exists(path):
        return {}
    try:
        with open(path) as f:
            return json.load(f)
    except ValueError:
        log(f"warning: {path} is not valid JSON; moved to {path}.bad, starting afresh")
        os.replace(path, path + ".bad")
        return {}


def save_results(args, results):
    path = os.path.join(args.out, "results.json")
    with open(path + ".tmp", "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
    os.replace(path + ".tmp", path)


def model_dir(args, model, dtype):
    return os.path.join(args.work, f"{model}_{dtype}")


def summary(rec):
    if rec.get("error"):
        return "FAILED: " + rec["error"][:300]
    parts = []
    for field, fmt in (("median_ms", "{:.2f} ms"), ("first_call_s", "first call {:.1f} s"),
                       ("cold_first_call_s", "cold {:.1f} s"), ("warm_first_call_s", "warm {:.1f} s"),
                       ("kernels", "{} kernels"), ("rel_l2", "rel L2 {:.1e}"), ("rel_l2_fp32", "vs fp32 {:.1e}"),
                       ("nodes", "{} ONNX nodes"), ("out_std", "out std {:.3g}")):
        if rec.get(field) is not None:
            parts.append(fmt.format(rec[field]))
    for field in ("compare_error", "warm_error", "warning"):
        if rec.get(field):
            parts.append(f"{field}: {rec[field][:200]}")
    return ", ".join(parts)


# ---------------------------------------------------------------------------------------------
# Phases.


def export_done(d, dtype):
    needed = ["model.onnx", "in_0.npy", "out.npy"] + (["out_fp32.npy"] if dtype == "bf16" else [])
    return all(os.path.exists(os.path.join(d, f)) for f in needed)


def phase_export(args, results):
    for model in args.models:
        for dtype in args.dtypes:
            d, key = model_dir(args, model, dtype), f"{model}|{dtype}|export|-"
            if export_done(d, dtype):
                rec = dict(results.get(key, {}), reused=True, onnx=os.path.join(d, "model.onnx"))
                rec.pop("error", None)
                results[key] = rec
                save_results(args, results)
                log(f"export {model} {dtype}: reusing {d}")
                continue
            log(f"export {model} {dtype} ...")
            spec = {"kind": "export", "model": model, "dtype": dtype, "dir": d, "device": args.device}
            results[key] = run_worker(args, spec, f"export_{model}_{dtype}", dict(os.environ))
            save_results(args, results)
            log(f"export {model} {dtype}: {summary(results[key])}")


def phase_torch(args, results):
    warm_cache = os.path.join(args.work, "inductor_cache")
    if args.warm:
        shutil.rmtree(warm_cache, ignore_errors=True)
    for model in args.models:
        for dtype in args.dtypes:
            d = model_dir(args, model, dtype)
            if not (os.path.exists(os.path.join(d, "in_0.npy")) and os.path.exists(os.path.join(d, "out.npy"))):
                log(f"torch {model} {dtype}: skipped, no inputs/outputs in {d} (run the export phase)")
                continue
            for mode in args.torch_modes:
                key, name = f"{model}|{dtype}|torch|{mode}", f"torch_{model}_{dtype}_{mode}"
                spec = {"kind": "torch", "model": model, "dtype": dtype, "mode": mode, "reps": args.reps,
                        "dir": d, "device": args.device}
                env = dict(os.environ)
                cold_dir = None
                if mode != "eager":  # cold compile: caches off and an empty cache dir (Triton's too)
                    os.makedirs(os.path.join(args.work, "tmp"), exist_ok=True)
                    cold_dir = tempfile.mkdtemp(prefix="inductor_cold_", dir=os.path.join(args.work, "tmp"))
                    env.update(TORCHINDUCTOR_FORCE_DISABLE_CACHES="1", TORCHINDUCTOR_CACHE_DIR=cold_dir)
                log(f"torch {model} {dtype} {mode} ...")
                rec = run_worker(args, spec, name, env)
                if cold_dir:
                    shutil.rmtree(cold_dir, ignore_errors=True)
                results[key] = rec
                save_results(args, results)
                if args.warm and mode != "eager" and not rec.get("error"):
                    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=warm_cache)
                    env.pop("TORCHINDUCTOR_FORCE_DISABLE_CACHES", None)
                    first_only = dict(spec, reps=0)
                    warm = run_worker(args, first_only, name + "_populate", env)
                    if not warm.get("error"):
                        warm = run_worker(args, first_only, name + "_warm", env)
                    if warm.get("error"):
                        rec["warm_error"] = warm["error"]
                    else:
                        rec["warm_first_call_s"] = warm.get("first_call_s")
                    save_results(args, results)
                log(f"torch {model} {dtype} {mode}: {summary(rec)}")


def kiln_env(binary, extra):
    env = dict(os.environ)
    env.pop("KILN_FORCE_DISABLE_CACHES", None)
    env.pop("KILN_CACHE_DIR", None)
    libs = [p for p in (os.path.join(os.path.dirname(os.path.dirname(binary)), "lib"), "/usr/local/cuda/lib64")
            if os.path.isdir(p)]
    if env.get("LD_LIBRARY_PATH"):
        libs.append(env["LD_LIBRARY_PATH"])
    if libs:
        env["LD_LIBRARY_PATH"] = ":".join(libs)
    env.update(extra)
    return env


def run_kiln(args, binary, device, onnx_path, inputs, mode, reps, extra_env, out_dir, name, output=None):
    """One `kiln bench-model` process for one mode: (its JSON object, None) or (None, error text)."""
    os.makedirs(out_dir, exist_ok=True)
    json_path = os.path.join(out_dir, "bench.jsonl")
    if os.path.exists(json_path):
        os.remove(json_path)
    cmd = [binary, "bench-model", onnx_path, "--device", device, "--inputs", ",".join(inputs),
           "--modes", mode, "--reps", str(reps), "--out", out_dir, "--json", json_path]
    failure = run_cmd(args, cmd, kiln_env(binary, extra_env), name, output)
    if failure:
        return None, failure
    entries = []
    if os.path.exists(json_path):
        with open(json_path) as f:
            entries = [json.loads(line) for line in f if line.strip()]
    entry = next((e for e in entries if e.get("mode") == mode), entries[-1] if entries else None)
    if entry is None:
        return None, f"no JSON line written to {json_path}"
    return entry, None


def first_call_split(output):
    """KILN_LOGS=cache's line on an ONNX model's first call (the first such line), after its label:
    "import 352 ms, compile or cache load 19 ms, 199 parameters to the device 40 ms, first run 98 ms ..."."""
    for line in (output[0] if output else "").splitlines():
        if line.startswith("[kiln:cache] first call of onnx model") and ": " in line:
            return line.split(": ", 1)[1]
    return None


def runtime_first_call(output):
    """KILN_LOGS=cache's line from the CUDA runtime on a plan's first call (library start-ups, bind,
    tuning, queueing, the libraries' problem set-ups and the device's finish), after its label."""
    for line in (output[0] if output else "").splitlines():
        if line.startswith("[kiln:cache] cuda runtime: first call of a plan") and ": " in line:
            return line.split("kernels: ", 1)[-1]
    return None


def split_ms(split):
    """{"import": ms, "compile": ms, "upload": ms, "first run": ms} from a first_call_split line."""
    import re
    out = {}
    for name, pattern in (("import", r"import ([0-9.]+) ms"), ("compile", r"compile or cache load ([0-9.]+) ms"),
                          ("upload", r"to the device ([0-9.]+) ms"), ("first run", r"first run ([0-9.]+) ms")):
        m = re.search(pattern, split)
        if m:
            out[name] = float(m.group(1))
    return out


def kiln_output_path(path, out_dir):
    if not os.path.isabs(path) and not os.path.exists(path):
        path = os.path.join(out_dir, os.path.basename(path))
    return path


def phase_kiln(args, results, tag, binary, device):
    cache = os.path.join(args.work, f"kiln_cache_{tag}")
    if args.warm:
        shutil.rmtree(cache, ignore_errors=True)
    for model in args.models:
        for dtype in args.dtypes:
            d = model_dir(args, model, dtype)
            onnx_path = os.path.join(d, "model.onnx")
            if not os.path.exists(onnx_path):
                log(f"{tag} {model} {dtype}: skipped, no {onnx_path} (export failed or not run)")
                continue
            inputs = input_paths(d)
            for mode in args.kiln_modes:
                key, name = f"{model}|{dtype}|{tag}|{mode}", f"{tag}_{model}_{dtype}_{mode}"
                out_dir = os.path.join(args.work, "kiln_out", tag, f"{model}_{dtype}", mode)
                log(f"{tag} {model} {dtype} {mode} ...")
                cold_output = []
                entry, err = run_kiln(args, binary, device, onnx_path, inputs, mode, args.reps,
                                      {"KILN_FORCE_DISABLE_CACHES": "1", "KILN_LOGS": "cache"}, out_dir, name,
                                      cold_output)
                rec = {"binary": binary}
                results[key] = rec
                if err:
                    rec["error"] = err
                    save_results(args, results)
                    log(f"{tag} {model} {dtype} {mode}: {summary(rec)}")
                    continue
                for field in ("median_ms", "min_ms", "reps", "load_s", "kernels", "kernel_kinds", "reference_ops"):
                    if field in entry:
                        rec[field] = entry[field]
                rec["cold_first_call_s"] = entry.get("first_call_s")
                # The compile alone (and the first run): the cold first call without reading the weights,
                # making the device's context and copying the weights there, none of which torch.compile's
                # cold first call holds (its model is on the device before).
                split = first_call_split(cold_output)
                runtime = runtime_first_call(cold_output)
                if runtime:
                    rec["cold_runtime"] = runtime
                if split:
                    rec["cold_split"] = split
                    parts = split_ms(split)
                    if "compile" in parts and "first run" in parts:
                        rec["cold_compile_s"] = (parts["compile"] + parts["first run"]) / 1000
                outputs = entry.get("outputs") or []
                if not outputs:
                    rec["compare_error"] = "no output file listed"
                else:
                    try:
                        import numpy as np
                        got = np.load(kiln_output_path(outputs[0], out_dir))
                        rec.update(compare_references(got, d, dtype))
                    except Exception as e:
                        rec["compare_error"] = short_error(e)
                save_results(args, results)
                if args.warm:
                    os.makedirs(os.path.join(args.work, "tmp"), exist_ok=True)
                    tmp_out = tempfile.mkdtemp(prefix="kiln_warm_", dir=os.path.join(args.work, "tmp"))
                    extra = {"KILN_CACHE_DIR": cache}
                    entry, err = run_kiln(args, binary, device, onnx_path, inputs, mode, 1, extra, tmp_out, name + "_populate")
                    output = []
                    if not err:
                        entry, err = run_kiln(args, binary, device, onnx_path, inputs, mode, 1, dict(extra, KILN_LOGS="cache"),
                                              tmp_out, name + "_warm", output)
                    shutil.rmtree(tmp_out, ignore_errors=True)
                    if err:
                        rec["warm_error"] = err
                    else:
                        rec["warm_first_call_s"] = entry.get("first_call_s")
                        for field in ("load_s", "model_s", "inputs_s"):
                            rec["warm_" + field] = entry.get(field)
                        # Where the warm first call went (KILN_LOGS=cache: import, cache load, upload, first run).
                        split = first_call_split(output)
                        runtime = runtime_first_call(output)
                        if runtime:
                            rec["warm_runtime"] = runtime
                        if split:
                            rec["warm_split"] = split
                            parts = split_ms(split)
                            # Without reading the model (import) and copying its weights to the device.
                            if "compile" in parts and "first run" in parts:
                                rec["warm_compile_s"] = (parts["compile"] + parts["first run"]) / 1000
                    save_results(args, results)
                log(f"{tag} {model} {dtype} {mode}: {summary(rec)}")
            if args.profile:
                profile_kiln(args, results, tag, binary, device, model, dtype, onnx_path, inputs)


def profile_kiln(args, results, tag, binary, device, model, dtype, onnx_path, inputs):
    """KILN_LOGS=profile of the default mode (kernels one by one between device events; host time spent
    inside a library call shows as its kernel's time): the whole report to OUT/profiles/, its first
    lines and its totals by kind into the results under "<model>|<dtype>|<tag>|profile"."""
    key = f"{model}|{dtype}|{tag}|profile"
    cmd = [binary, "bench-model", onnx_path, "--device", device, "--inputs", ",".join(inputs), "--modes", "default",
           "--reps", "2", "--no-kernel-count"]
    log(f"{tag} {model} {dtype} profile ...")
    output = []
    failure = run_cmd(args, cmd, kiln_env(binary, {"KILN_LOGS": "profile"}), f"{tag}_{model}_{dtype}_profile", output)
    text = output[0] if output else ""
    # The report of the last profiled call: from its last header line on.
    lines = [l for l in text.splitlines() if l.startswith("[kiln:profile]")]
    starts = [i for i, l in enumerate(lines) if " kernels on " in l and " ms in all" in l]
    report = lines[starts[-1]:] if starts else []
    os.makedirs(os.path.join(args.out, "profiles"), exist_ok=True)
    with open(os.path.join(args.out, "profiles", f"{tag}_{model}_{dtype}.txt"), "w") as f:
        f.write("\n".join(report or text.splitlines()[-40:]) + "\n")
    if not report:
        results[key] = {"error": f"no profile report ({failure or 'exit 0'})"}
    else:
        report = [l[len("[kiln:profile]"):].rstrip() for l in report]
        by_kind = next((i for i, l in enumerate(report) if l.endswith("by kind:")), len(report))
        results[key] = {"header": report[0], "top": report[2:min(by_kind, 8)], "by_kind": report[by_kind + 1:]}
    save_results(args, results)
    log(f"{tag} {model} {dtype} profile: {results[key].get('header') or results[key].get('error')}")


# ---------------------------------------------------------------------------------------------
# Tables.


class Footnotes:
    def __init__(self):
        self.notes = []

    def fail(self, label, error):
        self.notes.append(f"[{len(self.notes) + 1}] {label}: {' '.join(str(error).split())}")
        return f"fail[{len(self.notes)}]"


def ok(rec):
    return rec is not None and not rec.get("error")


def fmt(value, spec):
    if value is None:
        return "—"
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return spec.format(value)


def ms_cell(rec, notes, label):
    if rec is None:
        return "—"
    if rec.get("error"):
        return notes.fail(label, rec["error"])
    return fmt(rec.get("median_ms"), "{:.2f}")


def first_call_cell(rec, field, warm, notes, label):
    """Cold first call s, and with --warm " / " the warm first call s."""
    if not ok(rec):
        return "—"
    cell = fmt(rec.get(field), "{:.1f}")
    if rec.get("cold_compile_s") is not None and field == "cold_first_call_s":
        cell += " (" + fmt(rec["cold_compile_s"], "{:.2f}") + ")"
    if warm:
        if rec.get("warm_error"):
            cell += " / " + notes.fail(label + " warm first call", rec["warm_error"])
        else:
            cell += " / " + fmt(rec.get("warm_first_call_s"), "{:.1f}")
            if rec.get("warm_compile_s") is not None and field == "cold_first_call_s":
                cell += " (" + fmt(rec["warm_compile_s"], "{:.2f}") + ")"
    return cell


def rel_cell(rec, notes, label, bf16):
    if not ok(rec):
        return "—"
    if rec.get("compare_error"):
        return notes.fail(label + " output", rec["compare_error"])
    cell = fmt(rec.get("rel_l2"), "{:.1e}")
    if bf16:
        cell += " (" + fmt(rec.get("rel_l2_fp32"), "{:.1e}") + ")"
    elif rec.get("rel_l2_fp64") is not None:
        cell += " [fp64 " + fmt(rec.get("rel_l2_fp64"), "{:.1e}") + "]"
    if rec.get("nonfinite"):
        cell += f" {rec['nonfinite']} non-finite"
    return cell


def kernels_cell(rec):
    if not ok(rec) or rec.get("kernels") is None:
        return "—"
    ref = (rec.get("kernel_kinds") or {}).get("reference")
    return f"{rec['kernels']} ({ref})" if ref is not None else str(rec["kernels"])


def fmt_ratio(ratio):
    """ratio = torch.compile best ms / Kiln ms."""
    if ratio is None:
        return "—"
    if ratio >= 1:
        return f"{ratio:.2f}x faster"
    return f"{ratio:.2f}x ({1 / ratio:.2f}x slower)"


def markdown_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def make_tables(results, models, dtypes, torch_modes, kiln_tags, kiln_modes, warm):
    compile_modes = [m for m in torch_modes if m != "eager"]
    lines = []
    gpus = sorted({r.get("gpu") for k, r in results.items() if "|torch|" in k and r.get("gpu")})
    if gpus:
        lines.append("GPU: " + ", ".join(gpus))
    for dtype in dtypes:
        bf16 = dtype == "bf16"
        notes, ref_ops = Footnotes(), []
        ratios = {(tag, km): [] for tag in kiln_tags for km in kiln_modes}
        first = "cold / warm s" if warm else "cold s"
        header = ["model"] + (["eager ms"] if "eager" in torch_modes else [])
        for m in compile_modes:
            header += [f"compile {m} ms", f"compile {m} {first}"]
        if bf16:
            header.append("eager bf16 vs fp32 relL2")
        for tag in kiln_tags:
            for km in kiln_modes:
                p = f"{tag} {km}"
                header += [f"{p} ms", f"{p} vs best compile", f"{p} {first}", f"{p} kernels (ref)",
                           f"{p} relL2" + (" (vs fp32)" if bf16 else "")]
        rows = []
        for model in models:
            def get(impl, mode):
                return results.get(f"{model}|{dtype}|{impl}|{mode}")
            row = [model]
            export = get("export", "-")
            if export and export.get("error"):
                row[0] += " (export " + notes.fail(f"{model} export", export["error"]) + ")"
            elif export and export.get("warning"):
                notes.notes.append(f"[{len(notes.notes) + 1}] {model}: {export['warning']}")
                row[0] += f" (warning[{len(notes.notes)}])"
            if "eager" in torch_modes:
                row.append(ms_cell(get("torch", "eager"), notes, f"{model} torch eager"))
            best = None
            for m in compile_modes:
                rec, label = get("torch", m), f"{model} torch.compile {m}"
                row.append(ms_cell(rec, notes, label))
                row.append(first_call_cell(rec, "first_call_s", warm, notes, label))
                if ok(rec) and rec.get("median_ms"):
                    best = rec["median_ms"] if best is None else min(best, rec["median_ms"])
            if bf16:
                eager = get("torch", "eager")
                value = eager.get("rel_l2_fp32") if ok(eager) else None
                if value is None and export:
                    value = export.get("rel_l2_fp32")
                row.append(fmt(value, "{:.1e}"))
            for tag in kiln_tags:
                for km in kiln_modes:
                    rec, label = get(tag, km), f"{model} {tag} {km}"
                    row.append(ms_cell(rec, notes, label))
                    ratio = None
                    if ok(rec) and best and rec.get("median_ms"):
                        ratio = best / rec["median_ms"]
                        ratios[(tag, km)].append(ratio)
                    row.append(fmt_ratio(ratio))
                    row.append(first_call_cell(rec, "cold_first_call_s", warm, notes, label))
                    row.append(kernels_cell(rec))
                    row.append(rel_cell(rec, notes, label, bf16))
                    if ok(rec) and rec.get("reference_ops"):
                        ops = ", ".join(f"{op} x{n}" for op, n in sorted(rec["reference_ops"].items()))
                        ref_ops.append(f"{label}: {ops}")
            rows.append(row)
        lines += ["", f"### {dtype}", ""] + markdown_table(header, rows) + [""]
        for (tag, km), rs in ratios.items():
            if rs:
                g = math.exp(sum(math.log(r) for r in rs) / len(rs))
                lines.append(f"Geometric mean, torch.compile best / {tag} {km}: {fmt_ratio(g)} over {len(rs)} models")
            else:
                lines.append(f"Geometric mean, torch.compile best / {tag} {km}: —")
        if ref_ops:
            lines += ["", "Reference kernels (ops Kiln ran with its reference implementation):"]
            lines += [f"- {r}" for r in ref_ops]
        if notes.notes:
            lines += ["", "Notes:"] + notes.notes
    lines += ["", "ms: median per call; cold/warm s: first call of a fresh process (compile + run) with "
              "caches off / on a populated cache (Kiln's in parentheses: its compile or cache load and first run alone, without "
              "reading the model, making the device's context and copying the weights there); vs best compile: torch.compile's best mode ms / Kiln ms; "
              "relL2: ||kiln - torch|| / ||torch|| against torch eager in the same dtype"
              + (" (bf16: in parentheses against the fp32 model)" if "bf16" in dtypes else "") + "."]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", required=True, help="exported models and .npy files (reused)")
    p.add_argument("--out", required=True, help="results.json, table.md, logs/")
    p.add_argument("--kiln", help="the Kiln CLI (needed for the kiln phase), reported as 'kiln'")
    p.add_argument("--kiln-old", help="a baseline Kiln CLI, reported as 'kiln-old'")
    p.add_argument("--models", default=DEFAULT_MODELS, help="comma list of: " + ",".join(MODELS))
    p.add_argument("--dtypes", default="fp32,bf16")
    p.add_argument("--torch-modes", default="eager,default",
                   help="eager and/or torch.compile modes (default, reduce-overhead, max-autotune, ...)")
    p.add_argument("--kiln-modes", default="default,reduce-overhead")
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--warm", action="store_true", help="also time the first call on a populated cache")
    p.add_argument("--profile", action="store_true",
                   help="also run each Kiln binary once under KILN_LOGS=profile (OUT/profiles/, results '|profile')")
    p.add_argument("--phases", default="export,torch,kiln", help='subset of export,torch,kiln ("" = table only)')
    p.add_argument("--device", default="cuda", help="torch's device, and Kiln's unless --kiln-devices")
    p.add_argument("--kiln-devices", default="", help="Kiln's devices, comma separated (default: --device)")
    p.add_argument("--timeout", type=float, default=900, help="seconds per subprocess")
    args = p.parse_args(argv)
    for name in ("models", "dtypes", "torch_modes", "kiln_modes", "phases", "kiln_devices"):
        setattr(args, name, [s.strip() for s in getattr(args, name).split(",") if s.strip()])
    for model in args.models:
        if model not in MODELS:
            p.error(f"unknown model {model}; known: {', '.join(MODELS)}")
    for dtype in args.dtypes:
        if dtype not in DTYPES:
            p.error(f"unknown dtype {dtype}; known: {', '.join(DTYPES)}")
    for phase in args.phases:
        if phase not in PHASES:
            p.error(f"unknown phase {phase}; known: {', '.join(PHASES)}")
    args.kiln_devices = args.kiln_devices or [args.device]
    args.binaries = []  # (tag, binary, device)
    for tag, path in (("kiln", args.kiln), ("kiln-old", args.kiln_old)):
        if path:
            path = os.path.abspath(path)
            if "kiln" in args.phases and not os.access(path, os.X_OK):
                p.error(f"{path} is not an executable file (gunzip / chmod +x it?)")
            for device in args.kiln_devices:
                args.binaries.append((tag if device == args.device else f"{tag}@{device}", path, device))
    if "kiln" in args.phases and not args.kiln:
        p.error("the kiln phase needs --kiln")
    args.work, args.out = os.path.abspath(args.work), os.path.abspath(args.out)
    return args


def main(argv):
    args = parse_args(argv)
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    results = load_results(os.path.join(args.out, "results.json"))
    log(f"models {','.join(args.models)}; dtypes {','.join(args.dtypes)}; phases {','.join(args.phases) or 'none'}")
    if "export" in args.phases:
        phase_export(args, results)
    if "torch" in args.phases:
        phase_torch(args, results)
    if "kiln" in args.phases:
        for tag, binary, device in args.binaries:
            phase_kiln(args, results, tag, binary, device)
    tags = [tag for tag, _, _ in args.binaries]
    # (a table-only run shows every Kiln the results hold)
    for key in results:
        tag = key.split("|")[2] if key.count("|") == 3 else ""
        if tag.startswith("kiln") and tag not in tags:
            tags.append(tag)
    tags.sort(key=lambda t: (t.split("@")[0] != "kiln", "@" in t, t))
    table = make_tables(results, args.models, args.dtypes, args.torch_modes, tags, args.kiln_modes, args.warm)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(table)
    print(table, flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker_main(sys.argv[2])
    else:
        main(sys.argv[1:])
