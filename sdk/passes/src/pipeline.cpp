// run_pass: one pass with its invariants checked and its log lines; the default pipeline.
#include <array>

#include "kiln/config/log.h"
#include "kiln/graph/error.h"
#include "kiln/passes/passes.h"
#include "rewrite.h"

namespace kiln::passes {

namespace {

// What every pass must keep: the signature, the outputs' metas, the ShapeEnv.
void verify(const Graph& before, const Graph& after, std::string_view pass) {
  auto bug = [&](auto&&... parts) { internal_fail("passes: ", pass, " ", parts...); };
  if (after.inputs().size() != before.inputs().size())
    bug("changed the number of inputs from ", before.inputs().size(), " to ", after.inputs().size());
  for (size_t k = 0; k < before.inputs().size(); ++k) {
    const Node& a = before.node(before.inputs()[k]);
    const Node& b = after.node(after.inputs()[k]);
    if (!(a.meta == b.meta) || a.name != b.name)
      bug("changed input ", k, " from ", a.meta.str(), " '", a.name, "' to ", b.meta.str(), " '", b.name, "'");
  }
  if (after.outputs().size() != before.outputs().size())
    bug("changed the number of outputs from ", before.outputs().size(), " to ", after.outputs().size());
  for (size_t k = 0; k < before.outputs().size(); ++k) {
    const TensorMeta& a = before.node(before.outputs()[k]).meta;
    const TensorMeta& b = after.node(after.outputs()[k]).meta;
    if (!detail::same_value_meta(a, b)) bug("changed output ", k, " from ", a.str(), " to ", b.str());
  }
  if (after.shapes().symbols() != before.shapes().symbols()) bug("changed the size symbols");
  if (after.shapes().facts() != before.shapes().facts()) {
    std::string facts;
    for (const ShapeFact& f : after.shapes().facts())
      facts += "; " + f.str() + " (" + f.reason + ")";
    bug("changed the shape facts (", before.shapes().facts().size(), " before, after: ", facts.substr(2), ")");
  }
}

}  // namespace

PassResult run_pass(const Pass& pass, const Graph& g) {
  PassResult r = pass.run(g);
  verify(g, r.graph, pass.name);
  if (r.summary.empty()) r.summary = std::string(pass.name) + (r.changed ? ": changed the graph" : ": no change");
  KILN_LOG(graph, r.summary, " (", g.op_count(), " -> ", r.graph.op_count(), " ops)\n", pass.name, " before:\n",
           g.str(), pass.name, " after:\n", r.graph.str());
  return r;
}

PassResult run_passes(std::span<const Pass> passes, const Graph& g) {
  PassResult acc{g, false, {}};
  for (const Pass& p : passes) {
    PassResult r = run_pass(p, acc.graph);
    acc.graph = std::move(r.graph);
    acc.changed = acc.changed || r.changed;
    acc.summary += (acc.summary.empty() ? "" : "; ") + r.summary;
  }
  return acc;
}

std::span<const Pass> default_pipeline() {
  static const std::array<Pass, 6> passes = {recognize_pass, fold_constants_pass, simplify_pass,
                                             cse_pass,       recognize_pass,      dce_pass};
  return passes;
}

Graph run_default_pipeline(const Graph& g) { return run_passes(default_pipeline(), g).graph; }

}  // namespace kiln::passes
