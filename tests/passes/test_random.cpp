// 200 random small graphs (chains of pointwise, reduction, layout, composite and hand-written
// normalisation ops over 1-3 inputs, with sizes of 1 and symbolic dims) through every pass, the
// default pipeline and decompose, each compared with the reference before and after.
#include <functional>

#include "helpers.h"

using namespace passes_test;
namespace passes = kiln::passes;

namespace {

class RandomGraph {
 public:
  explicit RandomGraph(uint64_t seed) : rng_(seed) {}

  Graph build() {
    inputs();
    const int steps = 4 + pick(10);
    for (int k = 0; k < steps; ++k) {
      try {
        step();
      } catch (const kiln::Error&) {
        // Operands that do not fit the op: nothing was added.
      }
    }
    std::vector<NodeId> outs{pool_.back()};
    for (int k = pick(3); k > 0; --k) outs.push_back(pool_[static_cast<size_t>(pick(static_cast<int>(pool_.size())))]);
    t_.g.set_outputs(outs);
    return t_.g;
  }

 private:
  std::mt19937_64 rng_;
  G t_;
  std::vector<NodeId> pool_;

  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  bool coin(int percent = 50) { return pick(100) < percent; }
  // Mostly the newest value, so the graph is a chain more than a bush.
  NodeId any() { return coin(50) ? pool_.back() : pool_[static_cast<size_t>(pick(static_cast<int>(pool_.size())))]; }
  NodeId any_float() {
    for (int tries = 0; tries < 8; ++tries) {
      const NodeId v = any();
      if (is_floating(meta(v).dtype)) return v;
    }
    return push(t_.op(OpId::cast, {any()}, {DType::f32}));
  }
  const TensorMeta& meta(NodeId v) const { return t_.g.node(v).meta; }
  int64_t rank(NodeId v) const { return meta(v).rank(); }
  NodeId push(NodeId v) {
    pool_.push_back(v);
    return v;
  }
  std::vector<int64_t> some_dims(int64_t r, bool allow_empty = true) {
    std::vector<int64_t> d;
    for (int64_t k = 0; k < r; ++k)
      if (coin()) d.push_back(k);
    if (d.empty() && !allow_empty && r > 0) d.push_back(pick(static_cast<int>(r)));
    return d;
  }

  void inputs() {
    // A base shape the inputs share (so binary ops mostly broadcast): sizes 1, small statics
    // and symbols.
    SymShape base;
    const int r = pick(4);
    for (int k = 0; k < r; ++k) {
      const int kind = pick(4);
      base.push_back(kind == 0 ? SymInt(1) : kind == 1 ? SymInt(2 + pick(3)) : t_.sym(2 + pick(3), coin(10)));
    }
    const int n = 1 + pick(3);
    for (int i = 0; i < n; ++i) {
      SymShape s = base;
      if (i > 0 && !s.empty() && coin(30)) s.erase(s.begin());           // fewer leading dims
      for (SymInt& d : s) {
        if (i > 0 && coin(15)) d = 1;                                      // broadcasting dims
        if (i > 0 && d.is_symbolic() && coin(50)) d = t_.sym(d.hint());    // another symbol, same size: facts
      }
      const int kind = pick(12);
      const DType dt = kind < 7    ? DType::f32
                       : kind == 7 ? DType::f64
                       : kind == 8 ? DType::i32
                       : kind == 9 ? DType::bf16
                       : kind == 10 ? DType::f16
                                    : DType::bool_;
      push(t_.in(dt, s, "in" + std::to_string(i)));
    }
    if (n > 1 && coin()) {
      try {
        push(t_.op(OpId::mul, {pool_[0], pool_.back()}));  // equates the inputs' symbols
      } catch (const kiln::Error&) {
      }
    }
  }

  NodeId scalar_full() {
    static const double values[] = {0.0, 1.0, -0.0, 2.5, -1.0, 1.0, 0.0};
    static const DType dtypes[] = {DType::f32, DType::f32, DType::f32, DType::f64, DType::i32, DType::i64};
    const double v = values[pick(7)];
    const DType d = dtypes[pick(6)];
    return t_.full(v, d, coin(80) ? SymShape{} : SymShape{1});
  }

