// to_channels_last and sink_permutes: a conv net turned channels last keeps its values, and the
// permutes between its convolutions cancel, so only the input's stays.
#include "helpers.h"

using namespace passes_test;
using kiln::passes::eliminate_dead_code;
using kiln::passes::simplify;
using kiln::passes::sink_permutes;
using kiln::passes::to_channels_last;

namespace {
using Ints = std::vector<int64_t>;

std::vector<double> ramp(int64_t n, double scale) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) v[static_cast<size_t>(k)] = std::sin(static_cast<double>(k) * 0.37) * scale;
  return v;
}

// Permutes that move data: of more elements than a per-channel vector (a bias's permute is a
// view the kernel reads in place).
int transposes(const Graph& g) {
  int n = 0;
  for (const Node& x : g.nodes()) {
    if (x.op != OpId::permute) continue;
    int64_t elems = 1;
    for (const SymInt& s : x.meta.sizes) elems *= s.hint();
    n += elems > 16;
  }
  return n;
}

Graph turned(const Graph& g) { return eliminate_dead_code(simplify(checked(sink_permutes, checked(to_channels_last, g)))); }
}  // namespace

BOOST_AUTO_TEST_SUITE(layout_passes)

// A residual block as torchvision's ResNet exports it (batch norm folded into the convolutions'
// bias), a depthwise convolution, a squeeze-excitation scale and a pooled head.
BOOST_AUTO_TEST_CASE(a_conv_net_runs_channels_last_between_its_input_and_its_head) {
  for (const bool symbolic : {false, true}) {
    G t;
    const SymInt n = symbolic ? t.sym(2) : SymInt(2);
    const NodeId x = t.in(DType::f32, {n, 4, 6, 6}, "x");
    const Attrs same{Ints{1, 1}, Ints{1, 1, 1, 1}, Ints{1, 1}, int64_t{1}};
    const Attrs unit{Ints{1, 1}, Ints{0, 0, 0, 0}, Ints{1, 1}, int64_t{1}};
    const NodeId c1 = t.op(OpId::convolution, {x, t.constant(DType::f32, {8, 4, 3, 3}, ramp(288, 0.2)), t.constant(DType::f32, {8}, ramp(8, 0.1))}, same);
    const NodeId r1 = t.op(OpId::relu, {c1});
    const NodeId c2 = t.op(OpId::convolution, {r1, t.constant(DType::f32, {8, 8, 1, 1}, ramp(64, 0.3))}, unit);
    const NodeId res = t.op(OpId::relu, {t.op(OpId::add, {c2, r1})});
    const NodeId dw = t.op(OpId::convolution, {res, t.constant(DType::f32, {8, 1, 3, 3}, ramp(72, 0.3))},
                           {Ints{2, 2}, Ints{1, 1, 1, 1}, Ints{1, 1}, int64_t{8}});
    const NodeId se = t.op(OpId::sigmoid, {t.reduce(OpId::mean, dw, {2, 3}, true)});  // [N, 8, 1, 1]
    const NodeId scaled = t.op(OpId::mul, {dw, se});
    const NodeId biased = t.op(OpId::add, {scaled, t.constant(DType::f32, {8, 1, 1}, ramp(8, 0.5))});
    const NodeId pooled = t.reduce(OpId::mean, biased, {2, 3}, false);  // [N, 8]
    const NodeId cropped = t.op(OpId::slice, {biased}, {int64_t{3}, int64_t{1}, int64_t{3}, int64_t{1}});
    const Graph& g = t.out({pooled, cropped});
    const Graph h = turned(g);
    BOOST_TEST(same_results(g, h), h.str());
    BOOST_TEST(count(h, OpId::convolution) == 0);
    BOOST_TEST(count(h, OpId::convolution_channels_last) == 3);
    // The input's permute, and the cropped output's back to channels first.
    BOOST_TEST(transposes(h) == 2, h.str());
  }
}

// A pointwise op whose other full-size operand is channels first keeps the permute before it.
BOOST_AUTO_TEST_CASE(a_channels_first_operand_of_full_size_stops_the_permute) {
  G t;
  const NodeId x = t.in(DType::f32, {1, 3, 5, 5}, "x");
  const NodeId other = t.in(DType::f32, {1, 4, 5, 5}, "other");
  const NodeId c = t.op(OpId::convolution, {x, t.constant(DType::f32, {4, 3, 3, 3}, ramp(108, 0.2))},
                        {Ints{1, 1}, Ints{1, 1, 1, 1}, Ints{1, 1}, int64_t{1}});
  const NodeId y = t.op(OpId::mul, {t.op(OpId::relu, {c}), other});
  const Graph& g = t.out({y});
  const Graph h = turned(g);
  BOOST_TEST(same_results(g, h), h.str());
  BOOST_TEST(transposes(h) == 2, h.str());  // x's, and relu's result back before the mul
}

