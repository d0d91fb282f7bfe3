// Channels-last convolutions (to_channels_last) and permutes moved towards the outputs
// (sink_permutes): what a target whose convolution library runs best on channels-last operands
// (cuDNN's NHWC kernels on tensor cores) asks of the graph, as torch.compile's layout
// optimisation turns a conv net to channels_last.
//
// to_channels_last: convolution(x, w[, b]) -> permute(convolution_channels_last(permute(x),
// w', [b]), back), w' a constant permuted now (a weight that is an input is permuted in the
// graph); the gradient ops convolution_input_grad(gy, w) and convolution_weight_grad(x, gy)
// likewise, with their channels_last attribute set. Alone this adds two permutes per convolution; sink_permutes then moves each permute
// past the ops that read it, so that between two convolutions everything runs channels last
// and the pairs meet and cancel (simplify: permute(permute(x, p), q) -> x):
//   pointwise(permute(a, p), permute(b, p) | small b | expand(small b) | 0-d)
//                                                            -> permute(pointwise(a, b'), p)
//   reduction(permute(a, p), dims)                           -> permute(reduction(a, p(dims)), q)
//   slice(permute(a, p), d), pad(permute(a, p))              -> permute(slice(a, p[d])), permute(pad(a))
//                                                               (not a slice of a permuted input or constant)
//   permute(a, p) moving only size-1 dims                    -> reshape(a)
//   pointwise(expand(a), small b | 0-d)                      -> expand(pointwise(a, b))
// b' is a broadcast operand (smaller than the result: a bias, a squeeze-excitation scale, or
// one expanded to the result's size: a batch norm's backward) given the inverse permute. A
// pointwise op with a full-size operand not read through the same permute stays where it is
// (moving the permute there would only move the transpose).
#include <algorithm>
#include <numeric>
#include <map>
#include <string>

#include "kiln/eval/interpreter.h"
#include "kiln/passes/passes.h"
#include "rewrite.h"

namespace kiln::passes {

namespace {

std::vector<int64_t> inverse(const std::vector<int64_t>& p) {
  std::vector<int64_t> inv(p.size());
  for (size_t k = 0; k < p.size(); ++k) inv[static_cast<size_t>(p[k])] = static_cast<int64_t>(k);
  return inv;
}

bool is_identity(const std::vector<int64_t>& p) {
  for (size_t k = 0; k < p.size(); ++k)
    if (p[k] != static_cast<int64_t>(k)) return false;
  return true;
}

PassResult run_to_channels_last(const Graph& g) {
  detail::Rewriter rw(g, "to_channels_last");
  int converted = 0;
  // Each operand permuted once: a training step's output gradient feeds both gradient ops.
  std::map<NodeId, NodeId> permuted;
  for (NodeId id = 0; id < static_cast<NodeId>(g.size()); ++id) {
    const Node& n = g.node(id);
    if (n.op == OpId::input) continue;
    // A convolution and its two gradient ops (already channels last: kept as they are).
    const bool gradient = n.op == OpId::convolution_input_grad || n.op == OpId::convolution_weight_grad;
    if (n.op != OpId::convolution && !(gradient && !n.attrs.b(5))) {
      rw.copy(id);
      continue;
    }
    std::vector<NodeId> ins = rw.mapped_inputs(id);
    Graph& out = rw.out();
    const auto r = static_cast<int64_t>(n.meta.rank());
    std::vector<int64_t> to_last{0}, to_first{0, r - 1};
    for (int64_t d = 2; d < r; ++d) to_last.push_back(d);
    to_last.push_back(1);
    for (int64_t d = 1; d < r - 1; ++d) to_first.push_back(d);
    for (size_t j = 0; j < 2; ++j) {
      const Node& v = out.node(ins[j]);
      if (v.op == OpId::constant) {  // a weight permuted once here, not by a kernel on every call
        const TensorData t = detail::tensor_of(v.attrs.tensor(0));
        const SymShape sizes = channels_last(v.meta.sizes);
        std::vector<int64_t> static_sizes;
        for (const SymInt& s : sizes) static_sizes.push_back(s.hint());
        const TensorData p = eval::run_op(OpId::permute, {&t, 1}, Attrs{to_last}, v.meta.dtype, static_sizes);
        ins[j] = out.add(OpId::constant, {}, Attrs{std::shared_ptr<const ConstantData>(std::make_shared<ConstantData>(detail::constant_of(p)))});
      } else {
        auto [it, fresh] = permuted.try_emplace(ins[j], -1);
        if (fresh) it->second = out.add(OpId::permute, {ins[j]}, Attrs{to_last});
        ins[j] = it->second;
      }
    }
    const NodeId y = gradient ? out.add(n.op, ins, Attrs{n.attrs.ints(0), n.attrs.ints(1), n.attrs.ints(2), n.attrs.i(3), n.attrs.ints(4), true})
                              : out.add(OpId::convolution_channels_last, ins, n.attrs);
    rw.bind(id, out.add(OpId::permute, {y}, Attrs{to_first}));
    if (!n.name.empty()) out.set_name(y, n.name);
    ++converted;
  }
  return {rw.finish(), converted > 0,
          "to_channels_last: " + std::to_string(converted) + " convolution" + (converted == 1 ? "" : "s") + " channels last"};
}

struct Sinker {
  detail::Rewriter& rw;
  std::map<std::string, int> moved;

