// cse: a node with the same op, the same inputs (after merging) and equal attributes as an
// earlier node is that node. Commutative ops whose result is bit-for-bit symmetric (add, mul,
// eq, ne, logical_and, logical_or) match with their operands swapped too. Inputs never merge
// (each is an argument). Every op is deterministic, the random ones included (their elements depend
// only on seed, key and index), so equal attributes mean equal values; different seeds never merge.
#include <algorithm>
#include <unordered_map>

#include "kiln/passes/passes.h"
#include "rewrite.h"

namespace kiln::passes {

namespace {

uint64_t mix(uint64_t h, uint64_t v) { return h ^ (v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2)); }

bool commutative(OpId op) {
  switch (op) {
    case OpId::add:
    case OpId::mul:
    case OpId::eq:
    case OpId::ne:
    case OpId::logical_and:
    case OpId::logical_or: return true;
    default: return false;
  }
}

// Attribute equality that tells 0.0 from -0.0 (full(-0.0) and full(0.0) differ) and takes
// NaN == NaN (as Attrs::operator== does).
PassResult run(const Graph& g) {
  detail::Rewriter rw(g, "cse");
  const Graph& out = rw.out_graph();
  std::unordered_multimap<uint64_t, NodeId> seen;  // key hash -> node of out
  int merged = 0;
  for (NodeId id = 0; id < static_cast<NodeId>(g.size()); ++id) {
    const Node& n = g.node(id);
    if (n.op == OpId::input) continue;
    std::vector<NodeId> ins = rw.mapped_inputs(id);
    std::vector<NodeId> key = ins;
    if (commutative(n.op)) std::sort(key.begin(), key.end());
    uint64_t h = mix(0xC5E, static_cast<uint64_t>(n.op));
    for (NodeId i : key) h = mix(h, static_cast<uint64_t>(i));
    h = mix(h, n.attrs.hash());
    NodeId match = -1;
    for (auto [it, end] = seen.equal_range(h); it != end && match < 0; ++it) {
      const Node& c = out.node(it->second);
      std::vector<NodeId> ckey = c.inputs;
      if (commutative(c.op)) std::sort(ckey.begin(), ckey.end());
      if (c.op == n.op && ckey == key && c.attrs == n.attrs && detail::same_value_meta(c.meta, n.meta))
        match = it->second;
    }
    if (match >= 0) {
      rw.bind(id, match);
      ++merged;
    } else {
      seen.emplace(h, rw.copy(id));
    }
  }
  return {rw.finish(), merged > 0, "cse: merged " + std::to_string(merged) + " node" + (merged == 1 ? "" : "s")};
}

}  // namespace

const Pass cse_pass{"cse", &run};

Graph eliminate_common_subexpressions(const Graph& g) { return run_pass(cse_pass, g).graph; }

}  // namespace kiln::passes
