#!/usr/bin/env python3
"""Whether two kernel plans' LLVM IR kernels (CUDA, language "llvm") compute the same thing, read
here without a GPU: for a codegen change that should only reorder what a kernel emits.

    python3 tools/gpu/same_llvm_kernels.py OLD.plan.json NEW.plan.json

(plans from `kiln show MODEL --target cuda --save-plan FILE`, one build each). Each module goes
through `opt-16 -passes=sroa,mem2reg` (allocas to SSA, nothing reordered or folded); then every
store is fingerprinted by the expression DAG that feeds its value and address: SSA names and
instruction order erased, operands of commutative ops and phi inputs sorted, cycles cut. Equal
multisets of store fingerprints: the same stores of the same values (shared memory included;
the order of stores to one address is not compared). Kernels are paired by plan order and name.
Exit status 1 when any pair differs."""
import collections, hashlib, json, re, subprocess, sys, tempfile, os

COMMUTATIVE = {"fmul", "fadd", "mul", "add", "and", "or", "xor"}

def fingerprint(ir):
    defs, stores = {}, []
    for line in ir.splitlines():
        s = line.split(";")[0].strip()
        m = re.match(r"(%[\w.]+) = (.*)$", s)
        if m:
            defs[m.group(1)] = re.sub(r", !\w+ !\d+", "", m.group(2)).replace("tail call", "call")
        elif s.startswith("store "):
            stores.append(re.sub(r", !\w+ !\d+", "", s))
    memo, busy = {}, set()
    def h(name):
        if name in memo: return memo[name]
        if name not in defs: return name  # a parameter or a label
        if name in busy: return "cycle"
        busy.add(name)
        rhs = defs[name]
        op = rhs.split(" ")[0]
        if op == "phi":
            text = "phi(" + ",".join(sorted(sub(x) for x in re.findall(r"\[ ([^,\]]+), %[\w.]+ \]", rhs))) + ")"
        elif op in COMMUTATIVE:
            head, args = rhs.split(" ", 2)[:2], rhs.split(" ", 2)[2]
            text = " ".join(head) + " " + ",".join(sorted(sub(a.strip()) for a in args.split(",")))
        else:
            text = sub(rhs)
        busy.discard(name)
        memo[name] = hashlib.md5(text.encode()).hexdigest()[:16]
        return memo[name]
    def sub(t): return re.sub(r"%[\w.]+", lambda m: h(m.group(0)), t)
    return collections.Counter(sub(s) for s in stores)

def llvm_kernels(path):
    return [(k["name"], k["source"]) for k in json.load(open(path))["kernels"] if k.get("language") == "llvm"]

def ssa(source):
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ll")
        open(src, "w").write(source)
        return subprocess.run(["opt-16", "-passes=sroa,mem2reg", "-S", src], check=True, capture_output=True, text=True).stdout

def main():
    old, new = llvm_kernels(sys.argv[1]), llvm_kernels(sys.argv[2])
    if [n for n, _ in old] != [n for n, _ in new]:
        print(f"the plans' LLVM kernels differ: {[n for n, _ in old]} against {[n for n, _ in new]}")
        return 1
    differ = 0
    for (name, a), (_, b) in zip(old, new):
        fa, fb = fingerprint(ssa(a)), fingerprint(ssa(b))
        same = fa == fb
        differ += not same
        print(f"{name}: {'same' if same else 'DIFFERENT'} ({sum(fa.values())} stores; "
              f"{sum((fa - fb).values())} only in the first, {sum((fb - fa).values())} only in the second)")
    print(f"{len(old) - differ} of {len(old)} LLVM kernels compute the same stores")
    return 1 if differ else 0

if __name__ == "__main__":
    sys.exit(main())