  const Node& node(NodeId i) { return rw.out_graph().node(i); }
  const TensorMeta& meta(NodeId i) { return node(i).meta; }
  // The permutation node `i` applies to its input, when it is a permute.
  const std::vector<int64_t>* permutation(NodeId i) {
    return node(i).op == OpId::permute ? &node(i).attrs.ints(0) : nullptr;
  }
  // op(ins, attrs) then permute(p), when both are accepted without a new shape fact and give
  // n's value; else -1.
  NodeId add_then_permute(const Node& n, OpId op, std::vector<NodeId> ins, Attrs attrs, const std::vector<int64_t>& p,
                          std::string_view rule) {
    const std::optional<TensorMeta> m = detail::probe(rw.out_graph(), op, ins, attrs);
    if (!m) return -1;
    const std::optional<TensorMeta> pm = detail::probe(rw.out_graph(), OpId::permute, std::span<const TensorMeta>(&*m, 1), Attrs{p});
    if (!pm || !detail::same_value_meta(*pm, n.meta)) return -1;
    NodeId y = rw.out().add(op, std::move(ins), std::move(attrs));
    if (!is_identity(p)) y = rw.out().add(OpId::permute, {y}, Attrs{p});
    ++moved[std::string(rule)];
    return y;
  }

  NodeId pointwise(const Node& n, const std::vector<NodeId>& ins) {
    const std::vector<int64_t>* p = nullptr;
    for (NodeId i : ins)
      if (const std::vector<int64_t>* q = permutation(i); q && meta(i).rank() == n.meta.rank()) {
        p = q;
        break;
      }
    if (!p) return -1;
    const std::vector<int64_t> perm = *p;  // node references move as the graph grows
    const std::vector<int64_t> inv = inverse(perm);
    const size_t r = perm.size();
    // A broadcast operand of rank <= r, given r dims then the inverse permute.
    auto permuted_broadcast = [&](NodeId u) {
      const TensorMeta m = meta(u);
      if (m.rank() < static_cast<int64_t>(r)) {
        SymShape s(r - static_cast<size_t>(m.rank()), SymInt(1));
        s.insert(s.end(), m.sizes.begin(), m.sizes.end());
        u = rw.out().add(OpId::reshape, {u}, Attrs{s});
      }
      return rw.out().add(OpId::permute, {u}, Attrs{inv});
    };
    std::vector<NodeId> moved_ins;
    for (NodeId i : ins) {
      const TensorMeta m = meta(i);
      if (const std::vector<int64_t>* q = permutation(i); q && *q == perm) {
        moved_ins.push_back(node(i).inputs[0]);
      } else if (m.rank() == 0) {
        moved_ins.push_back(i);
      } else if (m.sizes != n.meta.sizes && m.rank() <= static_cast<int64_t>(r)) {  // broadcast: permute it
        moved_ins.push_back(permuted_broadcast(i));
      } else if (node(i).op == OpId::expand && meta(node(i).inputs[0]).rank() <= static_cast<int64_t>(r)) {
        // A small value expanded to full size (a gradient of a sum or mean: a batch norm's
        // backward) is a broadcast operand too: expanded again, in the permuted order.
        SymShape sizes;
        for (int64_t d : inv) sizes.push_back(n.meta.sizes[static_cast<size_t>(d)]);
        moved_ins.push_back(rw.out().add(OpId::expand, {permuted_broadcast(node(i).inputs[0])}, Attrs{sizes}));
      } else {
        return -1;  // a full-size operand in the permuted order: nothing gained
      }
    }
    return add_then_permute(n, n.op, moved_ins, n.attrs, perm, "pointwise");
  }

