// Plan files as `kiln run` and `kiln show` write and read them (docs/plan-trust.md). A plan is
// native code, so a plan file runs only when this Kiln makes the same plan from what the file
// says made it (its origin), or when it is signed with the user's secret (KILN_CACHE_SECRET: the
// key a team already trusts with its shared cache); `--trust-plan` is the explicit escape.
#pragma once

#include <string>

#include "kiln/plan/plan.h"

namespace kiln::cli {

// Writes `p` as kiln.plan JSON to `path`, signed when KILN_CACHE_SECRET is set; `who` starts
// the error when it cannot be written ("kiln run --save-plan").
void write_plan_file(const std::string& path, plan::KernelPlan p, const std::string& who);

// Returns when the plan read from `file` may run: its signature verifies with KILN_CACHE_SECRET,
// or this Kiln makes the same plan from its origin (byte for byte). Otherwise a kiln::Error
// saying what failed and that --trust-plan runs it anyway.
void check_plan_may_run(const plan::KernelPlan& p, const std::string& file);

}  // namespace kiln::cli