// A per-channel value expanded to full size (what a batch norm's backward holds: the gradient of
// a sum or mean), or a pointwise op over one (divided by the count), lets the permute through,
// as a broadcast operand does.
BOOST_AUTO_TEST_CASE(an_expanded_per_channel_operand_lets_the_permute_through) {
  G t;
  const NodeId x = t.in(DType::f32, {2, 3, 5, 5}, "x");
  const Attrs same{Ints{1, 1}, Ints{1, 1, 1, 1}, Ints{1, 1}, int64_t{1}};
  const NodeId y = t.op(OpId::relu, {t.op(OpId::convolution, {x, t.constant(DType::f32, {4, 3, 3, 3}, ramp(108, 0.2))}, same)});
  const NodeId sums = t.op(OpId::reshape, {t.reduce(OpId::sum, y, {0, 2, 3}, false)}, {SymShape{1, 4, 1, 1}});
  const NodeId expanded = t.op(OpId::expand, {sums}, {SymShape{2, 4, 5, 5}});
  const NodeId mean = t.op(OpId::div, {expanded, t.constant(DType::f32, {}, {50.0})});  // still full size
  const NodeId scaled = t.op(OpId::add, {t.op(OpId::mul, {y, expanded}), mean});
  const NodeId z = t.op(OpId::convolution, {scaled, t.constant(DType::f32, {4, 4, 3, 3}, ramp(144, 0.1))}, same);
  const Graph& g = t.out({z});
  const Graph h = turned(g);
  BOOST_TEST(same_results(g, h), h.str());
  BOOST_TEST(transposes(h) == 2, h.str());  // x's and z's back: none around the mul
}

// Windows flattened and gathered between two convolutions (a max pooling's gradient):
// reshape [N, C, H, W] -> [N, C, H * W], index_select along the positions, reshape back. Both
// reshapes group dims that lie side by side channels last, so the permutes pass them and the
// index_select, and cancel at the next convolution.
BOOST_AUTO_TEST_CASE(flattened_windows_gathered_stay_channels_last) {
  G t;
  const NodeId x = t.in(DType::f32, {2, 3, 4, 4}, "x");
  const Attrs same{Ints{1, 1}, Ints{1, 1, 1, 1}, Ints{1, 1}, int64_t{1}};
  const NodeId y = t.op(OpId::convolution, {x, t.constant(DType::f32, {4, 3, 3, 3}, ramp(108, 0.2))}, same);
  const NodeId flat = t.op(OpId::reshape, {y}, {SymShape{2, 4, 16}});
  const NodeId index = t.op(OpId::cast, {t.op(OpId::sub, {t.full(15.0, DType::f32), t.op(OpId::iota, {}, {SymShape{16}, int64_t{0}, DType::f32})})},
                            {DType::i64});  // the positions reversed
  const NodeId picked = t.op(OpId::index_select, {flat, index}, {int64_t{2}});
  const NodeId back = t.op(OpId::reshape, {picked}, {SymShape{2, 4, 4, 4}});
  const NodeId z = t.op(OpId::convolution, {t.op(OpId::relu, {back}), t.constant(DType::f32, {4, 4, 3, 3}, ramp(144, 0.1))}, same);
  const Graph& g = t.out({z});
  const Graph h = turned(g);
  BOOST_TEST(same_results(g, h), h.str());
  BOOST_TEST(transposes(h) == 2, h.str());  // x's and z's back only
}

// A weight that is an input is permuted in the graph; bf16 and a 1-D convolution.
BOOST_AUTO_TEST_CASE(weights_that_are_inputs_and_other_ranks) {
  G t;
  const NodeId x = t.in(DType::bf16, {2, 3, 10}, "x");
  const NodeId w = t.in(DType::bf16, {4, 3, 3}, "w");
  const NodeId c = t.op(OpId::convolution, {x, w}, {Ints{2}, Ints{1, 0}, Ints{1}, int64_t{1}});
  const NodeId y = t.reduce(OpId::max, t.op(OpId::gelu, {c}, {std::string("none")}), {1}, false);  // [2, L]
  const Graph& g = t.out({y});
  const Graph h = turned(g);
  BOOST_TEST(same_results(g, h), h.str());
  BOOST_TEST(count(h, OpId::convolution_channels_last) == 1);
  BOOST_TEST(transposes(h) == 2, h.str());  // x's and w's; the max over channels reads [2, L, 4]
}