  // A pointwise op over expanded values (and smaller or 0-d ones) is the expand of the op over
  // the small values: a batch norm's backward divides an expanded per-channel sum by the count,
  // a full-size value in the channels-first order that would stop the permutes after it.
  NodeId over_expanded(const Node& n, const std::vector<NodeId>& ins) {
    std::vector<NodeId> small;
    bool expanded = false;
    for (NodeId i : ins) {
      if (node(i).op == OpId::expand) {
        small.push_back(node(i).inputs[0]);
        expanded = true;
      } else if (meta(i).sizes != n.meta.sizes) {
        small.push_back(i);
      } else {
        return -1;
      }
    }
    if (!expanded) return -1;
    const std::optional<TensorMeta> m = detail::probe(rw.out_graph(), n.op, small, n.attrs);
    if (!m || m->sizes == n.meta.sizes) return -1;
    const std::optional<TensorMeta> em = detail::probe(rw.out_graph(), OpId::expand, std::span<const TensorMeta>(&*m, 1), Attrs{n.meta.sizes});
    if (!em || !detail::same_value_meta(*em, n.meta)) return -1;
    const NodeId y = rw.out().add(n.op, std::move(small), n.attrs);
    ++moved["pointwise over expand"];
    return rw.out().add(OpId::expand, {y}, Attrs{n.meta.sizes});
  }

  NodeId reduction(const Node& n, const std::vector<NodeId>& ins) {
    const std::vector<int64_t>* p = permutation(ins[0]);
    if (!p || n.op == OpId::argmax || n.op == OpId::argmin) return -1;
    const std::vector<int64_t> perm = *p;
    const std::vector<int64_t>& dims = n.attrs.ints(0);
    if (dims.empty()) return -1;  // over everything: the order does not matter, nothing to move
    const bool keep = n.attrs.b(1);
    std::vector<int64_t> moved_dims;
    std::vector<bool> reduced(perm.size(), false);
    for (int64_t d : dims) {
      moved_dims.push_back(perm[static_cast<size_t>(d)]);
      reduced[static_cast<size_t>(d)] = true;
    }
    std::sort(moved_dims.begin(), moved_dims.end());
    Attrs a = n.attrs;
    a.values[0] = moved_dims;
    std::vector<int64_t> q = perm;
    if (!keep) {  // the kept dims, in the order the reduction of the unpermuted value leaves them
      std::vector<int64_t> kept;
      for (size_t k = 0; k < perm.size(); ++k)
        if (!reduced[k]) kept.push_back(perm[k]);
      std::vector<int64_t> sorted = kept;
      std::sort(sorted.begin(), sorted.end());
      q.clear();
      for (int64_t d : kept) q.push_back(std::lower_bound(sorted.begin(), sorted.end(), d) - sorted.begin());
    }
    return add_then_permute(n, n.op, {node(ins[0]).inputs[0]}, a, q, "reduction");
  }

