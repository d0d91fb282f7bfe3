// Building a KernelPlan from a Schedule: what every target's codegen starts from. Kept apart
// from plan.h so the plan itself (the portable artifact, and its JSON format) does not depend
// on the scheduler.
#pragma once

#include <string_view>

#include "kiln/plan/plan.h"
#include "kiln/schedule/schedule.h"

namespace kiln::plan {

// What every target's plan of a schedule shares: symbols, facts and their guards, symbol
// bindings (each symbol bound from the first input dim that is exactly that symbol; a symbol no
// input binds is a kiln::Error naming `target`), buffers, slots, outputs and peak memory. The
// codegen then adds its prelude and one kernel per schedule kernel.
KernelPlan plan_skeleton(const schedule::Schedule& s, std::string_view target);

// A plan kernel's fields every target fills alike: name, kind, provenance, buffers read and
// written, and for a reference kernel its op, attributes and buffers. The codegen adds the
// source, entry and launch.
PlanKernel kernel_skeleton(const schedule::Kernel& k);

}  // namespace kiln::plan
