// decompose: every composite (an op whose OpDef has a decomposition) is replaced by the
// primitives its decomposition emits, recursively, so no composite is left.
#include "kiln/graph/error.h"
#include "kiln/passes/passes.h"
#include "rewrite.h"

namespace kiln::passes {

namespace {

struct Expander {
  Graph& out;
  std::vector<std::string_view>* origin = nullptr;  // per node of out: its top-level composite
  int composites = 0;

  // Appends op over `inputs` (nodes of out) to out, expanding composites; returns the node
  // holding the result. `from` is the top-level composite being expanded ("" outside one).
  NodeId emit(OpId op, const std::vector<NodeId>& inputs, const Attrs& attrs, int depth, std::string_view from = {}) {
    const OpDef& def = op_def(op);
    if (def.decompose == nullptr) {
      const NodeId id = out.add(op, inputs, attrs);
      if (origin) {
        origin->resize(out.size());
        (*origin)[static_cast<size_t>(id)] = from;
      }
      return id;
    }
    if (from.empty()) from = def.name;
    KILN_INTERNAL_CHECK(depth < 16, "passes: decompose: the decomposition of ", def.name,
               " does not bottom out in primitives (16 levels deep)");
    ++composites;
    // The decomposition runs on a scratch graph over the same metas and ShapeEnv, then its
    // nodes are replayed here, each expanded in turn.
    Graph scratch;
    scratch.shapes() = out.shapes();
    std::vector<NodeId> scratch_in;
    for (TensorMeta& m : out.metas_met(inputs)) scratch_in.push_back(scratch.add_input(std::move(m)));
    const NodeId result = def.decompose(scratch, scratch_in, attrs);
    std::vector<NodeId> map(scratch.size(), -1);
    for (size_t k = 0; k < scratch_in.size(); ++k) map[static_cast<size_t>(scratch_in[k])] = inputs[k];
    for (size_t id = 0; id < scratch.size(); ++id) {
      const Node& n = scratch.node(static_cast<NodeId>(id));
      if (n.op == OpId::input) continue;
      std::vector<NodeId> ins = n.inputs;
      for (NodeId& i : ins) i = map[static_cast<size_t>(i)];
      map[id] = emit(n.op, ins, n.attrs, depth + 1, from);
    }
    return map[static_cast<size_t>(result)];
  }
};

using Keep = std::function<bool(const Graph&, const Node&)>;

PassResult expand(const Graph& g, std::vector<std::string_view>* origin, const Keep* keep = nullptr) {
  detail::Rewriter rw(g, "decompose");
  Expander ex{rw.out(), origin};
  const size_t before = g.op_count();
  for (NodeId id = 0; id < static_cast<NodeId>(g.size()); ++id) {
    const Node& n = g.node(id);
    if (n.op == OpId::input) continue;
    if (op_def(n.op).decompose == nullptr || (keep && (*keep)(g, n))) {
      rw.copy(id);
    } else {
      rw.bind(id, ex.emit(n.op, rw.mapped_inputs(id), n.attrs, 0));
    }
  }
  Graph out = rw.finish();
  if (origin) origin->resize(out.size());
  const size_t after = out.op_count();
  return {std::move(out), ex.composites > 0,
          "decompose: expanded " + std::to_string(ex.composites) + " composite" + (ex.composites == 1 ? "" : "s") +
              " (" + std::to_string(before) + " -> " + std::to_string(after) + " ops)"};
}

PassResult run(const Graph& g) { return expand(g, nullptr); }

}  // namespace

const Pass decompose_pass{"decompose", &run};

Graph decompose(const Graph& g) { return run_pass(decompose_pass, g).graph; }

Graph decompose_except(const Graph& g, const Keep& keep) {
  return expand(g, nullptr, &keep).graph;
}

Graph decompose_with_origins(const Graph& g, std::vector<std::string_view>& origin) {
  origin.clear();
  return expand(g, &origin).graph;
}

}  // namespace kiln::passes