  // A slice, pad or index_select of a permuted value: of its input along the dim (dims) it acts
  // on there, then the permute; index_select's index stays as it is.
  NodeId along_dims(const Node& n, const std::vector<NodeId>& ins) {
    const std::vector<int64_t>* p = permutation(ins[0]);
    if (!p) return -1;
    // A permute of a view of a graph input or constant (a weight, read tap by tap by a
    // channels-last depthwise convolution) stays above its slices: one permuted value the
    // scheduler may store once (fuse.cpp, permuted_small_source), not a slice per tap each read
    // through its own permute. Only activations' permutes meet and cancel.
    if (n.op == OpId::slice) {
      NodeId v = node(ins[0]).inputs[0];
      for (;;) {
        const OpId op = node(v).op;
        if (op != OpId::reshape && op != OpId::permute && op != OpId::slice && op != OpId::expand && op != OpId::squeeze &&
            op != OpId::unsqueeze)
          break;
        v = node(v).inputs[0];
      }
      if (node(v).op == OpId::input || node(v).op == OpId::constant) return -1;
    }
    const std::vector<int64_t> perm = *p;
    Attrs a = n.attrs;
    if (n.op != OpId::pad) {  // slice, index_select: attribute 0 is the dim
      a.values[0] = perm[static_cast<size_t>(n.attrs.i(0))];
    } else {  // pad's pairs run from the last dim; each moves to the dim it pads in the input
      const std::vector<int64_t>& pairs = n.attrs.ints(0);
      const size_t r = perm.size();
      std::vector<int64_t> per_dim(2 * r, 0);
      for (size_t k = 0; 2 * k + 1 < pairs.size(); ++k) {
        const size_t d = static_cast<size_t>(perm[r - 1 - k]);
        per_dim[2 * d] = pairs[2 * k];
        per_dim[2 * d + 1] = pairs[2 * k + 1];
      }
      std::vector<int64_t> moved_pairs;
      for (size_t d = r; d-- > 0;) {
        moved_pairs.push_back(per_dim[2 * d]);
        moved_pairs.push_back(per_dim[2 * d + 1]);
      }
      a.values[0] = moved_pairs;
    }
    std::vector<NodeId> moved{node(ins[0]).inputs[0]};
    moved.insert(moved.end(), ins.begin() + 1, ins.end());
    return add_then_permute(n, n.op, std::move(moved), a, perm, op_name(n.op));
  }

  // A reshape that merges or splits dims which lie side by side, in order, in the permuted
  // value's input: the same reshape of that input, then the permute of the groups (a max
  // pooling's gradient flattens the windows [N, C, OH, OW] -> [N, C, OH * OW] of a channels-last
  // gradient and splits them back). Groups are found by equal sizes, or equal static products.
  NodeId reshape(const Node& n, const std::vector<NodeId>& ins) {
    const std::vector<int64_t>* p = permutation(ins[0]);
    if (!p) return -1;
    const std::vector<int64_t> perm = *p;
    const SymShape in = meta(ins[0]).sizes, out = n.meta.sizes;
    struct Group {
      size_t in_begin, in_end, out_begin, out_end;
    };
    std::vector<Group> groups;
    size_t i = 0, j = 0;
    while (i < in.size() && j < out.size()) {
      Group gr{i, i + 1, j, j + 1};
      if (!(in[i] == out[j])) {
        if (!in[i].is_static() || !out[j].is_static()) return -1;
        int64_t a = in[i].hint(), b = out[j].hint();
        while (a != b) {
          if (a < b) {
            if (gr.in_end == in.size() || !in[gr.in_end].is_static()) return -1;
            a *= in[gr.in_end++].hint();
          } else {
            if (gr.out_end == out.size() || !out[gr.out_end].is_static()) return -1;
            b *= out[gr.out_end++].hint();
          }
        }
      }
      for (size_t k = gr.in_begin + 1; k < gr.in_end; ++k)
        if (perm[k] != perm[k - 1] + 1) return -1;  // apart in the input: no reshape of it gives them
      groups.push_back(gr);
      i = gr.in_end;
      j = gr.out_end;
    }
    if (i != in.size() || j != out.size()) return -1;
    // The groups in the input's order, each with its output sizes; then the permute that puts
    // the output dims back in the reshape's order.
    std::vector<size_t> order(groups.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return perm[groups[a].in_begin] < perm[groups[b].in_begin]; });
    SymShape shape;
    std::vector<int64_t> q(out.size());
    for (size_t g : order)
      for (size_t k = groups[g].out_begin; k < groups[g].out_end; ++k) {
        q[k] = static_cast<int64_t>(shape.size());
        shape.push_back(out[k]);
      }
    return add_then_permute(n, OpId::reshape, {node(ins[0]).inputs[0]}, Attrs{shape}, q, "reshape");
  }