  void step() {
    switch (pick(14)) {
      case 0: {  // unary
        static const OpId ops[] = {OpId::neg, OpId::abs, OpId::exp, OpId::tanh, OpId::sigmoid, OpId::relu, OpId::sin,
                                   OpId::floor, OpId::sign, OpId::silu, OpId::erf, OpId::cos};
        NodeId x = any();
        if (meta(x).dtype == DType::bool_) x = push(t_.op(OpId::cast, {x}, {DType::f32}));
        push(t_.op(ops[pick(12)], {x}));
        break;
      }
      case 1: {  // binary between values
        static const OpId ops[] = {OpId::add, OpId::sub, OpId::mul, OpId::maximum, OpId::minimum, OpId::lt, OpId::eq};
        // The second operand from anywhere: inputs meet (and their symbols get equated).
        push(t_.op(ops[pick(7)], {any(), pool_[static_cast<size_t>(pick(static_cast<int>(pool_.size())))]}));
        break;
      }
      case 2:
      case 3: {  // with a scalar: x*1, x+0, x/2.5, ...
        static const OpId ops[] = {OpId::add, OpId::sub, OpId::mul, OpId::div};
        const OpId op = ops[pick(4)];
        NodeId s = scalar_full();
        if (op == OpId::div && t_.g.node(s).attrs.f(1) == 0) s = t_.full(1);
        const NodeId x = any();
        push(coin() ? t_.op(op, {x, s}) : t_.op(op == OpId::div ? OpId::mul : op, {s, x}));
        break;
      }
      case 4: {  // reductions
        static const OpId ops[] = {OpId::sum, OpId::mean, OpId::max, OpId::min, OpId::var, OpId::argmax, OpId::logsumexp};
        const OpId op = ops[pick(7)];
        const NodeId x = any();
        std::vector<int64_t> dims = some_dims(rank(x));
        if (op == OpId::argmax && dims.size() > 1) dims.resize(1);
        if (op == OpId::var) {
          push(t_.op(op, {x}, {dims, coin(), int64_t{pick(2)}}));
        } else {
          push(t_.op(op, {x}, {dims, coin()}));
        }
        break;
      }
      case 5: {  // layout
        const NodeId x = any();
        const TensorMeta m = meta(x);
        const int64_t r = m.rank();
        switch (pick(7)) {
          case 0: push(t_.op(OpId::reshape, {x}, {SymShape{m.numel()}})); break;
          case 1: push(t_.op(OpId::unsqueeze, {x}, {int64_t{pick(static_cast<int>(r) + 1)}})); break;
          case 2: {
            std::vector<int64_t> ones;
            for (int64_t d = 0; d < r; ++d)
              if (m.sizes[static_cast<size_t>(d)] == 1) ones.push_back(d);
            push(t_.op(OpId::squeeze, {x}, {ones}));
            break;
          }
          case 3: {
            std::vector<int64_t> p(static_cast<size_t>(r));
            std::iota(p.begin(), p.end(), 0);
            std::shuffle(p.begin(), p.end(), rng_);
            push(t_.op(OpId::permute, {x}, {p}));
            break;
          }
          case 4: {
            SymShape to = m.sizes;
            for (SymInt& s : to)
              if (s == 1 && coin()) s = 3;
            if (coin(30)) to.insert(to.begin(), SymInt(2));
            push(t_.op(OpId::expand, {x}, {to}));
            break;
          }
          case 5:
            if (r >= 2) push(t_.op(OpId::transpose, {x}, {int64_t{0}, int64_t{r - 1}}));
            break;
          default:
            if (r >= 1) push(t_.op(OpId::slice, {x}, {int64_t{r - 1}, int64_t{0}, int64_t{2}, int64_t{1}}));
            break;
        }
        break;
      }
      case 6: {  // composites
        const NodeId x = any_float();
        const int64_t r = rank(x);
        if (r == 0) break;
        switch (pick(4)) {
          case 0: push(t_.op(OpId::softmax, {x}, {int64_t{pick(static_cast<int>(r))}})); break;
          case 1: push(t_.op(OpId::log_softmax, {x}, {int64_t{r - 1}})); break;
          case 2: push(t_.op(OpId::layer_norm, {x}, {int64_t{1}, 1e-5})); break;
          default: {
            const NodeId w = t_.full(0.75, meta(x).dtype, {meta(x).sizes.back()});
            push(t_.op(OpId::rms_norm, {x, w}, {int64_t{1}, 1e-6}));
          }
        }
        break;
      }
      case 7: {  // hand-written normalisations
        const NodeId x = any_float();
        const int64_t r = rank(x);
        if (r == 0) break;
        const DType d = meta(x).dtype;
        const int64_t last = r - 1;
        switch (pick(3)) {
          case 0: {
            const NodeId m = t_.reduce(OpId::max, x, {last});
            const NodeId e = t_.op(OpId::exp, {t_.op(OpId::sub, {x, m})});
            push(t_.op(OpId::div, {e, t_.reduce(OpId::sum, e, {last})}));
            break;
          }
          case 1: {
            const NodeId ms = t_.reduce(OpId::mean, t_.op(OpId::mul, {x, x}), {last});
            const NodeId y = t_.op(OpId::mul, {x, t_.op(OpId::rsqrt, {t_.op(OpId::add, {ms, t_.full(1e-6, d)})})});
            push(coin() ? y : t_.op(OpId::mul, {y, t_.full(1.5, d, {meta(x).sizes.back()})}));
            break;
          }
          default: {
            const NodeId mean = t_.reduce(OpId::mean, x, {last});
            const NodeId var = t_.op(OpId::var, {x}, {std::vector<int64_t>{last}, true, int64_t{0}});
            const NodeId inv = t_.op(OpId::rsqrt, {t_.op(OpId::add, {var, t_.full(1e-5, d)})});
            push(t_.op(OpId::mul, {t_.op(OpId::sub, {x, mean}), inv}));
          }
        }
        break;
      }
      case 8: {  // sources, and ops over them (to fold)
        const NodeId x = any();
        const TensorMeta m = meta(x);
        NodeId src;
        switch (pick(4)) {
          case 0: src = t_.full(0.5 * pick(5), m.dtype == DType::bool_ ? DType::f32 : m.dtype, m.sizes); break;
          case 1: {
            if (m.rank() == 0 || !m.sizes.back().is_static()) return;
            const int64_t n = m.sizes.back().hint();
            src = t_.op(OpId::arange, {}, {0.0, static_cast<double>(n), 1.0, DType::f32});
            break;
          }
          case 2: src = t_.op(OpId::randn, {}, {m.sizes, int64_t{1 + pick(2)}, DType::f32}); break;
          default: {
            src = t_.op(OpId::exp, {t_.op(OpId::mul, {t_.full(2), t_.constant(DType::f32, {3}, {0.5, -1, 2})})});
            src = push(t_.reduce(OpId::sum, src, {0}, false));
          }
        }
        push(t_.op(coin() ? OpId::add : OpId::mul, {x, src}));
        break;
      }
      case 9: {  // a duplicate of an existing node
        const NodeId v = any();
        const Node n = t_.g.node(v);
        if (n.op != OpId::input) push(t_.op(n.op, n.inputs, n.attrs));
        break;
      }
      case 10: {  // chains the simplifier composes
        const NodeId x = any();
        const TensorMeta m = meta(x);
        switch (pick(4)) {
          case 0:
            if (m.dtype != DType::bool_) push(t_.op(OpId::neg, {t_.op(OpId::neg, {x})}));
            break;
          case 1: {
            static const DType ds[] = {DType::f32, DType::f64, DType::i64, DType::i32, DType::f16, DType::bf16};
            push(t_.op(OpId::cast, {t_.op(OpId::cast, {x}, {ds[pick(6)]})}, {ds[pick(6)]}));
            break;
          }
          case 2: {
            std::vector<int64_t> p(static_cast<size_t>(m.rank()));
            std::iota(p.begin(), p.end(), 0);
            std::shuffle(p.begin(), p.end(), rng_);
            const NodeId a = t_.op(OpId::permute, {x}, {p});
            std::shuffle(p.begin(), p.end(), rng_);
            push(t_.op(OpId::permute, {a}, {p}));
            break;
          }
          default: push(t_.op(OpId::reshape, {t_.op(OpId::reshape, {x}, {SymShape{m.numel()}})}, {m.sizes})); break;
        }
        break;
      }
      case 11: {  // where
        const NodeId x = any();
        push(t_.op(OpId::where, {t_.op(OpId::gt, {x, t_.full(0)}), x, coin() ? x : scalar_full()}));
        break;
      }
      case 12: {  // matmul against a small constant
        const NodeId x = any_float();
        const TensorMeta m = meta(x);
        if (m.rank() == 0 || !m.sizes.back().is_static()) return;
        const int64_t k = m.sizes.back().hint();
        std::vector<double> v(static_cast<size_t>(k * 2));
        for (size_t j = 0; j < v.size(); ++j) v[j] = 0.25 * static_cast<double>(j % 5) - 0.5;
        push(t_.op(OpId::matmul, {x, t_.constant(m.dtype, {k, 2}, v)}));
        break;
      }
      default: {  // x with a neutral element that broadcasts or promotes (must stay) or not
        const NodeId x = any();
        SymShape s = meta(x).sizes;
        s.insert(s.begin(), SymInt(2));
        push(t_.op(OpId::mul, {x, coin() ? t_.full(1, DType::f32, s) : t_.full(1, DType::f64)}));
      }
    }
  }
};

int composites(const Graph& g) {
  int n = 0;
  for (const Node& x : g.nodes()) n += op_def(x.op).decompose != nullptr;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_CASE(random_graphs_through_every_pass) {
  int built = 0, skipped = 0, shrunk = 0, recognised = 0, with_facts = 0, symbolic = 0;
  for (uint64_t seed = 1; built < 200; ++seed) {
    BOOST_REQUIRE(seed < 1000);
    Graph g = RandomGraph(seed).build();
    try {
      eval::run_graph(g, random_inputs(g, symbol_values(g, 0), 1));
    } catch (const kiln::Error&) {
      ++skipped;  // the graph fails when run (before any pass): nothing to compare
      continue;
    }
    ++built;
    with_facts += !g.shapes().facts().empty();
    symbolic += !g.shapes().empty();
    BOOST_TEST_CONTEXT("seed " << seed << "\n" << g.str()) {
      for (const passes::Pass& p : {passes::decompose_pass, passes::dce_pass, passes::cse_pass,
                                    passes::fold_constants_pass, passes::simplify_pass, passes::recognize_pass}) {
        BOOST_TEST_CONTEXT("pass " << p.name) { same_results(g, passes::run_pass(p, g).graph, seed); }
      }
      const Graph opt = passes::run_default_pipeline(g);
      same_results(g, opt, seed);
      const Graph low = passes::decompose(opt);
      BOOST_TEST(composites(low) == 0);
      same_results(g, low, seed);
      same_results(g, passes::decompose(g), seed);
      // Idempotence: a second run of the pipeline finds nothing more to remove.
      BOOST_TEST(passes::run_default_pipeline(opt).op_count() == opt.op_count(), passes::run_default_pipeline(opt).str() << opt.str());
      shrunk += opt.op_count() < g.canonical().op_count();
      recognised += count(opt, OpId::rms_norm) + count(opt, OpId::layer_norm) > count(g, OpId::rms_norm) + count(g, OpId::layer_norm) ||
                    count(opt, OpId::softmax) > count(g, OpId::softmax);
    }
  }
  BOOST_TEST_MESSAGE("random graphs: " << built << " compared, " << skipped << " skipped (fail when run), " << shrunk
                                       << " made smaller than their live part, " << recognised << " with a pattern recognised, "
                                       << symbolic << " symbolic, " << with_facts << " with shape facts");
  BOOST_TEST(shrunk > 20);
  BOOST_TEST(recognised > 5);
  BOOST_TEST(symbolic > 50);
  BOOST_TEST(with_facts > 10);
}

BOOST_AUTO_TEST_CASE(show_random_graph, *boost::unit_test::disabled()) {
  for (uint64_t seed : {3u, 11u, 17u}) {
    Graph g = RandomGraph(seed).build();
    BOOST_TEST_MESSAGE("seed " << seed << "\n" << g.str() << "optimised:\n" << passes::run_default_pipeline(g).str());
  }
}

