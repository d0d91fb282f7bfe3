// recognize: hand-written softmax, log_softmax, layer_norm, rms_norm and tanh gelu become one node; the
// same shapes with an intermediate used elsewhere, another eps dtype, a biased variance or
// non-trailing dims do not.
#include <cmath>
#include <limits>

#include "helpers.h"

using namespace passes_test;
using kiln::passes::recognize_patterns;

namespace {

Graph recognize_dce(const Graph& g) { return kiln::passes::eliminate_dead_code(checked(recognize_patterns, g)); }

// suite.md's rmsnorm: x * rsqrt(mean(x*x, -1, keepdim) + 1e-6) * g, as the frontend traces it.
NodeId rms_by_hand(G& t, NodeId x, NodeId w, double eps = 1e-6, bool swap = false) {
  const int64_t last = t.g.node(x).meta.rank() - 1;
  const DType d = t.g.node(x).meta.dtype;
  const NodeId ms = t.reduce(OpId::mean, t.op(OpId::mul, {x, x}), {last});
  const NodeId inv = t.op(OpId::rsqrt, {swap ? t.op(OpId::add, {t.full(eps, d), ms}) : t.op(OpId::add, {ms, t.full(eps, d)})});
  const NodeId y = swap ? t.op(OpId::mul, {inv, x}) : t.op(OpId::mul, {x, inv});
  return w < 0 ? y : swap ? t.op(OpId::mul, {w, y}) : t.op(OpId::mul, {y, w});
}

struct Softmax {
  NodeId out, e;
};
Softmax softmax_by_hand(G& t, NodeId x, int64_t d) {
  const NodeId m = t.reduce(OpId::max, x, {d});
  const NodeId e = t.op(OpId::exp, {t.op(OpId::sub, {x, m})});
  return {t.op(OpId::div, {e, t.reduce(OpId::sum, e, {d})}), e};
}

NodeId layer_norm_by_hand(G& t, NodeId x, std::vector<int64_t> dims, NodeId w, NodeId b, bool div_form = false,
                          DType eps_dtype = DType::f32, int64_t correction = 0) {
  const NodeId mean = t.reduce(OpId::mean, x, dims);
  const NodeId var = t.op(OpId::var, {x}, {dims, true, correction});
  const NodeId a = t.op(OpId::add, {var, t.full(1e-5, eps_dtype)});
  const NodeId c = t.op(OpId::sub, {x, mean});
  NodeId y = div_form ? t.op(OpId::div, {c, t.op(OpId::sqrt, {a})}) : t.op(OpId::mul, {t.op(OpId::rsqrt, {a}), c});
  if (w >= 0) y = t.op(OpId::mul, {y, w});
  if (b >= 0) y = t.op(OpId::add, {b, y});
  return y;
}


// GPT-2's gelu_new as transformers writes it: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 *
// x^3))). grouping 0: (x * 0.5) * t; 1: x * (0.5 * t); 2: (x * t) * 0.5. cube 0: pow(x, 3);
// 1: (x * x) * x; 2: x * (x * x). Constants of x's dtype (bf16 rounds them).
NodeId gelu_new_by_hand(G& t, NodeId x, int grouping, int cube, double cubic = 0.044715, OpId fn = OpId::tanh) {
  const DType d = t.g.node(x).meta.dtype;
  NodeId c3 = cube == 0   ? t.op(OpId::pow, {x, t.full(3.0, d)})
              : cube == 1 ? t.op(OpId::mul, {t.op(OpId::mul, {x, x}), x})
                          : t.op(OpId::mul, {x, t.op(OpId::mul, {x, x})});
  const NodeId inner = t.op(OpId::add, {x, t.op(OpId::mul, {t.full(cubic, d), c3})});
  const NodeId th = t.op(fn, {t.op(OpId::mul, {inner, t.full(0.7978845608028654, d)})});
  const NodeId term = t.op(OpId::add, {t.full(1.0, d), th});
  const NodeId half = t.full(0.5, d);
  if (grouping == 0) return t.op(OpId::mul, {t.op(OpId::mul, {x, half}), term});
  if (grouping == 1) return t.op(OpId::mul, {x, t.op(OpId::mul, {half, term})});
  return t.op(OpId::mul, {t.op(OpId::mul, {x, term}), half});
}
}  // namespace

