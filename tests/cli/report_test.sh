#!/usr/bin/env bash
# kiln report end to end: a program run with KILN_DEBUG_DIR (a recompile, a graph break), the
# report of its dumps (the data checked as JSON, the page checked to be self-contained), the
# report of a graph file, and bad input. Leaves WORK/report.html and WORK/report.json for the
# page's browser test (tests/cli/report_browser.test.js, label web).
# usage: report_test.sh KILN REPORT_PROGRAM GRAPHS_DIR WORK
set -uo pipefail
kiln="$1" program="$2" graphs="$3" work="$4"
source "$(dirname "$0")/expect.sh"
failures=0
rm -rf "$work" && mkdir -p "$work"

KILN_DEBUG_DIR="$work/dumps" "$program" > "$work/program.txt" 2>&1 || fail "the program failed: $(cat "$work/program.txt")"
expect 0 "wrote .*report.html: 4 compiles of 2 functions" -- "$kiln" report "$work/dumps" --out "$work/report.html" --json "$work/report.json"

# The data: the recompile with its reason, the segments with what ended them, every compile's
# report made again here and equal to the program's plan.
python3 - "$work/report.json" <<'PY' || fail "report.json"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["format"] == "kiln.report" and d["version"] == 1, d.get("format")
kinds = [c["kind"] for c in d["compiles"]]
assert kinds == ["first", "recompile", "segment", "segment"], kinds
assert [c["id"] for c in d["compiles"]] == ["0/0", "0/1", "1/0", "1/1"]
rec = d["compiles"][1]
assert rec["reason"] == "input 0 (x): size mismatch at dim 0: expected 32, got 48", rec["reason"]
assert any(g.startswith("graph break: item() at ") and "report_program.cpp:" in g for g in d["compiles"][2]["graph_breaks"]), d["compiles"][2]["graph_breaks"]
assert d["compiles"][3]["graph_breaks"] == ["the function's return"], d["compiles"][3]["graph_breaks"]
for c in d["compiles"]:
    assert "error" not in c, c.get("error")
    r = c["report"]
    assert c["target"] == "cpu" and r["target"] == "cpu"
    assert len(r["kernels"]) >= 1 and r["passes"] and r["input_text"]
    assert c["plan_check"].startswith("the plan made for this report is the one"), c["plan_check"]
    assert c["timing_ms"]["compile"] > 0
assert d["compiles"][0]["guards"] and d["compiles"][0]["timing_ms"]["trace"] > 0
assert "recompile" in d["functions"][0]["stats"]
# The captured weight's 4 KB are left out of the report's graphs.
consts = [n["attrs"]["value"] for n in d["compiles"][2]["report"]["input"]["nodes"] if n["op"] == "constant"]
assert any(v.get("data_elided_bytes") == 4096 and v["data_base64"] == "" for v in consts), consts
# Source lines: each captured node the program traced names the line of report_program.cpp
# that traced it, in the lambda that holds it.
def line_of(c, op):
    ops = {n["id"]: n["op"] for n in c["report"]["input"]["nodes"]}
    found = [x for x in c["sources"] if ops.get(x["node"]) == op]
    assert found, (c["id"], op, c["sources"])
    x = found[0]
    assert x["file"].endswith("tests/cli/report_program.cpp") and "main::{lambda" in x["function"], x
    return open(x["file"]).read().split("\n")[x["line"] - 1]
for c in d["compiles"]:
    assert c["sources_recorded"] is True and c["sources"], (c["id"], c.get("sources"))
for op in ("matmul", "softmax"):
    assert "softmax(matmul(x, w), -1)" in line_of(d["compiles"][0], op), line_of(d["compiles"][0], op)
    assert "softmax(matmul(x, w), -1)" in line_of(d["compiles"][1], op)
assert "exp(matmul(x, proj))" in line_of(d["compiles"][2], "exp"), line_of(d["compiles"][2], "exp")
assert "sum(y).item<double>()" in line_of(d["compiles"][2], "sum"), line_of(d["compiles"][2], "sum")
assert "y / total" in line_of(d["compiles"][3], "div"), line_of(d["compiles"][3], "div")
print("report.json: ok")
PY
# The page: one file, nothing fetched from anywhere, the data in.
grep -Eq '(src|href)=["'"'"']?(https?:)?//' "$work/report.html" && fail "report.html refers to another file or address"
grep -q '@KILN_REPORT' "$work/report.html" && fail "report.html still holds a marker"
grep -q 'id="kiln-report-data"' "$work/report.html" || fail "report.html lacks its data"

# A graph file compiled for a target.
expect 0 "wrote .*: 1 compile of 1 function" -- "$kiln" report "$graphs/transformer_block.json" --target cpu --out "$work/graph.html" --json "$work/graph.json"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); c=d['compiles'][0]; assert c['kind']=='graph' and len(c['report']['kernels'])>=3 and c['guards'], c" "$work/graph.json" || fail "graph.json"

# Bad input: an empty directory, flags a directory does not take, a dump whose graph was damaged
# (the report is still written, that compile says why it has none).
mkdir -p "$work/empty"
expect 1 "holds no compile dumps" -- "$kiln" report "$work/empty" --out "$work/empty.html"
expect 2 "--target and --mode are for a graph or model file" -- "$kiln" report "$work/dumps" --target cpu
cp -r "$work/dumps" "$work/damaged"
first=$(ls -d "$work/damaged"/*_0 | head -1)
echo '{"format": "kiln.graph", "nodes": [' > "$first/graph.json"
expect 0 "4 compiles of 2 functions \(1 without a report" -- "$kiln" report "$work/damaged" --out "$work/damaged.html" --json "$work/damaged.json"
python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['compiles'][0]; assert c['report'] is None and 'graph.json' in c['error'], c" "$work/damaged.json" || fail "damaged.json"

echo "$failures failure(s)"
[[ $failures -eq 0 ]]
