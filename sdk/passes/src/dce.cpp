// dce: keeps the input nodes (the signature) and the nodes some output depends on; drops the
// rest. No op has a side effect, so an unread node is dead (random numbers included: their values
// depend only on seed, key and index, so dropping one changes no other).
#include "kiln/passes/passes.h"
#include "rewrite.h"

namespace kiln::passes {

namespace {

PassResult run(const Graph& g) {
  const std::vector<char> live = needed_nodes(g, g.outputs());
  detail::Rewriter rw(g, "dce");
  int dropped = 0;
  for (NodeId id = 0; id < static_cast<NodeId>(g.size()); ++id) {
    const Node& n = g.node(id);
    if (n.op == OpId::input) continue;
    if (live[static_cast<size_t>(id)]) {
      rw.copy(id);
    } else {
      ++dropped;
    }
  }
  return {rw.finish(), dropped > 0,
          "dce: removed " + std::to_string(dropped) + " dead node" + (dropped == 1 ? "" : "s")};
}

}  // namespace

const Pass dce_pass{"dce", &run};

Graph eliminate_dead_code(const Graph& g) { return run_pass(dce_pass, g).graph; }

}  // namespace kiln::passes
