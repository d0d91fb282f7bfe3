// Rematerialization: torch's min-cut partitioner (AOTAutograd's) on Kiln's one graph. A training
// step's memory peaks where its forward ends: every activation the backward reads is stored
// across that point. Here the point is found, not told: the node position that the most bytes
// of values cross (defined before it, read at or after it). The values read across it are
// either stored, or computed a second time after it from values that are stored; a minimum cut
// over the graph before the point picks the set to store with the fewest bytes, where only
// cheap ops (pointwise, views) are recomputed (a product, a convolution or a reduction never is,
// nor a value under 2^16 elements, nor one read again within 64 nodes: it gains nothing). Inputs,
// outputs and values generated from constants alone are there anyway: recomputing from them
// costs no storage. partition_stored is the same cut at a given point (a forward's end, for a
// compiled call differentiated from outside: frontends/cpp/src/call_gradients.cpp). A batch norm's
// activated output, read by the next convolution and again by the backward, is then recomputed
// in the backward from the normalisation's input, which the backward keeps anyway; a weight's
// bf16 cast from the weight. The cut is taken again at the new peak, a few times, while it
// recomputes something. Positions are node order, which is the order the scheduler's kernels
// run in; the copies come just before their first reader past the point.
#include <algorithm>
#include <functional>
#include <limits>
#include <queue>

#include "kiln/config/log.h"
#include "kiln/passes/passes.h"
#include "rewrite.h"

namespace kiln::passes {

namespace {

constexpr int64_t kMinElements = int64_t{1} << 16;  // smaller values are not worth a second computation
constexpr NodeId kMinGap = 64;                      // nodes between a value's last read before the point and its first after
constexpr int kMaxRounds = 4;                       // cuts taken, each at the peak left by the one before

bool view(const Node& n) {
  switch (n.op) {
    case OpId::reshape:
    case OpId::permute:
    case OpId::transpose:
    case OpId::expand:
    case OpId::squeeze:
    case OpId::unsqueeze:
    case OpId::slice:
    case OpId::flatten: return true;
    default: return false;
  }
}

// Ops the backward may compute again: memory-bound ones, which fuse into the kernel that reads them.
bool cheap(const Node& n) {
  const OpCategory c = op_def(n.op).category;
  return c == OpCategory::unary || c == OpCategory::binary || c == OpCategory::ternary || view(n);
}

int64_t bytes(const Node& n) { return n.meta.numel().hint() * static_cast<int64_t>(dtype_size(n.meta.dtype)); }

// Dinic's maximum flow; after it, which vertices the source still reaches and which still reach
// the sink in the residual graph.
class MaxFlow {
 public:
  static constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;
  explicit MaxFlow(int vertices) : adj_(static_cast<size_t>(vertices)) {}
  void add(int from, int to, int64_t capacity) {
    adj_[static_cast<size_t>(from)].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({to, capacity});
    adj_[static_cast<size_t>(to)].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({from, 0});
  }
  int64_t run(int s, int t) {
    int64_t flow = 0;
    while (levels(s, t)) {
      next_.assign(adj_.size(), 0);
      while (const int64_t f = push(s, t, kInf)) flow += f;
    }
    return flow;
  }
  // Vertices from which `t` is reachable in the residual graph (the sink's side of the cut
  // nearest the sink: of equal cuts, the one that stores the latest values, recomputing least).
  std::vector<bool> reach_sink(int t) const {
    std::vector<bool> seen(adj_.size(), false);
    std::vector<int> stack{t};
    seen[static_cast<size_t>(t)] = true;
    while (!stack.empty()) {
      const int v = stack.back();
      stack.pop_back();
      for (int e : adj_[static_cast<size_t>(v)]) {
        // Edge e leaves v; its pair e ^ 1 enters v from edges_[e].to with residual cap of e ^ 1.
        const int u = edges_[static_cast<size_t>(e)].to;
        if (!seen[static_cast<size_t>(u)] && edges_[static_cast<size_t>(e ^ 1)].cap > 0) {
          seen[static_cast<size_t>(u)] = true;
          stack.push_back(u);
        }
      }
    }
    return seen;
  }