BOOST_AUTO_TEST_SUITE(recognize_pass)

BOOST_AUTO_TEST_CASE(suite_rmsnorm_becomes_one_node) {
  G t;
  const NodeId x = t.in(DType::f32, {16, 64}, "x");
  const NodeId g = t.in(DType::f32, {64}, "g");
  const Graph& gr = t.out({rms_by_hand(t, x, g)});
  const Graph d = recognize_dce(gr);
  BOOST_TEST(ops(d) == 1, d.str());
  BOOST_TEST(count(d, OpId::rms_norm) == 1);
  const Node& n = d.node(d.outputs()[0]);
  BOOST_TEST(n.attrs.i(0) == 1);
  BOOST_TEST(n.attrs.f(1) == 1e-6);
  BOOST_TEST((n.inputs == std::vector<NodeId>{d.inputs()[0], d.inputs()[1]}));
}

BOOST_AUTO_TEST_CASE(rmsnorm_variants) {
  G t;
  const SymInt s0 = t.sym(5);
  const NodeId x = t.in(DType::f32, {s0, 8}, "x");
  const NodeId w = t.in(DType::f32, {8}, "w");
  const NodeId x16 = t.in(DType::bf16, {3, 8}, "x16");
  const NodeId w16 = t.in(DType::bf16, {8}, "w16");
  // pow(x, 2) for x * x; operands swapped; no weight; bf16 throughout.
  const NodeId ms = t.reduce(OpId::mean, t.op(OpId::pow, {x, t.full(2)}), {1});
  const NodeId p = t.op(OpId::mul, {x, t.op(OpId::rsqrt, {t.op(OpId::add, {ms, t.full(1e-5)})})});
  const Graph& g = t.out({p, rms_by_hand(t, x, w, 1e-6, true), rms_by_hand(t, x, -1), rms_by_hand(t, x16, w16)});
  const Graph d = recognize_dce(g);
  BOOST_TEST(count(d, OpId::rms_norm) == 4, d.str());
  BOOST_TEST(ops(d) == 4);
}

BOOST_AUTO_TEST_CASE(rmsnorm_with_a_broadcasting_weight_keeps_the_weight_multiply) {
  // w [1, 8] is not the [8] weight rms_norm takes: the core is recognised, the multiply stays.
  G t;
  const NodeId x = t.in(DType::f32, {4, 8});
  const NodeId w = t.in(DType::f32, {1, 8});
  const Graph& g = t.out({rms_by_hand(t, x, w)});
  const Graph d = recognize_dce(g);
  BOOST_TEST(count(d, OpId::rms_norm) == 1, d.str());
  BOOST_TEST(count(d, OpId::mul) == 1);
}

BOOST_AUTO_TEST_CASE(softmax_and_log_softmax_become_one_node) {
  G t;
  const SymInt s0 = t.sym(3);
  const NodeId x = t.in(DType::f32, {s0, 7});
  const NodeId last = softmax_by_hand(t, x, 1).out;
  const NodeId first = softmax_by_hand(t, x, 0).out;
  const NodeId m = t.reduce(OpId::max, x, {1});
  const NodeId z = t.op(OpId::sub, {x, m});
  const NodeId ls = t.op(OpId::sub, {z, t.op(OpId::log, {t.reduce(OpId::sum, t.op(OpId::exp, {z}), {1})})});
  const Graph& g = t.out({last, first, ls});
  const Graph d = recognize_dce(g);
  BOOST_TEST(ops(d) == 3, d.str());
  BOOST_TEST(count(d, OpId::softmax) == 2);
  BOOST_TEST(count(d, OpId::log_softmax) == 1);
  BOOST_TEST(d.node(d.outputs()[0]).attrs.i(0) == 1);
  BOOST_TEST(d.node(d.outputs()[1]).attrs.i(0) == 0);
}

