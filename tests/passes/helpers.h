// Shared by the passes tests: building graphs, counting ops, and "run both, compare": a graph
// before and after a pass, run with the reference interpreter on the same random inputs.
#pragma once

#include <kiln/graph/error.h>
#include <kiln/graph/graph.h>
#include <kiln/passes/passes.h>
#include <kiln/eval/interpreter.h>

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace passes_test {

using namespace kiln;

inline TensorMeta meta(DType t, SymShape sizes) { return TensorMeta{t, Device::cpu(), std::move(sizes), {}}; }

// A graph with short ways to add inputs, ops and scalars.
struct G {
  Graph g;

  NodeId in(DType t, SymShape s, std::string name = {}) { return g.add_input(meta(t, std::move(s)), std::move(name)); }
  NodeId op(OpId op, std::vector<NodeId> inputs, Attrs attrs = {}) { return g.add(op, std::move(inputs), std::move(attrs)); }
  NodeId full(double v, DType t = DType::f32, SymShape shape = {}) { return op(OpId::full, {}, {std::move(shape), v, t}); }
  NodeId reduce(OpId o, NodeId x, std::vector<int64_t> dims, bool keep = true) {
    return op(o, {x}, {std::move(dims), keep});
  }
  NodeId constant(DType t, std::vector<int64_t> sizes, const std::vector<double>& values);
  SymInt sym(int64_t example, bool user_dynamic = false) {
    const auto n = g.shapes().symbols().size();
    return g.shapes().create_symbol(example, 2, 64, "input dim " + std::to_string(n), user_dynamic);
  }
  Graph& out(std::vector<NodeId> o) {
    g.set_outputs(std::move(o));
    return g;
  }
};

// Number of nodes of op `op` (all non-input nodes when op is input).
inline int count(const Graph& g, OpId op) {
  int n = 0;
  for (const Node& x : g.nodes()) n += op == OpId::input ? x.op != OpId::input : x.op == op;
  return n;
}
inline int ops(const Graph& g) { return static_cast<int>(g.op_count()); }

// A host tensor of dtype t holding `values` (plain C++ conversions).
inline TensorData tensor(DType t, std::vector<int64_t> sizes, const std::vector<double>& values) {
  TensorData d = TensorData::empty_host(t, std::move(sizes));
  for (size_t k = 0; k < values.size() && static_cast<int64_t>(k) < d.numel(); ++k) {
    const double v = values[k];
    switch (t) {
      case DType::bool_: d.data_as<uint8_t>()[k] = v != 0; break;
      case DType::i32: d.data_as<int32_t>()[k] = static_cast<int32_t>(v); break;
      case DType::i64: d.data_as<int64_t>()[k] = static_cast<int64_t>(v); break;
      case DType::f16: d.data_as<uint16_t>()[k] = float_to_half_bits(static_cast<float>(v)); break;
      case DType::bf16: d.data_as<uint16_t>()[k] = float_to_bf16_bits(static_cast<float>(v)); break;
      case DType::f32: d.data_as<float>()[k] = static_cast<float>(v); break;
      case DType::f64: d.data_as<double>()[k] = v; break;
    }
  }
  return d;
}

inline NodeId G::constant(DType t, std::vector<int64_t> sizes, const std::vector<double>& values) {
  const TensorData d = tensor(t, sizes, values);
  auto c = std::make_shared<ConstantData>();
  c->dtype = t;
  c->sizes = sizes;
  const auto* b = static_cast<const std::byte*>(d.data());
  c->bytes.assign(b, b + d.numel() * dtype_size(t));
  return op(OpId::constant, {}, {std::shared_ptr<const ConstantData>(std::move(c))});
}

// Symbol values to run `g` with: the examples (variant 0), or each example plus `variant` where
// the symbols' ranges and the graph's facts allow it (else the examples).
inline std::vector<int64_t> symbol_values(const Graph& g, int variant) {
  std::vector<int64_t> v = g.shapes().examples();
  if (variant == 0) return v;
  std::vector<int64_t> w = v;
  for (size_t k = 0; k < w.size(); ++k) {
    const SymbolInfo& s = g.shapes().symbols()[k];
    if (w[k] + variant <= s.max) w[k] += variant;
  }
  for (const ShapeFact& f : g.shapes().facts())
    if (!f.holds(w)) return v;
  return w;
}

// Random inputs for `g` with the given symbol values: floats normal(0, 1), ints in [-4, 4],
// bools fair.
inline std::vector<TensorData> random_inputs(const Graph& g, const std::vector<int64_t>& symbols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> small(-4, 4);
  std::vector<TensorData> out;
  for (NodeId id : g.inputs()) {
    const TensorMeta& m = g.node(id).meta;
    std::vector<int64_t> sizes;
    for (const SymInt& s : m.sizes) sizes.push_back(s.evaluate(symbols));
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    std::vector<double> v(static_cast<size_t>(n));
    for (double& x : v) {
      if (is_floating(m.dtype)) x = normal(rng);
      else if (m.dtype == DType::bool_) x = small(rng) > 0;
      else x = small(rng);
    }
    out.push_back(tensor(m.dtype, sizes, v));
  }
  return out;
}

// Relative tolerance for comparing a dtype's results.
inline double tolerance(DType t) {
  switch (t) {
    case DType::f16:
    case DType::bf16: return 1e-2;
    case DType::f32: return 1e-6;
    case DType::f64: return 1e-12;
    default: return 0;
  }
}

// Whether two outputs agree: same dtype and sizes; floats within the dtype's relative tolerance
// (NaN matches NaN, infinities match exactly), integers and bools exactly. Says where they do not.
inline std::string compare(const TensorData& a, const TensorData& b) {
  if (a.dtype != b.dtype) return "dtypes differ";
  if (a.sizes != b.sizes) return "sizes differ";
  if (is_floating(a.dtype)) {
    const TensorData x = eval::convert(a, DType::f64), y = eval::convert(b, DType::f64);
    const double tol = tolerance(a.dtype);
    for (int64_t k = 0; k < x.numel(); ++k) {
      const double p = x.data_as<double>()[k], q = y.data_as<double>()[k];
      const bool ok = (std::isnan(p) && std::isnan(q)) || p == q || std::fabs(p - q) <= tol * std::max(std::fabs(p), std::fabs(q));
      if (!ok) return "element " + std::to_string(k) + ": " + std::to_string(p) + " vs " + std::to_string(q);
    }
  } else {
    const TensorData x = eval::convert(a, DType::i64), y = eval::convert(b, DType::i64);
    for (int64_t k = 0; k < x.numel(); ++k)
      if (x.data_as<int64_t>()[k] != y.data_as<int64_t>()[k])
        return "element " + std::to_string(k) + ": " + std::to_string(x.data_as<int64_t>()[k]) + " vs " +
               std::to_string(y.data_as<int64_t>()[k]);
  }
  return {};
}

// Runs `before` and `after` on the same random inputs (at the example sizes and, where the
// graph allows, at other sizes) and checks every output agrees. Returns false (after
// reporting) when they differ.
inline bool same_results(const Graph& before, const Graph& after, uint64_t seed = 7) {
  BOOST_REQUIRE_EQUAL(before.outputs().size(), after.outputs().size());
  bool all = true;
  for (int variant = 0; variant < 2; ++variant) {
    const std::vector<int64_t> symbols = symbol_values(before, variant);
    const std::vector<TensorData> inputs = random_inputs(before, symbols, seed + static_cast<uint64_t>(variant));
    const std::vector<TensorData> a = eval::run_graph(before, inputs);
    const std::vector<TensorData> b = eval::run_graph(after, inputs);
    for (size_t k = 0; k < a.size(); ++k) {
      const std::string diff = compare(a[k], b[k]);
      if (!diff.empty()) {
        BOOST_ERROR("output " << k << " differs (variant " << variant << "): " << diff << "\nbefore:\n"
                               << before.str() << "after:\n" << after.str());
        all = false;
      }
    }
  }
  return all;
}

// Applies a pass, checks the results agree with the original, returns the new graph.
template <class Pass>
Graph checked(Pass&& pass, const Graph& g) {
  Graph out = pass(g);
  same_results(g, out);
  return out;
}

}  // namespace passes_test