 private:
  struct Edge {
    int to;
    int64_t cap;
  };
  bool levels(int s, int t) {
    level_.assign(adj_.size(), -1);
    std::queue<int> q;
    q.push(s);
    level_[static_cast<size_t>(s)] = 0;
    while (!q.empty()) {
      const int v = q.front();
      q.pop();
      for (int e : adj_[static_cast<size_t>(v)]) {
        const Edge& ed = edges_[static_cast<size_t>(e)];
        if (ed.cap > 0 && level_[static_cast<size_t>(ed.to)] < 0) {
          level_[static_cast<size_t>(ed.to)] = level_[static_cast<size_t>(v)] + 1;
          q.push(ed.to);
        }
      }
    }
    return level_[static_cast<size_t>(t)] >= 0;
  }
  // One augmenting path along increasing levels (iterative: graphs have thousands of nodes).
  int64_t push(int s, int t, int64_t limit) {
    std::vector<int> path;  // edges
    int v = s;
    while (v != t) {
      std::vector<int>& out = adj_[static_cast<size_t>(v)];
      int& at = next_[static_cast<size_t>(v)];
      bool moved = false;
      for (; at < static_cast<int>(out.size()); ++at) {
        const Edge& ed = edges_[static_cast<size_t>(out[static_cast<size_t>(at)])];
        if (ed.cap > 0 && level_[static_cast<size_t>(ed.to)] == level_[static_cast<size_t>(v)] + 1) {
          path.push_back(out[static_cast<size_t>(at)]);
          v = ed.to;
          moved = true;
          break;
        }
      }
      if (moved) continue;
      if (path.empty()) return 0;
      level_[static_cast<size_t>(v)] = -1;  // a dead end: never again this phase
      v = edges_[static_cast<size_t>(path.back() ^ 1)].to;
      path.pop_back();
      ++next_[static_cast<size_t>(v)];
    }
    int64_t f = limit;
    for (int e : path) f = std::min(f, edges_[static_cast<size_t>(e)].cap);
    for (int e : path) {
      edges_[static_cast<size_t>(e)].cap -= f;
      edges_[static_cast<size_t>(e ^ 1)].cap += f;
    }
    return f;
  }
  std::vector<std::vector<int>> adj_;
  std::vector<Edge> edges_;
  std::vector<int> level_, next_;
};

// What a graph's values are to a cut: who reads each, and which are there anyway: inputs and
// outputs are stored; values generated from constants and sources alone (a causal mask of
// iotas) are computed where they are read, at no cost in memory.
struct Reads {
  explicit Reads(const Graph& g) : g(g), readers(g.size()), output(g.size(), false), generated(generated_only(g)) {
    for (NodeId o : g.outputs()) output[static_cast<size_t>(o)] = true;
    for (NodeId id = 0; id < static_cast<NodeId>(g.size()); ++id)
      for (NodeId i : g.node(id).inputs)
        if (readers[static_cast<size_t>(i)].empty() || readers[static_cast<size_t>(i)].back() != id)
          readers[static_cast<size_t>(i)].push_back(id);
  }
  bool always_there(NodeId i) const {
    return g.node(i).op == OpId::input || generated[static_cast<size_t>(i)] || output[static_cast<size_t>(i)];
  }
  const Graph& g;
  std::vector<std::vector<NodeId>> readers;
  std::vector<bool> output;
  std::vector<bool> generated;
};

// The minimum cut at `point`: of the values before it that nodes at or after it read, which are
// stored (the fewest bytes) and which are computed again after it from stored ones. With
// `read_soon_stored`, a value read again within kMinGap nodes is stored (a cut inside one graph:
// a copy would be live as long); a forward/backward split has no such distance.
struct Cut {
  std::vector<NodeId> stored, recomputed;
  int64_t stored_bytes = 0, recomputed_bytes = 0, crossing_bytes = 0;
  std::string lines;  // what is stored and recomputed, and why (KILN_LOGS=partition)
};
Cut min_cut(const Reads& r, NodeId point, bool read_soon_stored) {
  const Graph& g = r.g;
  const size_t size = g.size();
  std::vector<int> vertex(size, -1);  // 2k: v computed, 2k + 1: v stored, for the k-th value taken
  std::vector<NodeId> taken;
  std::vector<bool> across(size, false);
  std::vector<const char*> fixed(size, nullptr);  // why v is not recomputed
  std::function<void(NodeId)> take = [&](NodeId v) {
    if (vertex[static_cast<size_t>(v)] >= 0 || r.always_there(v)) return;
    vertex[static_cast<size_t>(v)] = static_cast<int>(taken.size());
    taken.push_back(v);
    const Node& n = g.node(v);
    const char*& why = fixed[static_cast<size_t>(v)];
    if (!why && !cheap(n)) why = "not an op the backward computes again";
    if (!why && n.meta.numel().hint() < kMinElements) why = "small";
    if (!why)
      for (NodeId i : n.inputs) take(i);
  };
  for (NodeId v = 0; v < point; ++v) {
    const std::vector<NodeId>& rd = r.readers[static_cast<size_t>(v)];
    const auto after = std::lower_bound(rd.begin(), rd.end(), point);
    if (after == rd.end() || r.always_there(v)) continue;
    across[static_cast<size_t>(v)] = true;
    // Read again soon after its last read before the point (or its making): storing it costs
    // little time, and a copy would be live as long.
    const NodeId before = after == rd.begin() ? v : *(after - 1);
    if (read_soon_stored && *after - before < kMinGap) fixed[static_cast<size_t>(v)] = "read again soon";
  }
  for (NodeId v = 0; v < point; ++v)
    if (across[static_cast<size_t>(v)]) take(v);
  Cut cut;
  if (taken.empty()) return cut;
  const int source = 2 * static_cast<int>(taken.size()), sink = source + 1;
  MaxFlow flow(sink + 1);
  for (NodeId v : taken) {
    const int k = 2 * vertex[static_cast<size_t>(v)];
    flow.add(k, k + 1, bytes(g.node(v)));  // storing v
    if (fixed[static_cast<size_t>(v)]) {
      flow.add(source, k, MaxFlow::kInf);
    } else {
      for (NodeId i : g.node(v).inputs)
        if (const int u = vertex[static_cast<size_t>(i)]; u >= 0) flow.add(2 * u + 1, k, MaxFlow::kInf);
    }
    if (across[static_cast<size_t>(v)]) flow.add(k + 1, sink, MaxFlow::kInf);
  }
  cut.stored_bytes = flow.run(source, sink);
  const std::vector<bool> sink_side = flow.reach_sink(sink);
  const bool log = logs::enabled(logs::Category::partition);
  std::string stores, recomputes;
  for (NodeId v : taken) {
    const Node& n = g.node(v);
    const int k = 2 * vertex[static_cast<size_t>(v)];
    if (across[static_cast<size_t>(v)]) cut.crossing_bytes += bytes(n);
    if (!sink_side[static_cast<size_t>(k)]) {  // before the point only, or stored
      if (sink_side[static_cast<size_t>(k) + 1]) {
        cut.stored.push_back(v);
        const char* why = fixed[static_cast<size_t>(v)];
        if (log)
          stores += "  store %" + std::to_string(v) + " (" + std::string(op_name(n.op)) + " " + n.meta.str() + "): " +
                    (why ? why : "fewer bytes than what it is computed from") + "\n";
      }
      continue;
    }
    cut.recomputed.push_back(v);
    cut.recomputed_bytes += bytes(n);
    if (log) {
      recomputes += "  recompute %" + std::to_string(v) + " (" + std::string(op_name(n.op)) + " " + n.meta.str() + ") from";
      for (NodeId i : n.inputs)
        recomputes += " %" + std::to_string(i) +
                      (r.always_there(i) ? " (kept anyway)" : vertex[static_cast<size_t>(i)] < 0 ? "" :
                       sink_side[static_cast<size_t>(2 * vertex[static_cast<size_t>(i)])] ? " (recomputed)" : " (stored)");
      recomputes += "\n";
    }
  }
  cut.lines = stores + recomputes;
  return cut;
}

std::string mib(int64_t b) { return std::to_string(b / (1 << 20)) + " MiB"; }

// One cut at the graph's peak: split[v] is the position from which v's readers read a
// recomputed copy (-1: stored for all). Empty when nothing is recomputed.
std::vector<NodeId> cut_at_peak(const Graph& g, std::string& log) {
  const NodeId size = static_cast<NodeId>(g.size());
  const Reads r(g);
  // Bytes live at each position: a value from its node to its last read, where a view's reads
  // count as its input's (it holds no memory of its own).
  std::vector<NodeId> last(static_cast<size_t>(size));
  for (NodeId id = 0; id < size; ++id)
    last[static_cast<size_t>(id)] = r.output[static_cast<size_t>(id)] ? size
                                    : r.readers[static_cast<size_t>(id)].empty() ? id
                                                                                 : r.readers[static_cast<size_t>(id)].back();
  for (NodeId id = size; id-- > 0;)
    if (view(g.node(id))) {
      NodeId& base = last[static_cast<size_t>(g.node(id).inputs[0])];
      base = std::max(base, last[static_cast<size_t>(id)]);
    }
  std::vector<int64_t> live(static_cast<size_t>(size) + 2, 0);
  for (NodeId id = 0; id < size; ++id) {
    const Node& n = g.node(id);
    if ((r.always_there(id) && !r.output[static_cast<size_t>(id)]) || view(n) || last[static_cast<size_t>(id)] <= id) continue;
    live[static_cast<size_t>(id) + 1] += bytes(n);
    live[static_cast<size_t>(last[static_cast<size_t>(id)]) + 1] -= bytes(n);
  }
  NodeId peak = 0;
  int64_t most = 0, running = 0;
  for (NodeId p = 0; p < size; ++p) {
    running += live[static_cast<size_t>(p)];
    if (running > most) most = running, peak = p;
  }
  if (most == 0) return {};
  const Cut cut = min_cut(r, peak, true);
  if (cut.recomputed.empty()) return {};
  std::vector<NodeId> split(static_cast<size_t>(size), -1);
  for (NodeId v : cut.recomputed) split[static_cast<size_t>(v)] = peak;
  log += "cut at %" + std::to_string(peak) + ", where " + mib(most) + " are live: of the values read across it (" +
         mib(cut.crossing_bytes) + "), and what they come from, " + mib(cut.stored_bytes) + " stored, " +
         std::to_string(cut.recomputed.size()) + " values (" + mib(cut.recomputed_bytes) + ") recomputed from %" +
         std::to_string(peak) + " on\n" + cut.lines;
  return split;
}

Graph recompute(const Graph& g, const std::vector<NodeId>& split) {
  const size_t size = g.size();
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
  return rw.finish();
}

PassResult run_rematerialize(const Graph& g) {
  Graph at = g;
  std::string log;
  int rounds = 0;
  for (; rounds < kMaxRounds; ++rounds) {
    const std::vector<NodeId> split = cut_at_peak(at, log);
    if (split.empty()) break;
    at = recompute(at, split);
  }
  if (rounds == 0) return {g, false, "rematerialize: no change"};
  if (logs::enabled(logs::Category::partition)) logs::write(logs::Category::partition, log);
  return {std::move(at), true, "rematerialize: " + std::to_string(rounds) + " cut(s), values recomputed after each"};
}

}  // namespace

const Pass rematerialize_pass{"rematerialize", &run_rematerialize};

Graph rematerialize(const Graph& g) { return run_pass(rematerialize_pass, g).graph; }

std::vector<bool> generated_only(const Graph& g) {
  std::vector<bool> gen(g.size(), false);
  for (NodeId id = 0; id < static_cast<NodeId>(g.size()); ++id) {
    const Node& n = g.node(id);
    if (n.op == OpId::input) continue;
    bool all = true;
    for (NodeId i : n.inputs) all = all && gen[static_cast<size_t>(i)];
    gen[static_cast<size_t>(id)] = all;
  }
  return gen;
}

std::vector<NodeId> partition_stored(const Graph& joint, NodeId boundary, std::string_view what) {
  const Reads r(joint);
  const Cut cut = min_cut(r, boundary, false);
  if (logs::enabled(logs::Category::partition))
    logs::write(logs::Category::partition,
                std::string(what) + ": forward and backward split at %" + std::to_string(boundary) +
                    ": of the forward's values the backward reads (" + mib(cut.crossing_bytes) + "), and what they come from, " +
                    mib(cut.stored_bytes) + " stored, " + std::to_string(cut.recomputed.size()) + " values (" +
                    mib(cut.recomputed_bytes) + ") recomputed in the backward\n" + cut.lines);
  return cut.stored;
}

}  // namespace kiln::passes