BOOST_AUTO_TEST_CASE(softmax_whose_exp_is_an_output_is_not_rewritten) {
  G t;
  const NodeId x = t.in(DType::f32, {4, 7});
  const Softmax s = softmax_by_hand(t, x, 1);
  const Graph& g = t.out({s.out, s.e});
  const Graph d = recognize_dce(g);
  BOOST_TEST(count(d, OpId::softmax) == 0);
  BOOST_TEST(ops(d) == ops(g));
}

BOOST_AUTO_TEST_CASE(reads_by_dead_nodes_do_not_count) {
  G t;
  const NodeId x = t.in(DType::f32, {4, 7});
  const Softmax s = softmax_by_hand(t, x, 1);
  const NodeId dead = t.op(OpId::neg, {t.op(OpId::sin, {s.e})});  // reads the exp, read by nothing
  const Graph& g = t.out({s.out});
  const Graph r = checked(recognize_patterns, g);
  BOOST_TEST(count(r, OpId::softmax) == 1, r.str());
  BOOST_TEST(count(r, OpId::sin) == 0);  // dropped with the pattern's interior
  BOOST_TEST(ops(kiln::passes::eliminate_dead_code(r)) == 1);
  (void)dead;
}

BOOST_AUTO_TEST_CASE(softmax_with_an_intermediate_read_elsewhere_is_not_rewritten) {
  G t;
  const NodeId x = t.in(DType::f32, {4, 7});
  const NodeId m = t.reduce(OpId::max, x, {1});
  const NodeId e = t.op(OpId::exp, {t.op(OpId::sub, {x, m})});
  const NodeId s = t.op(OpId::div, {e, t.reduce(OpId::sum, e, {1})});
  const Graph& g = t.out({s, t.op(OpId::add, {m, t.full(1)})});  // the max is read again
  const Graph d = recognize_dce(g);
  BOOST_TEST(count(d, OpId::softmax) == 0);
  // Integer input: the hand-written form subtracts in integers, softmax would not.
  G u;
  const NodeId xi = u.in(DType::i32, {4, 7});
  const Graph& h = u.out({softmax_by_hand(u, xi, 1).out});
  BOOST_TEST(count(recognize_dce(h), OpId::softmax) == 0);
}

BOOST_AUTO_TEST_CASE(layer_norm_forms) {
  G t;
  const SymInt s0 = t.sym(3);
  const NodeId x = t.in(DType::f32, {s0, 4, 6});
  const NodeId w = t.in(DType::f32, {6});
  const NodeId b = t.in(DType::f32, {6});
  const NodeId w2 = t.in(DType::f32, {4, 6});
  const Graph& g = t.out({
      layer_norm_by_hand(t, x, {2}, w, b),
      layer_norm_by_hand(t, x, {2}, -1, -1),
      layer_norm_by_hand(t, x, {2}, w, -1, true),
      layer_norm_by_hand(t, x, {1, 2}, w2, -1),
  });
  const Graph d = recognize_dce(g);
  BOOST_TEST(count(d, OpId::layer_norm) == 4, d.str());
  BOOST_TEST(ops(d) == 4);
  BOOST_TEST(d.node(d.outputs()[0]).inputs.size() == 3u);
  BOOST_TEST(d.node(d.outputs()[3]).attrs.i(0) == 2);
  BOOST_TEST(d.node(d.outputs()[0]).attrs.f(1) == 1e-5);
}

