// sdk/plan: the JSON form of a KernelPlan ("kiln.plan", version 1; the "Kernel plans" section of
// docs/graph-format.md). It shares the graph format's encoders and decoders for sizes, symbols,
// shape facts, attributes and constant tensors (kiln/graph/json_values.h).
// Takes: a KernelPlan (plan_to_json), or JSON text (plan_from_json).
// Gives: deterministic text (the same plan always gives the same bytes, and plan_to_json of
//   plan_from_json of it gives the same bytes again), or a KernelPlan that passed plan::validate
//   (bind.h): buffer ids, slots, symbol bindings, every buffer reference, constants, reference
//   kernels' ops and attributes (their shape rule must give their output buffer's type).
// Bad input never crashes: every problem is a kiln::Error naming the source and the field path,
//   e.g. "plan.json: kernels[2].reads[0]: buffer 17 does not exist (the plan has 5 buffers)".
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/graph/error.h"
#include "kiln/plan/plan.h"

namespace kiln::plan {

// Serialises a plan: the top level one key a line, each symbol, fact, binding, buffer, slot,
// kernel and guard on one line (source texts as escaped strings). No trailing newline.
std::string plan_to_json(const KernelPlan& p);

// Parses a plan; `source_name` starts every error message. Throws kiln::Error.
KernelPlan plan_from_json(std::string_view text, std::string_view source_name = "<plan>");

// What a plan's signature covers: its JSON without the signature (plan_to_json's bytes).
std::string plan_signed_text(KernelPlan p);

// Where `given` differs from `made`, apart from their origins and signatures: the first differing field in the
// JSON document's order, as a phrase ("kernels[3] ('fused_exp'): its 'source'", "'prelude'"),
// or "" when the two plans are the same. What a runtime says when it refuses a plan file that is
// not the plan Kiln makes from the plan's origin.
std::string plan_difference(const KernelPlan& given, const KernelPlan& made);

// A plan's module text (its prelude, each kernel's source) taken out as named parts
// ("plan.prelude", "kernel<k>.source"), leaving those fields empty: what the compile caches keep
// beside the plan's JSON, so that a hit reads the bulk of a plan as plain bytes instead of
// unescaping it from JSON.
std::vector<std::pair<std::string, std::string>> take_plan_text(KernelPlan& p);
// Puts one part back (moving from `text` only then): false when `name` names no part of a plan's
// text; a kernel index the plan lacks is a kiln::Error.
bool put_plan_text(KernelPlan& p, const std::string& name, std::string&& text);
// Parses a plan whose text parts are kept beside it (a cache entry's blobs): those of `parts`
// that name a part of the plan's text are put back (and removed from `parts`) before the plan is
// checked, as a whole plan file is.
KernelPlan plan_from_json(std::string_view text, std::string_view source_name,
                          std::vector<std::pair<std::string, std::string>>& parts);

}  // namespace kiln::plan