  // A permute of a permute is one permute (none when they cancel), composed as the two meet
  // rather than by simplify afterwards: what reads it then sees the net permutation, so a
  // permute sunk from a convolution cancels the one a layer norm over channels was written
  // with, instead of being stopped under it while the norm's own permute sinks past it.
  NodeId composed_permute(const Node& n, const std::vector<NodeId>& ins) {
    const std::vector<int64_t>* p = permutation(ins[0]);
    if (!p) return -1;
    const std::vector<int64_t>& q = n.attrs.ints(0);
    std::vector<int64_t> r(q.size());
    for (size_t k = 0; k < q.size(); ++k) r[k] = (*p)[static_cast<size_t>(q[k])];
    const NodeId x = node(ins[0]).inputs[0];
    if (is_identity(r)) {
      if (!detail::same_value_meta(meta(x), n.meta)) return -1;
      ++moved["permute of a permute"];
      return x;
    }
    const std::optional<TensorMeta> m = detail::probe(rw.out_graph(), OpId::permute, std::span<const NodeId>(&x, 1), Attrs{r});
    if (!m || !detail::same_value_meta(*m, n.meta)) return -1;
    ++moved["permute of a permute"];
    return rw.out().add(OpId::permute, {x}, Attrs{r});
  }

  // A permute that keeps the order of every dim but those of size 1 moves no element.
  NodeId unit_permute(const Node& n, const std::vector<NodeId>& ins) {
    const std::vector<int64_t>& p = n.attrs.ints(0);
    const SymShape& x = meta(ins[0]).sizes;
    int64_t last = -1;
    for (int64_t d : p) {
      if (x[static_cast<size_t>(d)] == 1) continue;
      if (d < last) return -1;
      last = d;
    }
    if (is_identity(p)) return -1;
    const std::optional<TensorMeta> m = detail::probe(rw.out_graph(), OpId::reshape, ins, Attrs{n.meta.sizes});
    if (!m || !detail::same_value_meta(*m, n.meta)) return -1;
    ++moved["unit permute"];
    return rw.out().add(OpId::reshape, {ins[0]}, Attrs{n.meta.sizes});
  }

  NodeId rewrite(const Node& n, const std::vector<NodeId>& ins) {
    switch (op_def(n.op).category) {
      case OpCategory::unary:
      case OpCategory::binary:
      case OpCategory::ternary: {
        const NodeId y = pointwise(n, ins);
        return y >= 0 ? y : over_expanded(n, ins);
      }
      case OpCategory::reduction: return reduction(n, ins);
      default: break;
    }
    if (n.op == OpId::slice || n.op == OpId::pad || n.op == OpId::index_select) return along_dims(n, ins);
    if (n.op == OpId::permute) {
      const NodeId y = composed_permute(n, ins);
      return y >= 0 ? y : unit_permute(n, ins);
    }
    if (n.op == OpId::reshape) return reshape(n, ins);
    return -1;
  }
};

PassResult run_sink_permutes(const Graph& g) {
  detail::Rewriter rw(g, "sink_permutes");
  Sinker s{rw, {}};
  detail::rewrite_each(rw, [&](const Node& n, const std::vector<NodeId>& ins) { return s.rewrite(n, ins); });
  int total = 0;
  std::string summary = detail::rules_summary("sink_permutes", s.moved, "permute", "moved", total);
  return {rw.finish(), total > 0, std::move(summary)};
}

}  // namespace

const Pass to_channels_last_pass{"to_channels_last", &run_to_channels_last};
const Pass sink_permutes_pass{"sink_permutes", &run_sink_permutes};

Graph to_channels_last(const Graph& g) { return run_pass(to_channels_last_pass, g).graph; }
Graph sink_permutes(const Graph& g) { return run_pass(sink_permutes_pass, g).graph; }

}  // namespace kiln::passes