BOOST_AUTO_TEST_CASE(layer_norm_look_alikes_stay) {
  G t;
  const NodeId x = t.in(DType::f32, {3, 4, 6});
  const NodeId w = t.in(DType::f32, {6});
  const Graph& g = t.out({
      layer_norm_by_hand(t, x, {2}, w, -1, false, DType::f64),        // eps f64: rounded differently
      layer_norm_by_hand(t, x, {2}, w, -1, false, DType::f32, 1),     // unbiased variance
      layer_norm_by_hand(t, x, {1}, -1, -1),                          // not the trailing dims
  });
  const Graph d = recognize_dce(g);
  BOOST_TEST(count(d, OpId::layer_norm) == 0, d.str());
  BOOST_TEST(ops(d) == ops(g));
  // A weight of another dtype: the multiply promotes, so only the core is recognised.
  G u;
  const NodeId y = u.in(DType::f32, {3, 6});
  const Graph& h = u.out({layer_norm_by_hand(u, y, {1}, u.in(DType::f64, {6}), -1)});
  const Graph e = recognize_dce(h);
  BOOST_TEST(count(e, OpId::layer_norm) == 1, e.str());
  BOOST_TEST((e.node(e.node(e.outputs()[0]).inputs[0]).op == OpId::layer_norm));
  BOOST_TEST(ops(e) == 2);
}

// The gelu computes in f32 and rounds once where the hand-written ops round after each op, so
// the values are not the hand-written ones (in bf16 by up to 8% near zero): both are checked
// against the formula in f64 instead, the gelu to be at least as close.
BOOST_AUTO_TEST_CASE(gelu_tanh_forms) {
  for (DType d : {DType::f32, DType::bf16, DType::f16}) {
    G t;
    const NodeId a = t.in(d, {4, 64}, "a");
    const NodeId b = t.in(d, {64}, "b");
    const NodeId x = t.op(OpId::add, {a, b});  // a sum, as a linear layer's bias add leaves it
    std::vector<NodeId> outs;
    for (int grouping = 0; grouping < 3; ++grouping)
      for (int cube = 0; cube < 3; ++cube) outs.push_back(gelu_new_by_hand(t, x, grouping, cube));
    outs.push_back(x);  // x as d rounds it, for the formula in f64
    const Graph& g = t.out(outs);
    const Graph r = kiln::passes::eliminate_dead_code(recognize_patterns(g));
    BOOST_TEST(count(r, OpId::gelu) == 9, dtype_name(d) << "\n" << r.str());
    BOOST_TEST(ops(r) == 10);  // the add and the nine gelus
    for (size_t o = 0; o < 9; ++o) {
      const Node& n = r.node(r.outputs()[o]);
      BOOST_TEST((n.op == OpId::gelu && n.attrs.s(0) == "tanh" && n.inputs[0] == r.outputs()[9]));
    }
    const std::vector<TensorData> in = random_inputs(g, {}, 11);
    const std::vector<TensorData> hand = eval::run_graph(g, in), fused = eval::run_graph(r, in);
    const TensorData xv = eval::convert(hand[9], DType::f64);
    for (size_t o = 0; o < 9; ++o) {
      const TensorData h = eval::convert(hand[o], DType::f64), f = eval::convert(fused[o], DType::f64);
      double err_hand = 0, err_fused = 0, scale = 0;
      for (int64_t k = 0; k < xv.numel(); ++k) {
        const double v = xv.data_as<double>()[k];
        const double exact = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
        err_hand = std::max(err_hand, std::fabs(h.data_as<double>()[k] - exact));
        err_fused = std::max(err_fused, std::fabs(f.data_as<double>()[k] - exact));
        scale = std::max(scale, std::fabs(exact));
      }
      BOOST_TEST(err_fused <= tolerance(d) * scale, dtype_name(d) << " output " << o << ": " << err_fused);
      BOOST_TEST(err_fused <= err_hand + 1e-6 * scale, dtype_name(d) << " output " << o << ": " << err_fused
                                                                  << " against " << err_hand << " by hand");
    }
  }
}

