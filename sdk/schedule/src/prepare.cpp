// prepare: the graph the scheduler works on. Composites are decomposed (passes::decompose), and
// every matmul multiplies f32 operands into an f32 result, with casts around it where the graph
// said another dtype: the gemm runs in f32 (kernels accumulate in f32 anyway) and the casts
// become the matmul's prologue and epilogue.
#include "internal.h"
#include "kiln/passes/passes.h"

namespace kiln::schedule::detail {

Graph prepare(const Graph& in) {
  Graph g = passes::decompose(in);
  bool needs = false;
  for (const Node& n : g.nodes())
    if (n.op == OpId::matmul && n.meta.dtype != DType::f32) needs = true;
  if (!needs) return g;
  Graph out;
  out.shapes() = g.shapes();
  std::vector<NodeId> map(g.size(), -1);
  for (NodeId id = 0; id < static_cast<NodeId>(g.size()); ++id) {
    const Node& n = g.node(id);
    if (n.op == OpId::input) {
      map[static_cast<size_t>(id)] = out.add_input(n.meta, n.name);
      continue;
    }
    std::vector<NodeId> ins;
    for (NodeId i : n.inputs) ins.push_back(map[static_cast<size_t>(i)]);
    if (n.op == OpId::matmul && n.meta.dtype != DType::f32) {
      for (NodeId& i : ins)
        if (out.node(i).meta.dtype != DType::f32) i = out.add(OpId::cast, {i}, Attrs{DType::f32});
      const NodeId mm = out.add(OpId::matmul, ins);
      map[static_cast<size_t>(id)] = out.add(OpId::cast, {mm}, Attrs{n.meta.dtype});
    } else {
      map[static_cast<size_t>(id)] = out.add(n.op, ins, n.attrs);
    }
    if (!n.name.empty()) out.set_name(map[static_cast<size_t>(id)], n.name);
  }
  std::vector<NodeId> outs;
  for (NodeId o : g.outputs()) outs.push_back(map[static_cast<size_t>(o)]);
  out.set_outputs(outs);
  return out;
}

}  // namespace kiln::schedule::detail
