// The interpreter: the kernel table (one entry per OpId), run_op / eval_op, and run_graph
// with its symbol binding.
#include <array>
#include <unordered_map>
#include <string>
#include <vector>

#include "kernels.h"
#include "kiln/graph/error.h"
#include "kiln/graph/memory_budget.h"
#include "kiln/eval/interpreter.h"
#include "values.h"

namespace kiln::eval {

namespace {

using detail::Kernel;
using detail::sizes_str;

// Which kernel runs each op. Composites (ops with a decomposition) and `input` have none.
const std::array<Kernel, kNumOps>& kernel_table() {
  static const std::array<Kernel, kNumOps> table = [] {
    std::array<Kernel, kNumOps> t{};
    auto set = [&t](std::initializer_list<OpId> ops, Kernel k) {
      for (OpId op : ops) t[static_cast<size_t>(op)] = k;
    };
    using enum OpId;
    set({constant}, detail::constant_kernel);
    set({full}, detail::full_kernel);
    set({arange}, detail::arange_kernel);
    set({iota}, detail::iota_kernel);
    set({neg, abs, exp, log, sqrt, rsqrt, reciprocal, sin, cos, tanh, sigmoid, relu, gelu, silu, erf, floor, ceil,
         round, sign, logical_not, isnan, cast},
        detail::unary_kernel);
    set({add, sub, mul, div, pow, maximum, minimum, eq, ne, lt, le, gt, ge, logical_and, logical_or, philox},
        detail::binary_kernel);
    set({where}, detail::where_kernel);
    set({sum, mean, max, min, prod, argmax, argmin, var, logsumexp}, detail::reduce_kernel);
    set({reshape, squeeze, unsqueeze}, detail::reshape_kernel);
    set({permute}, detail::permute_kernel);
    set({expand}, detail::expand_kernel);
    set({slice}, detail::slice_kernel);
    set({unfold}, detail::unfold_kernel);
    set({cat}, detail::cat_kernel);
    set({pad}, detail::pad_kernel);
    set({index_select}, detail::index_select_kernel);
    set({gather}, detail::gather_kernel);
    set({scatter_add, scatter, scatter_reduce}, detail::scatter_kernel);
    set({matmul}, detail::matmul_kernel);
    set({custom}, detail::custom_kernel);
    return t;
  }();
  return table;
}

std::string input_label(const Graph& g, size_t k) {
  const std::string& name = g.node(g.inputs()[k]).name;
  return "input " + std::to_string(k) + (name.empty() ? "" : " (" + name + ")");
}

bool is_bare_symbol(const SymExpr& e) {
  return e.terms().size() == 1 && e.terms()[0].coeff == 1 && e.terms()[0].symbols.size() == 1;
}

// The attributes with every symbolic size evaluated (a copy only when there is one).
Attrs static_attrs(const Attrs& attrs, std::span<const int64_t> symbols) {
  bool symbolic = false;
  for (const AttrValue& v : attrs.values)
    if (const auto* s = std::get_if<std::vector<SymInt>>(&v))
      for (const SymInt& x : *s) symbolic = symbolic || x.is_symbolic();
  if (!symbolic) return attrs;
  Attrs out = attrs;
  for (AttrValue& v : out.values)
    if (auto* s = std::get_if<std::vector<SymInt>>(&v))
      for (SymInt& x : *s) x = SymInt(x.evaluate(symbols));
  return out;
}

// A composite: its decomposition on a small graph over the inputs' static metas, interpreted.
TensorData run_decomposed(OpId op, std::span<const TensorData> inputs, const Attrs& attrs, DType out_dtype,
                          std::span<const int64_t> out_sizes) {
  Graph g;
  std::vector<NodeId> ids;
  for (const TensorData& t : inputs) {
    TensorMeta m;
    m.dtype = t.dtype;
    m.sizes = static_shape(t.sizes);
    ids.push_back(g.add_input(std::move(m)));
  }
  const NodeId result = op_def(op).decompose(g, ids, attrs);
  g.set_outputs({result});
  TensorData out = run_graph(g, inputs)[0];
  KILN_CHECK(std::equal(out.sizes.begin(), out.sizes.end(), out_sizes.begin(), out_sizes.end()), "reference: the ",
             "decomposition of ", op_name(op), " gives sizes ", sizes_str(out.sizes), ", but the output should be ",
             sizes_str(out_sizes));
  bool fresh = out.dtype == out_dtype && out.is_contiguous() && out.offset == 0;
  for (const TensorData& t : inputs) fresh = fresh && out.storage != t.storage;
  return fresh ? out : convert(out, out_dtype);
}

}  // namespace

void check_kernel_table() {
  std::string missing;
  for (int i = 0; i < kNumOps; ++i) {
    const OpId op = static_cast<OpId>(i);
    if (op == OpId::input || op_def(op).decompose != nullptr || kernel_table()[static_cast<size_t>(i)] != nullptr)
      continue;
    missing += (missing.empty() ? "" : ", ") + std::string(op_name(op));
  }
  KILN_INTERNAL_CHECK(missing.empty(), "reference: these ops have neither a reference kernel nor a decomposition: ",
             missing);
}

TensorData run_op(OpId op, std::span<const TensorData> inputs, const Attrs& attrs, DType out_dtype,
                  std::span<const int64_t> out_sizes) {
  static const bool table_checked = (check_kernel_table(), true);
  (void)table_checked;
  KILN_CHECK(op != OpId::input, "reference: `input` nodes are bound by run_graph; run_op cannot run them");
  const OpDef& def = op_def(op);
  const int64_t n = static_cast<int64_t>(inputs.size());
  if (n < def.min_inputs || (def.max_inputs >= 0 && n > def.max_inputs)) {
    if (def.max_inputs == def.min_inputs) fail(op_name(op), " takes ", def.min_inputs, " inputs, got ", n);
    if (def.max_inputs < 0) fail(op_name(op), " takes at least ", def.min_inputs, " inputs, got ", n);
    fail(op_name(op), " takes ", def.min_inputs, " to ", def.max_inputs, " inputs, got ", n);
  }
  for (int64_t k = 0; k < n; ++k)
    detail::check_host(inputs[static_cast<size_t>(k)], "input " + std::to_string(k) + " of " + std::string(op_name(op)));
  for (int64_t s : out_sizes) KILN_CHECK(s >= 0, op_name(op), ": output size ", s, " is negative");

  if (def.decompose != nullptr) return run_decomposed(op, inputs, attrs, out_dtype, out_sizes);
  const Kernel kernel = kernel_table()[static_cast<size_t>(op)];
  TensorData out = TensorData::empty_host(out_dtype, std::vector<int64_t>(out_sizes.begin(), out_sizes.end()));
  kernel(detail::KernelArgs{op, inputs, attrs, out});
  return out;
}

TensorData eval_op(OpId op, std::span<const TensorData> inputs, const Attrs& attrs) {
  Graph g;
  std::vector<NodeId> ids;
  for (size_t k = 0; k < inputs.size(); ++k) {
    detail::check_host(inputs[k], "input " + std::to_string(k) + " of " + std::string(op_name(op)));
    TensorMeta m;
    m.dtype = inputs[k].dtype;
    m.sizes = static_shape(inputs[k].sizes);
    ids.push_back(g.add_input(std::move(m)));
  }
  const NodeId id = g.add(op, ids, attrs);
  const Node& node = g.node(id);
  std::vector<int64_t> sizes;
  for (const SymInt& s : node.meta.sizes) {
    KILN_CHECK(s.is_static(), "eval_op: ", op_name(op), " gives the symbolic size ", s.str(),
               "; eval_op needs static attributes");
    sizes.push_back(s.hint());
  }
  return run_op(op, inputs, node.attrs, node.meta.dtype, sizes);
}

std::vector<int64_t> bind_symbols(const Graph& g, std::span<const TensorData> inputs) {
  const std::vector<NodeId>& ids = g.inputs();
  KILN_CHECK(inputs.size() == ids.size(), "run_graph: the graph takes ", ids.size(), " inputs, got ",
             inputs.size());
  const std::vector<SymbolInfo>& infos = g.shapes().symbols();
  std::vector<int64_t> values(infos.size(), 0);
  std::vector<std::string> bound_by(infos.size());  // empty: not bound yet

  // Pass 1: dtypes, ranks, static sizes, and the bare symbols.
  for (size_t k = 0; k < ids.size(); ++k) {
    const TensorMeta& m = g.node(ids[k]).meta;
    const TensorData& t = inputs[k];
    KILN_CHECK(t.dtype == m.dtype, input_label(g, k), " has dtype ", dtype_name(t.dtype), "; the graph expects ",
               dtype_name(m.dtype));
    KILN_CHECK(t.rank() == m.rank(), input_label(g, k), " has rank ", t.rank(), " (sizes ", sizes_str(t.sizes),
               "); the graph expects rank ", m.rank(), " (", m.str(), ")");
    for (size_t d = 0; d < t.sizes.size(); ++d) {
      const SymInt& s = m.sizes[d];
      const int64_t actual = t.sizes[d];
      if (s.is_static()) {
        KILN_CHECK(s.hint() == actual, input_label(g, k), " size mismatch at dim ", d, ": expected ", s.hint(),
                   ", got ", actual);
        continue;
      }
      const SymExpr e = s.expr();
      if (!is_bare_symbol(e)) continue;
      const SymbolId id = e.terms()[0].symbols[0];
      KILN_CHECK(id < infos.size(), input_label(g, k), " dim ", d, " is the symbol s", id,
                 ", which the graph's ShapeEnv does not declare");
      const std::string here = input_label(g, k) + " dim " + std::to_string(d);
      if (bound_by[id].empty()) {
        values[id] = actual;
        bound_by[id] = here;
      } else {
        KILN_CHECK(values[id] == actual, here, " is ", actual, ", but s", id, " is ", values[id], " from ",
                   bound_by[id]);
      }
    }
  }
  for (size_t id = 0; id < infos.size(); ++id)
    KILN_CHECK(!bound_by[id].empty(), "run_graph: symbol s", id,
               (infos[id].source.empty() ? std::string() : " (" + infos[id].source + ")"),
               " is not the size of any input dim, so its value is unknown");

  // Pass 2: sizes that are expressions of symbols.
  for (size_t k = 0; k < ids.size(); ++k) {
    const TensorMeta& m = g.node(ids[k]).meta;
    for (size_t d = 0; d < m.sizes.size(); ++d) {
      const SymInt& s = m.sizes[d];
      if (s.is_static() || is_bare_symbol(s.expr())) continue;
      const int64_t expected = s.evaluate(values);
      KILN_CHECK(expected == inputs[k].sizes[d], input_label(g, k), " size mismatch at dim ", d, ": expected ",
                 s.str(), " = ", expected, ", got ", inputs[k].sizes[d]);
    }
  }

  // Pass 3: the facts the graph's shapes rely on.
  for (const ShapeFact& f : g.shapes().facts()) {
    KILN_CHECK(f.holds(values), "run_graph: the inputs break the graph's assumption ", f.str(),
               (f.reason.empty() ? "" : " (made by " + f.reason + ")"), ": ", f.lhs.evaluate(values), " vs ",
               f.rhs.evaluate(values));
  }
  return values;
}

std::vector<TensorData> run_graph(const Graph& g, std::span<const TensorData> inputs) {
  const std::vector<int64_t> symbols = bind_symbols(g, inputs);
  const size_t n = g.size();

  // Which nodes the outputs need, and how many reads of each value remain (to free early).
  std::vector<bool> live(n, false);
  std::vector<int> reads(n, 0);
  for (NodeId o : g.outputs()) {
    KILN_CHECK(o >= 0 && static_cast<size_t>(o) < n, "run_graph: output %", o, " is not a node of the graph");
    live[static_cast<size_t>(o)] = true;
    ++reads[static_cast<size_t>(o)];
  }
  for (size_t id = n; id-- > 0;) {
    if (!live[id]) continue;
    for (NodeId i : g.node(static_cast<NodeId>(id)).inputs) {
      live[static_cast<size_t>(i)] = true;
      ++reads[static_cast<size_t>(i)];
    }
  }
  std::vector<size_t> argument(n, 0);
  for (size_t k = 0; k < g.inputs().size(); ++k) argument[static_cast<size_t>(g.inputs()[k])] = k;

  // The memory the run holds (each storage once; the inputs are the caller's): a node whose
  // output would take it past the memory budget is refused by name before it allocates.
  const int64_t budget = memory_budget_bytes();
  std::unordered_map<const Storage*, int> holders;
  for (const TensorData& t : inputs) holders[t.storage.get()] = 1 << 30;  // never counted or released
  int64_t held = 0;
  auto hold = [&](const TensorData& t) {
    if (t.storage && holders[t.storage.get()]++ == 0) held += static_cast<int64_t>(t.storage->nbytes());
  };
  auto release = [&](TensorData& t) {
    if (t.storage && --holders[t.storage.get()] == 0) {
      held -= static_cast<int64_t>(t.storage->nbytes());
      holders.erase(t.storage.get());
    }
    t = TensorData{};
  };

  std::vector<TensorData> values(n);
  std::vector<TensorData> args;
  std::vector<int64_t> sizes;
  for (size_t id = 0; id < n; ++id) {
    if (!live[id]) continue;
    const Node& node = g.node(static_cast<NodeId>(id));
    if (node.op == OpId::input) {
      values[id] = inputs[argument[id]];
      continue;
    }
    args.clear();
    for (NodeId i : node.inputs) args.push_back(values[static_cast<size_t>(i)]);
    sizes.clear();
    for (const SymInt& s : node.meta.sizes) sizes.push_back(s.evaluate(symbols));
    // Views (layout ops) may share their input's memory; what they allocate, empty_host checks.
    if (op_def(node.op).category != OpCategory::layout) {
      int64_t bytes = dtype_size(node.meta.dtype);
      bool wrapped = false;
      for (int64_t d : sizes) wrapped = wrapped || d < 0 || __builtin_mul_overflow(bytes, d, &bytes);
      if (!wrapped && bytes > budget - held)
        fail("run_graph: node %", id, " (", op_name(node.op), ") would allocate ", bytes_str(bytes), " for its ",
             dtype_name(node.meta.dtype), shape_str(static_shape(sizes)), " output",
             held > 0 ? " with " + bytes_str(held) + " held" : std::string(), ", more than ", memory_budget_str());
    }
    try {
      values[id] = run_op(node.op, args, static_attrs(node.attrs, symbols), node.meta.dtype, sizes);
    } catch (const Error& e) {
      fail("run_graph: node %", id, " (", op_name(node.op), "): ", e.what());
    }
    hold(values[id]);
    for (NodeId i : node.inputs)
      if (--reads[static_cast<size_t>(i)] == 0) release(values[static_cast<size_t>(i)]);
  }
  std::vector<TensorData> outputs;
  for (NodeId o : g.outputs()) outputs.push_back(values[static_cast<size_t>(o)]);
  return outputs;
}

TensorData contiguous(const TensorData& t) { return convert(t, t.dtype); }

TensorData convert(const TensorData& t, DType to) {
  detail::check_host(t, "the tensor to copy");
  TensorData out = TensorData::empty_host(to, t.sizes);
  detail::copy_elements(t, out);
  return out;
}

}  // namespace kiln::eval