BOOST_AUTO_TEST_CASE(gelu_tanh_look_alikes_stay) {
  G t;
  const NodeId x = t.in(DType::f32, {4, 8}, "x");
  const NodeId kept = t.op(OpId::mul, {x, x});
  const NodeId shared = t.op(OpId::mul, {kept, x});  // x^3, also an output below
  const NodeId inner = t.op(OpId::add, {x, t.op(OpId::mul, {t.full(0.044715), shared})});
  const NodeId th = t.op(OpId::tanh, {t.op(OpId::mul, {inner, t.full(0.7978845608028654)})});
  const NodeId read_elsewhere =
      t.op(OpId::mul, {t.op(OpId::mul, {x, t.full(0.5)}), t.op(OpId::add, {t.full(1.0), th})});
  const Graph& g = t.out({
      gelu_new_by_hand(t, x, 0, 0, 0.045),                       // another cubic coefficient
      gelu_new_by_hand(t, x, 1, 1, 0.044715, OpId::sigmoid),     // sigmoid for tanh
      read_elsewhere, shared,                                    // x^3 read outside the pattern
  });
  const Graph r = recognize_dce(g);
  BOOST_TEST(count(r, OpId::gelu) == 0, r.str());
  BOOST_TEST(ops(r) == ops(g));
  // f32 scalars in a bf16 computation, as exporters write them: the products stay bf16 (a 0-d
  // tensor does not promote a dimensioned one), and the values are f32's, so it is one gelu.
  G u;
  const NodeId y = u.in(DType::bf16, {4, 8});
  const NodeId c = u.op(OpId::pow, {y, u.full(3.0, DType::bf16)});
  const NodeId in2 = u.op(OpId::add, {y, u.op(OpId::mul, {u.full(0.044715, DType::f32), c})});
  const NodeId t2 = u.op(OpId::tanh, {u.op(OpId::mul, {in2, u.full(0.7978845608028654, DType::f32)})});
  const Graph& h = u.out({u.op(OpId::mul, {u.op(OpId::mul, {y, u.full(0.5, DType::f32)}), u.op(OpId::add, {u.full(1.0, DType::f32), t2})})});
  BOOST_TEST(count(kiln::passes::eliminate_dead_code(recognize_patterns(h)), OpId::gelu) == 1);
}

BOOST_AUTO_TEST_CASE(attention_forms) {
  // suite.md's attention_bf16: softmax(q @ k^T * c, -1) @ v, with the softmax written by hand
  // (found by the pipeline's second recognize) or as the op; * c, c *, / c and no scale.
  for (int form = 0; form < 4; ++form)
    for (bool hand : {false, true}) {
      G t;
      const NodeId q = t.in(DType::bf16, {2, 3, 10, 16}, "q");
      const NodeId k = t.in(DType::bf16, {2, 3, 12, 16}, "k");
      const NodeId v = t.in(DType::bf16, {2, 3, 12, 8}, "v");
      const NodeId kt = form == 1 ? t.op(OpId::permute, {k}, {std::vector<int64_t>{0, 1, 3, 2}})
                                  : t.op(OpId::transpose, {k}, {int64_t{2}, int64_t{3}});
      NodeId s = t.op(OpId::matmul, {q, kt});
      if (form == 0) s = t.op(OpId::mul, {s, t.full(0.25, DType::bf16)});
      if (form == 1) s = t.op(OpId::mul, {t.full(0.25, DType::bf16), s});
      if (form == 2) s = t.op(OpId::div, {s, t.full(4.0, DType::bf16)});
      const NodeId p = hand ? softmax_by_hand(t, s, 3).out : t.op(OpId::softmax, {s}, {int64_t{3}});
      const Graph& g = t.out({t.op(OpId::matmul, {p, v})});
      const Graph d = kiln::passes::eliminate_dead_code(
          checked(kiln::passes::recognize_attention, kiln::passes::run_default_pipeline(g)));
      BOOST_TEST(ops(d) == 1, "form " << form << (hand ? " by hand\n" : "\n") << d.str());
      const Node& n = d.node(d.outputs()[0]);
      BOOST_TEST((n.op == OpId::scaled_dot_product_attention));
      BOOST_TEST(n.attrs.f(0) == (form == 3 ? 1.0 : 0.25));
      BOOST_TEST((n.inputs == std::vector<NodeId>{d.inputs()[0], d.inputs()[1], d.inputs()[2]}));
      BOOST_TEST(same_results(g, d));
    }
}

