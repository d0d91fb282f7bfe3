// Process replay (the tinygrad practice): with KILN_REPLAY_DIR set, every plan a codegen makes
// in this process is written there as text, every field and every source, so that two commits'
// plans for the same tests, samples and benchmarks can be diffed (tools/replay/replay.sh).
// A no-op, one getenv per process, when the variable is unset; never throws.
#pragma once

#include <string>
#include <string_view>

#include "kiln/plan/plan.h"

namespace kiln::plan {

// Whether KILN_REPLAY_DIR is set (read once): callers build record_for_replay's input only then.
bool replay_enabled();

// Every field of `p` in a stable text form (the readable str(), then what it leaves out:
// launches, gemms, variants, fixed-signature arguments, languages, the prelude and each source).
std::string replay_text(const KernelPlan& p);

// Writes replay_text(p) to $KILN_REPLAY_DIR/<program>-<target>-<hash of `input`>-<n>.txt, where
// `input` names what the plan was made from (the schedule's text) and n counts earlier plans of
// the same input in this process (other options).
void record_for_replay(const KernelPlan& p, std::string_view input);

}  // namespace kiln::plan
