// Rematerialization: a large pointwise value read early and again much later (an activation
// that a training step's forward reads, then its backward) is computed a second time for the
// late readers, from inputs that are stored until then anyway, instead of being stored across
// the gap. That is the cut torch's partitioner (AOTAutograd's min-cut) finds for the common
// case: a batch norm's normalised, activated output is recomputed in the backward from the
// normalised input it keeps, rather than stored beside it. Positions are node order, which is
// the order the scheduler's kernels run in.
#include <algorithm>
#include <functional>
#include <limits>

#include "kiln/config/log.h"
#include "kiln/passes/passes.h"
#include "rewrite.h"

namespace kiln::passes {

namespace {

bool pointwise(const Node& n) {
  const OpCategory c = op_def(n.op).category;
  return c == OpCategory::unary || c == OpCategory::binary || c == OpCategory::ternary;
}

int64_t elements(const Node& n) { return n.meta.numel().hint(); }

constexpr int64_t kMinElements = int64_t{1} << 16;  // smaller values are not worth a second computation
constexpr NodeId kMinGap = 64;                      // nodes between the early and the late readers
constexpr int64_t kSmallInput = 8;                  // an input this many times smaller is kept as is
constexpr int kMaxDepth = 4;                        // ops a recomputed value costs, at most

PassResult run_rematerialize(const Graph& g) {
  const size_t size = g.size();
  const NodeId never = std::numeric_limits<NodeId>::max();  // read past the last node: an output
  std::vector<std::vector<NodeId>> readers(size);
  for (NodeId id = 0; id < static_cast<NodeId>(size); ++id)
    for (NodeId i : g.node(id).inputs)
      if (readers[static_cast<size_t>(i)].empty() || readers[static_cast<size_t>(i)].back() != id)
        readers[static_cast<size_t>(i)].push_back(id);
  std::vector<bool> output(size, false);
  for (NodeId o : g.outputs()) output[static_cast<size_t>(o)] = true;
  auto last_read = [&](NodeId i) {
    const Node& n = g.node(i);
    if (output[static_cast<size_t>(i)] || n.op == OpId::input || n.op == OpId::constant) return never;
    return readers[static_cast<size_t>(i)].empty() ? i : readers[static_cast<size_t>(i)].back();
  };

  // split[v]: readers at or after it read v's recomputed copy (-1: v is stored for all).
  std::vector<NodeId> split(size, -1);
  std::vector<int> depth(size, 0);  // the ops a copy of v computes, with the copies it reads
  std::string reasons;
  int count = 0;
  for (NodeId v = 0; v < static_cast<NodeId>(size); ++v) {
    const Node& n = g.node(v);
    const std::vector<NodeId>& r = readers[static_cast<size_t>(v)];
    if (!pointwise(n) || output[static_cast<size_t>(v)] || r.size() < 2 || elements(n) < kMinElements) continue;
    // The widest gap between two readers splits them into early and late.
    size_t at = 0;
    for (size_t k = 2; k < r.size(); ++k)
      if (r[k] - r[k - 1] > r[at + 1] - r[at]) at = k - 1;
    const NodeId early = r[at], late = r[at + 1], last = r.back();
    if (late - early < kMinGap) continue;
    // Every large input must be there at the late readers without storing more: stored until
    // the last of them anyway, recomputed already, or a pointwise value recomputed with v from
    // inputs that are (within kMaxDepth ops in all). Small ones (per-channel statistics) cost
    // little to keep.
    int ops = 1;
    std::vector<NodeId> chain;
    std::function<bool(NodeId)> available = [&](NodeId i) {
      const Node& in = g.node(i);
      if (elements(in) * kSmallInput <= elements(n)) return true;
      if (split[static_cast<size_t>(i)] >= 0) {  // its copy must be there by our late readers
        ops += depth[static_cast<size_t>(i)];
        return split[static_cast<size_t>(i)] <= late;
      }
      if (last_read(i) >= last) return true;
      if (!pointwise(in) || ++ops > kMaxDepth) return false;
      for (NodeId j : in.inputs)
        if (!available(j)) return false;
      chain.push_back(i);
      return true;
    };
    bool ok = true;
    for (NodeId i : n.inputs) ok = ok && available(i);
    if (!ok || ops > kMaxDepth) continue;
    for (NodeId i : chain) {
      split[static_cast<size_t>(i)] = late;
      depth[static_cast<size_t>(i)] = ops;
    }
    split[static_cast<size_t>(v)] = late;
    depth[static_cast<size_t>(v)] = ops;
    ++count;
    if (logs::enabled(logs::Category::partition))
      reasons += "recompute %" + std::to_string(v) + " (" + std::string(op_name(n.op)) + " " + n.meta.str() + ") for its " +
                 std::to_string(r.size() - at - 1) + " reader(s) from %" + std::to_string(late) + " on (" + std::to_string(ops) +
                 " ops): read by %" + std::to_string(early) + ", then not until %" + std::to_string(late) +
                 "; what it is computed from is stored that long anyway\n";
  }
  if (count == 0) return {g, false, "rematerialize: no change"};
  if (!reasons.empty()) logs::write(logs::Category::partition, reasons);

  detail::Rewriter rw(g, "rematerialize");
  std::vector<NodeId> copy(size, -1);  // the recomputed copy of v in the new graph
  // The value node `i` holds for a reader at old position `at`.
  std::function<NodeId(NodeId, NodeId)> value = [&](NodeId i, NodeId at) -> NodeId {
    const NodeId s = split[static_cast<size_t>(i)];
    if (s < 0 || at < s) return rw.map(i);
    NodeId& c = copy[static_cast<size_t>(i)];
    if (c < 0) {
      const Node& n = g.node(i);
      std::vector<NodeId> ins;
      for (NodeId j : n.inputs) ins.push_back(value(j, at));
      c = rw.out().add(n.op, std::move(ins), n.attrs);
    }
    return c;
  };
  for (NodeId id = 0; id < static_cast<NodeId>(size); ++id) {
    const Node& n = g.node(id);
    if (n.op == OpId::input) continue;
    std::vector<NodeId> ins;
    for (NodeId i : n.inputs) ins.push_back(value(i, id));
    if (ins == rw.mapped_inputs(id)) {
      rw.copy(id);
    } else {
      rw.bind(id, rw.out().add(n.op, std::move(ins), n.attrs));
    }
  }
  return {rw.finish(), true, "rematerialize: " + std::to_string(count) + " values recomputed for their late readers"};
}

}  // namespace

const Pass rematerialize_pass{"rematerialize", &run_rematerialize};

Graph rematerialize(const Graph& g) { return run_pass(rematerialize_pass, g).graph; }

}  // namespace kiln::passes