BOOST_AUTO_TEST_CASE(attention_as_torch_exports_it) {
  // torch.onnx.export(dynamo=True) writes scaled_dot_product_attention's math as
  // (q * sqrt(c)) @ (k^T * sqrt(c)) with k^T = reshape(transpose(reshape(k, [B*H, L, D])), [B, H, D, L])
  // (bert, gpt2, llama), or with k already [B*H, L, D] (ViT's multi-head attention), where the
  // attention node reads k reshaped to [B, H, L, D].
  for (bool flat_k : {false, true})
    for (int scaled = 0; scaled < 4; ++scaled) {  // bit 0: q scaled, bit 1: k^T scaled
      G t;
      const NodeId q = t.in(DType::f32, {2, 3, 10, 16}, "q");
      const NodeId k = flat_k ? t.in(DType::f32, {6, 12, 16}, "k") : t.in(DType::f32, {2, 3, 12, 16}, "k");
      const NodeId v = t.in(DType::f32, {2, 3, 12, 8}, "v");
      const NodeId k3 = flat_k ? k : t.op(OpId::reshape, {k}, {SymShape{6, 12, 16}});
      NodeId kt = t.op(OpId::reshape, {t.op(OpId::permute, {k3}, {std::vector<int64_t>{0, 2, 1}})}, {SymShape{2, 3, 16, 12}});
      const NodeId c = t.full(0.5, DType::f32, {1});
      const NodeId qs = scaled & 1 ? t.op(OpId::mul, {q, c}) : q;
      if (scaled & 2) kt = t.op(OpId::mul, {c, kt});
      const NodeId p = t.op(OpId::softmax, {t.op(OpId::matmul, {qs, kt})}, {int64_t{3}});
      const Graph& g = t.out({t.op(OpId::matmul, {p, v})});
      const Graph d = kiln::passes::eliminate_dead_code(
          checked(kiln::passes::recognize_attention, kiln::passes::run_default_pipeline(g)));
      const std::string at = std::string(flat_k ? "flat k" : "4-d k") + ", scaled " + std::to_string(scaled) + "\n";
      BOOST_TEST(count(d, OpId::scaled_dot_product_attention) == 1, at << d.str());
      BOOST_TEST(count(d, OpId::matmul) == 0, at << d.str());
      const Node& n = d.node(d.outputs()[0]);
      BOOST_REQUIRE((n.op == OpId::scaled_dot_product_attention));
      BOOST_TEST(n.attrs.f(0) == (scaled == 3 ? 0.25 : scaled ? 0.5 : 1.0), at);
      BOOST_TEST((d.node(n.inputs[1]).meta.sizes == SymShape{2, 3, 12, 16}), at);
    }
  // A reshape that regroups the swapped dims themselves is not a transpose of k: stays.
  G t;
  const NodeId q = t.in(DType::f32, {2, 10, 16}, "q");
  const NodeId k = t.in(DType::f32, {2, 8, 20}, "k");
  const NodeId v = t.in(DType::f32, {2, 10, 8}, "v");
  const NodeId kt = t.op(OpId::reshape, {t.op(OpId::permute, {k}, {std::vector<int64_t>{0, 2, 1}})}, {SymShape{2, 16, 10}});
  const NodeId p = t.op(OpId::softmax, {t.op(OpId::matmul, {q, kt})}, {int64_t{2}});
  const Graph& g = t.out({t.op(OpId::matmul, {p, v})});
  const Graph d = checked(kiln::passes::recognize_attention, kiln::passes::run_default_pipeline(g));
  BOOST_TEST(count(d, OpId::scaled_dot_product_attention) == 0, d.str());
}

