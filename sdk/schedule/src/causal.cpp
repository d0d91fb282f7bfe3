// causal_mask: whether an attention's mask hides every key after its query's row (a decoder's
// causal mask), so that a kernel may skip the key tiles after a block's last query row: about
// half of a causal attention's work (GPT-2 at 512 tokens: every second tile is masked out).
// The mask is computed from no graph input (iota compares, tril of ones, a constant an exporter
// folded): it is evaluated here by the interpreter and checked element by element, so every
// way of writing it counts and nothing is assumed of one that is not causal.
#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "internal.h"
#include "kiln/eval/interpreter.h"

namespace kiln::schedule::detail {

namespace {

// The largest mask evaluated (elements): a mask is [lq, lk] or one per batch index; beyond this
// the check would cost more of the compile than it is worth.
constexpr int64_t kMaxMaskElements = int64_t{1} << 24;

// The most negative finite value of dtype t: an additive mask's "masked" (torch's finfo.min).
double lowest(DType t) {
  switch (t) {
    case DType::f16: return -65504.0;
    case DType::bf16: return -3.3895313892515355e38;
    case DType::f32: return std::numeric_limits<float>::lowest();
    default: return std::numeric_limits<double>::lowest();
  }
}

}  // namespace

bool causal_mask(const Graph& g, NodeId mask, const SymInt& lq, const SymInt& lk) {
  const TensorMeta& m = g.node(mask).meta;
  if (!lq.is_static() || !lk.is_static() || m.rank() < 2) return false;
  int64_t n = 1;
  for (const SymInt& s : m.sizes) {
    if (!s.is_static()) return false;
    n *= s.hint();
  }
  const int64_t rows = m.sizes[m.sizes.size() - 2].hint(), keys = m.sizes.back().hint();
  // One value per query row and key (a mask broadcast along either says nothing per row).
  if (rows != lq.hint() || keys != lk.hint() || n == 0 || n > kMaxMaskElements) return false;
  // The nodes the mask is computed from, none of them a graph input.
  std::set<NodeId> needed;
  std::vector<NodeId> todo{mask};
  while (!todo.empty()) {
    const NodeId id = todo.back();
    todo.pop_back();
    if (!needed.insert(id).second) continue;
    const Node& node = g.node(id);
    if (node.op == OpId::input) return false;
    for (NodeId i : node.inputs) todo.push_back(i);
  }
  Graph sub;
  std::vector<NodeId> map(g.size(), -1);
  for (NodeId id : needed) {  // ascending: inputs first
    const Node& node = g.node(id);
    std::vector<NodeId> ins;
    for (NodeId i : node.inputs) ins.push_back(map[static_cast<size_t>(i)]);
    map[static_cast<size_t>(id)] = sub.add(node.op, ins, node.attrs);
  }
  sub.set_outputs({map[static_cast<size_t>(mask)]});
  const std::vector<TensorData> out = eval::run_graph(sub, {});
  const TensorData v = eval::convert(out.at(0), DType::f64);
  const double* x = v.data_as<const double>();
  const bool keep = m.dtype == DType::bool_;  // else added to the scores
  const double masked_below = lowest(m.dtype);
  for (int64_t b = 0; b < n / (rows * keys); ++b)
    for (int64_t q = 0; q < rows; ++q) {
      const double* row = x + (b * rows + q) * keys;
      for (int64_t k = q + 1; k < keys; ++k)
        if (keep ? row[k] != 0.0 : !(row[k] <= masked_below)) return false;  // NaN: not masked
      // An additive row masked everywhere still weighs its keys alike (softmax of equal
      // scores): skipping some would change it. One key up to the row above the lowest value
      // makes the skipped keys' weights 0. (A boolean row keeping none gives 0 either way.)
      bool weighed = keep;
      for (int64_t k = 0; k <= q && k < keys && !weighed; ++k) weighed = row[k] > masked_below;
      if (!weighed) return false;
    }
  return true;
}

}  // namespace kiln::schedule::detail