// A convolution's gradient ops (what a training step's backward holds) turn channels last too,
// with their channels_last attribute set, and keep their values; the permutes between a
// gradient and the next convolution cancel as the forward's do.
BOOST_AUTO_TEST_CASE(convolution_gradients_run_channels_last) {
  G t;
  const NodeId x = t.in(DType::f32, {2, 3, 7, 7}, "x");
  const NodeId w = t.in(DType::f32, {4, 3, 3, 3}, "w");
  const NodeId gy = t.in(DType::f32, {2, 4, 4, 4}, "gy");
  const NodeId w2 = t.constant(DType::f32, {3, 3, 1, 1}, ramp(9, 0.4));
  // gx = input_grad(gy, w), then through a 1x1 convolution and relu; gw = weight_grad(x, gy)
  const NodeId gx = t.op(OpId::convolution_input_grad, {gy, w},
                         {Ints{2, 2}, Ints{1, 1, 1, 1}, Ints{1, 1}, int64_t{1}, Ints{7, 7}, false});
  const NodeId next = t.op(OpId::relu, {t.op(OpId::convolution, {gx, w2}, {Ints{1, 1}, Ints{0, 0, 0, 0}, Ints{1, 1}, int64_t{1}})});
  const NodeId gw = t.op(OpId::convolution_weight_grad, {x, gy},
                         {Ints{2, 2}, Ints{1, 1, 1, 1}, Ints{1, 1}, int64_t{1}, Ints{3, 3}, false});
  const Graph& g = t.out({next, gw});
  const Graph h = turned(g);
  BOOST_TEST(same_results(g, h), h.str());
  int last = 0;
  for (const Node& n : h.nodes())
    if (n.op == OpId::convolution_input_grad || n.op == OpId::convolution_weight_grad) last += n.attrs.b(5) ? 1 : 0;
  BOOST_TEST(last == 2, h.str());
  BOOST_TEST(count(h, OpId::convolution_channels_last) == 1);
  // x's, w's and gy's (read by both gradients: one permute), the outputs' back: no permute between
  // the input gradient and the convolution after it.
  BOOST_TEST(transposes(h) == 5, h.str());
}

// A ConvNeXt block: its layer norm over channels is written as a permute to channels last, the
// norm over the last dim, a linear layer and a permute back, around a depthwise convolution and a
// residual add. Turned channels last, the convolution's permute back and the norm's permute to
// channels last meet and cancel (composed as they meet, before either sinks alone), so the norm,
// the linear layer and the residual run channels last, with no transposes between the blocks.
BOOST_AUTO_TEST_CASE(a_layer_norm_over_channels_runs_channels_last) {
  G t;
  const NodeId x = t.in(DType::f32, {2, 3, 8, 8}, "x");
  const NodeId stem = t.op(OpId::convolution, {x, t.constant(DType::f32, {4, 3, 2, 2}, ramp(48, 0.3)), t.constant(DType::f32, {4}, ramp(4, 0.1))},
                           {Ints{2, 2}, Ints{0, 0, 0, 0}, Ints{1, 1}, int64_t{1}});  // [2, 4, 4, 4]
  NodeId h = stem;
  for (int block = 0; block < 2; ++block) {
    const NodeId dw = t.op(OpId::convolution, {h, t.constant(DType::f32, {4, 1, 3, 3}, ramp(36, 0.2))},
                           {Ints{1, 1}, Ints{1, 1, 1, 1}, Ints{1, 1}, int64_t{4}});
    const NodeId last = t.op(OpId::permute, {dw}, {Ints{0, 2, 3, 1}});
    const NodeId mean = t.reduce(OpId::mean, last, {3});
    const NodeId centred = t.op(OpId::sub, {last, mean});
    const NodeId var = t.reduce(OpId::mean, t.op(OpId::mul, {centred, centred}), {3});
    const NodeId normed = t.op(OpId::mul, {centred, t.op(OpId::rsqrt, {t.op(OpId::add, {var, t.full(1e-6)})})});
    const NodeId fc = t.op(OpId::matmul, {normed, t.constant(DType::f32, {4, 4}, ramp(16, 0.4))});
    const NodeId back = t.op(OpId::permute, {t.op(OpId::relu, {fc})}, {Ints{0, 3, 1, 2}});
    h = t.op(OpId::add, {back, h});
  }
  const Graph& g = t.out({t.reduce(OpId::mean, h, {2, 3}, false)});
  const Graph h2 = turned(g);
  BOOST_TEST(same_results(g, h2), h2.str());
  BOOST_TEST(transposes(h2) == 1, h2.str());  // x's only
}

BOOST_AUTO_TEST_SUITE_END()