BOOST_AUTO_TEST_CASE(masked_attention_as_torch_exports_it) {
  // A masked attention's export: softmax((q * c) @ (k^T * c) + m), its NaN rows zeroed by
  // where(isnan(p), 0, p) (what the op does with a mask), then @ v. A float mask added on either
  // side, or a bool one keeping (where(m, scores, -inf)); broadcast over the heads.
  for (int form = 0; form < 3; ++form) {
    G t;
    const NodeId q = t.in(DType::f32, {2, 3, 10, 16}, "q");
    const NodeId k = t.in(DType::f32, {2, 3, 12, 16}, "k");
    const NodeId v = t.in(DType::f32, {2, 3, 12, 8}, "v");
    const NodeId m = t.in(form == 2 ? DType::bool_ : DType::f32, {2, 1, 10, 12}, "m");
    const NodeId c = t.full(0.5, DType::f32, {});
    const NodeId kt = t.op(OpId::transpose, {k}, {int64_t{2}, int64_t{3}});
    NodeId s = t.op(OpId::matmul, {t.op(OpId::mul, {q, c}), t.op(OpId::mul, {kt, c})});
    s = form == 0 ? t.op(OpId::add, {s, m})
        : form == 1 ? t.op(OpId::add, {m, s})
                    : t.op(OpId::where, {m, s, t.full(-std::numeric_limits<double>::infinity(), DType::f32)});
    const NodeId p = t.op(OpId::softmax, {s}, {int64_t{3}});
    const NodeId safe = t.op(OpId::where, {t.op(OpId::isnan, {p}), t.full(0.0, DType::f32), p});
    const Graph& g = t.out({t.op(OpId::matmul, {safe, v})});
    const Graph d = kiln::passes::eliminate_dead_code(
        checked(kiln::passes::recognize_attention, kiln::passes::run_default_pipeline(g)));
    BOOST_TEST(ops(d) == 1, "form " << form << "\n" << d.str());
    const Node& n = d.node(d.outputs()[0]);
    BOOST_REQUIRE((n.op == OpId::scaled_dot_product_attention));
    BOOST_TEST(n.attrs.f(0) == 0.25);
    BOOST_TEST((n.inputs == std::vector<NodeId>{d.inputs()[0], d.inputs()[1], d.inputs()[2], d.inputs()[3]}));
  }
  // The zeroed rows alone (an all-zero mask the pipeline folded away, as in BERT's export without
  // padding): the op with the where's 0 as the mask.
  {
    G t;
    const NodeId q = t.in(DType::f32, {2, 10, 16}, "q");
    const NodeId k = t.in(DType::f32, {2, 12, 16}, "k");
    const NodeId v = t.in(DType::f32, {2, 12, 8}, "v");
    const NodeId p = t.op(OpId::softmax, {t.op(OpId::matmul, {q, t.op(OpId::transpose, {k}, {int64_t{1}, int64_t{2}})})}, {int64_t{2}});
    const NodeId safe = t.op(OpId::where, {t.op(OpId::isnan, {p}), t.full(0.0, DType::f32), p});
    const Graph& g = t.out({t.op(OpId::matmul, {safe, v})});
    const Graph d = kiln::passes::eliminate_dead_code(
        checked(kiln::passes::recognize_attention, kiln::passes::run_default_pipeline(g)));
    BOOST_TEST(count(d, OpId::scaled_dot_product_attention) == 1, d.str());
    BOOST_TEST(d.node(d.outputs()[0]).inputs.size() == 4u);
  }
  // A mask without the zeroed rows is not the op (its fully masked rows stay NaN): it stays.
  G t;
  const NodeId q = t.in(DType::f32, {2, 10, 16}, "q");
  const NodeId k = t.in(DType::f32, {2, 12, 16}, "k");
  const NodeId v = t.in(DType::f32, {2, 12, 8}, "v");
  const NodeId m = t.in(DType::f32, {10, 12}, "m");
  const NodeId s = t.op(OpId::add, {t.op(OpId::matmul, {q, t.op(OpId::transpose, {k}, {int64_t{1}, int64_t{2}})}), m});
  const Graph& g = t.out({t.op(OpId::matmul, {t.op(OpId::softmax, {s}, {int64_t{2}}), v})});
  const Graph d = checked(kiln::passes::recognize_attention, kiln::passes::run_default_pipeline(g));
  BOOST_TEST(count(d, OpId::scaled_dot_product_attention) == 0, d.str());
}

