#!/usr/bin/env bash
# kiln run --profile end to end on one target (CTest: cli_kiln_profile_<target>).
#   profile_test.sh KILN SAMPLES_DIR WORK_DIR TARGET
# The kiln.profile file of a graph and of its saved plan: one entry per kernel of the plan that
# ran (--save-plan), in plan order with the same names, medians > 0, shares summing to 1; and the
# mistakes refused by name.
set -uo pipefail
kiln="$1"; samples="$2"; work="$3"; target="$4"
rm -rf "$work"; mkdir -p "$work"
failures=0
source "$(dirname "$0")/expect.sh"
export KILN_VULKAN_WARM_S=0

# check_profile PROFILE PLAN CALLS: the profile matches the plan kernel by kernel.
check_profile() {
  if python3 - "$@" <<'PY'; then echo "ok: $1 matches $2"; else fail "$1 does not match $2"; fi
import json, sys
prof_path, plan_path, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
prof, plan = json.load(open(prof_path)), json.load(open(plan_path))
names = [k["name"] for k in plan["kernels"]]
ks = prof["kernels"]
errors = []
def want(ok, what):
    if not ok: errors.append(what)
want(prof["format"] == "kiln.profile" and prof["version"] == 1, "format/version")
want(prof["target"] == plan["target"], f"target {prof['target']} vs the plan's {plan['target']}")
want(prof["device"].startswith(plan["target"]), f"device {prof['device']!r}")
want(prof["calls"] == calls and prof["first_call_left_out"] is True, f"calls {prof['calls']}, expected {calls}")
want(prof["kernel_count"] == len(names) == len(ks), f"{len(ks)} kernels, the plan has {len(names)}")
want([k["name"] for k in ks] == names, "kernel names differ from the plan's")
want([k["index"] for k in ks] == list(range(len(ks))), "indices not in plan order")
want(all(k["kind"] == p["kind"] for k, p in zip(ks, plan["kernels"])), "kinds differ from the plan's")
want(all(k["median_ms"] > 0 and 0 < k["min_ms"] <= k["median_ms"] for k in ks), "a median or min is not > 0")
want(abs(sum(k["share"] for k in ks) - 1) < 1e-6, f"shares sum to {sum(k['share'] for k in ks)}")
want(abs(sum(k["median_ms"] for k in ks) - prof["total_ms"]) <= 1e-9 * max(1, prof["total_ms"]), "total_ms is not the sum of medians")
for e in errors: print(e, file=sys.stderr)
sys.exit(1 if errors else 0)
PY
}

tb="$samples/transformer_block.json"
expect 0 "^profile: [0-9]+ kernels on $target.*, [0-9.e-]+ ms in all \(sum of per-kernel medians over calls 2-4\); wrote .*tb.json" -- \
  "$kiln" run "$tb" --random --target "$target" --profile "$work/tb.json" --repeat 3 --save-plan "$work/tb_plan.json"
check_profile "$work/tb.json" "$work/tb_plan.json" 4
# A plan file profiles the same way; without --repeat, 1 + 20 calls.
expect 0 "^profile: [0-9]+ kernels on $target.*calls 2-21\); wrote" -- "$kiln" run "$work/tb_plan.json" --random --profile "$work/tb_from_plan.json"
check_profile "$work/tb_from_plan.json" "$work/tb_plan.json" 21
# KILN_LOGS=profile and --profile together: the log's report is still printed.
expect 0 "\[kiln:profile\] [0-9]+ kernels on $target" -- env KILN_LOGS=profile "$kiln" run "$tb" --random --target "$target" --profile "$work/tb_log.json" --repeat 3

# Mistakes: the reference target has no kernels; a file that cannot be written is named before
# anything runs; --repeat must be a positive count.
expect 2 'kiln run --profile: the reference target runs no kernels to time' -- "$kiln" run "$tb" --random --profile "$work/ref.json"
expect 1 "^kiln: error: kiln run --profile: cannot write '$work/none/p.json': its folder '$work/none' does not exist" -- \
  "$kiln" run "$tb" --random --target "$target" --profile "$work/none/p.json"
expect 1 "^kiln: error: kiln run --profile: cannot write '$work': it is a folder" -- "$kiln" run "$tb" --random --target "$target" --profile "$work"
expect 2 "kiln run: --repeat takes a positive integer, got '0'" -- "$kiln" run "$tb" --random --target "$target" --profile "$work/p.json" --repeat 0

if [[ $failures -ne 0 ]]; then echo "$failures check(s) failed" >&2; exit 1; fi
echo "all kiln run --profile checks on $target passed"