BOOST_AUTO_TEST_CASE(attention_look_alikes_stay) {
  G t;
  const NodeId q = t.in(DType::f32, {10, 16}, "q");
  const NodeId k = t.in(DType::f32, {12, 16}, "k");
  const NodeId kt = t.in(DType::f32, {16, 12}, "kt");
  const NodeId v = t.in(DType::f32, {12, 8}, "v");
  const NodeId vb = t.in(DType::f32, {3, 12, 8}, "vb");
  auto attn = [&](NodeId left, NodeId right, NodeId val, int64_t dim) {
    return t.op(OpId::matmul, {t.op(OpId::softmax, {t.op(OpId::matmul, {left, right})}, {dim}), val});
  };
  const NodeId scores = t.op(OpId::matmul, {q, t.op(OpId::transpose, {k}, {int64_t{0}, int64_t{1}})});
  const Graph& g = t.out({
      attn(q, kt, v, 1),                                                   // k^T not a view of a k
      attn(q, t.op(OpId::transpose, {k}, {int64_t{0}, int64_t{1}}), v, 0),  // softmax over queries
      attn(q, t.op(OpId::transpose, {k}, {int64_t{0}, int64_t{1}}), vb, 1), // v broadcast over a batch
      t.op(OpId::matmul, {t.op(OpId::softmax, {scores}, {int64_t{1}}), v}), scores,  // scores are an output
  });
  const Graph d = checked(kiln::passes::recognize_attention, kiln::passes::run_default_pipeline(g));
  BOOST_TEST(count(d, OpId::scaled_dot_product_attention) == 0, d.str());
  // The default pipeline leaves attention as written (targets without a fused kernel).
  G u;
  const NodeId uq = u.in(DType::bf16, {10, 16}), uk = u.in(DType::bf16, {12, 16}), uv = u.in(DType::bf16, {12, 16});
  const NodeId us = u.op(OpId::matmul, {uq, u.op(OpId::transpose, {uk}, {int64_t{0}, int64_t{1}})});
  const Graph& ug = u.out({u.op(OpId::matmul, {u.op(OpId::softmax, {us}, {int64_t{1}}), uv})});
  BOOST_TEST(count(kiln::passes::run_default_pipeline(ug), OpId::scaled_dot_product_attention) == 0);
  BOOST_TEST(count(kiln::passes::recognize_attention(ug), OpId::scaled_dot_product_attention) == 1);
}

BOOST_AUTO_TEST_CASE(nested_patterns) {
  // softmax(rms_norm(x)) by hand: both found, the inner one is the outer one's operand.
  G t;
  const NodeId x = t.in(DType::f32, {2, 8});
  const Graph& g = t.out({softmax_by_hand(t, rms_by_hand(t, x, -1), 1).out});
  const Graph d = recognize_dce(g);
  BOOST_TEST(ops(d) == 2, d.str());
  BOOST_TEST(count(d, OpId::softmax) == 1);
  BOOST_TEST(count(d, OpId::rms_norm) == 1);
}

BOOST_AUTO_TEST_SUITE_END()
