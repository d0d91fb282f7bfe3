// The kernel IR: values_reused_across_passes (which per-row values a target may keep between
// the passes of a reduction kernel instead of recomputing them), and the masked and gathered
// loads that pad, cat and index_select lower to.
#include <algorithm>
#include <kiln/autodiff/autodiff.h>
#include <kiln/graph/graph.h>
#include <kiln/schedule/schedule.h>

#include <cstring>
#include <memory>

#include <boost/test/unit_test.hpp>

using namespace kiln;
using schedule::InstrKind;

namespace {

TensorMeta f32(SymShape s) { return TensorMeta{DType::f32, Device::cpu(), std::move(s), {}}; }

// The one kernel a graph schedules to.
schedule::Kernel only_kernel(const Graph& g) {
  schedule::Schedule s = schedule::schedule_graph(g);
  BOOST_REQUIRE_EQUAL(s.kernels.size(), 1u);
  return s.kernels[0];
}

std::vector<std::string> ops_of(const schedule::Kernel& k, const std::vector<int32_t>& instrs) {
  std::vector<std::string> r;
  for (int32_t i : instrs) {
    BOOST_REQUIRE(k.instrs[static_cast<size_t>(i)].kind == InstrKind::pointwise);
    r.emplace_back(op_name(k.instrs[static_cast<size_t>(i)].op));
  }
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(reused_across_passes)

BOOST_AUTO_TEST_CASE(softmax_keeps_its_exp) {
  Graph g;
  const NodeId x = g.add_input(f32({6, 1000}), "x");
  g.set_outputs({g.add(OpId::softmax, {x}, {int64_t{1}})});
  const schedule::Kernel k = only_kernel(g);
  BOOST_TEST(k.num_passes() == 3);
  // exp(x - max) is summed in pass 1 and divided by the sum in pass 2.
  BOOST_TEST(ops_of(k, schedule::values_reused_across_passes(k, 4)) == std::vector<std::string>{"exp"},
             boost::test_tools::per_element());
  // Below exp's cost nothing changes; above it (exp + sub = 5) nothing is worth keeping.
  BOOST_TEST(ops_of(k, schedule::values_reused_across_passes(k, 5)) == std::vector<std::string>{"exp"},
             boost::test_tools::per_element());
  BOOST_TEST(schedule::values_reused_across_passes(k, 6).empty());
}

BOOST_AUTO_TEST_CASE(cheap_values_are_recomputed_and_their_operands_looked_at) {
  // layer_norm: x - mean is read by the variance's pass and by the output's; it costs 1.
  Graph g;
  const NodeId x = g.add_input(f32({8, 64}), "x");
  const NodeId w = g.add_input(f32({64}), "w");
  const NodeId b = g.add_input(f32({64}), "b");
  g.set_outputs({g.add(OpId::layer_norm, {x, w, b}, {int64_t{1}, 1e-5})});
  const schedule::Kernel k = only_kernel(g);
  BOOST_TEST(schedule::values_reused_across_passes(k, 4).empty());
  BOOST_TEST(ops_of(k, schedule::values_reused_across_passes(k, 1)) == std::vector<std::string>{"sub"},
             boost::test_tools::per_element());

  // exp(x) * 2 (cost 5) reused by a later pass is kept whole, not its exp alone.
  Graph h;
  const NodeId y = h.add_input(f32({8, 64}), "y");
  const NodeId e = h.add(OpId::mul, {h.add(OpId::exp, {y}, {}), h.add(OpId::full, {}, {SymShape{}, 2.0, DType::f32})}, {});
  const NodeId s = h.add(OpId::sum, {e}, {std::vector<int64_t>{1}, true});
  h.set_outputs({h.add(OpId::div, {e, s}, {})});
  const schedule::Kernel kh = only_kernel(h);
  BOOST_TEST(ops_of(kh, schedule::values_reused_across_passes(kh, 4)) == std::vector<std::string>{"mul"},
             boost::test_tools::per_element());
}

// A composite's backward differentiates its own copy of the decomposition (sdk/autodiff), so a
// training step holds a layer norm's statistics more than once: the forward's composite, and the
// backward's mean, var and the mean inside var, over the same x. Decomposed, they compute the
// same sums: each is computed once (a GPT-2 step recomputed its 24 norms' statistics in one
// kernel of its backward: 0.46 ms of 17 on the H200).
BOOST_AUTO_TEST_CASE(a_backward_reads_the_statistics_its_forward_computed) {
  Graph g;
  const NodeId x = g.add_input(f32({64, 256}), "x");
  const NodeId w = g.add_input(f32({256}), "w");
  const NodeId b = g.add_input(f32({256}), "b");
  const NodeId p = g.add_input(f32({256, 256}), "p");
  const NodeId y = g.add(OpId::matmul, {g.add(OpId::layer_norm, {x, w, b}, {int64_t{1}, 1e-5}), p}, {});
  const NodeId loss = g.add(OpId::sum, {g.add(OpId::tanh, {y}, {})}, {std::vector<int64_t>{}, false});
  const NodeId seed = g.add(OpId::full, {}, {SymShape{}, 1.0, DType::f32});
  const std::vector<autodiff::Step> steps = autodiff::steps_of(g);
  const std::vector<autodiff::Seed> seeds{{loss, seed}};
  const std::vector<NodeId> grads = autodiff::gradients(g, steps, seeds, std::vector<NodeId>{x, w, b, p});
  g.set_outputs({loss, grads[0], grads[1], grads[2], grads[3]});
  int over_rows = 0;  // reductions of one value per row of x
  for (const schedule::Kernel& k : schedule::schedule_graph(g).kernels)
    for (const schedule::Instr& i : k.instrs)
      over_rows += i.kind == InstrKind::reduce && k.num_outer == 1 && k.domain == SymShape{64, 256};
  // The forward's mean and variance; the backward's two sums over the gradient (of x and of
  // x - mean times it).
  BOOST_TEST(over_rows == 4);
}

// A costly value read through a view by several uses (a depthwise convolution's sum permuted
// into a layer norm over channels) is stored under the view once, not recomputed by each pass,
// and so is one read through a view and a widening cast (the same in bf16, the norm in f32):
// stored in its own layout and dtype, not computed in the readers' order.
BOOST_AUTO_TEST_CASE(costly_values_used_through_views_are_stored_once) {
  auto stored = [](int chain, DType t, DType read_as) {
    Graph g;
    NodeId v = g.add_input(TensorMeta{t, Device::cpu(), SymShape{8, 64, 4}, {}}, "x");
    for (int i = 0; i < chain; ++i) v = g.add(OpId::exp, {v}, {});
    NodeId p = g.add(OpId::permute, {v}, {std::vector<int64_t>{0, 2, 1}});
    if (read_as != t) p = g.add(OpId::cast, {p}, {read_as});
    g.set_outputs({g.add(OpId::sub, {p, g.add(OpId::sum, {p}, {std::vector<int64_t>{2}, true})}, {})});
    const schedule::Schedule s = schedule::schedule_graph(g);
    std::vector<std::pair<SymShape, DType>> r;
    for (const schedule::Buffer& b : s.buffers)
      if (b.kind == schedule::BufferKind::intermediate) r.emplace_back(b.sizes, b.dtype);
    return r;
  };
  using Stored = std::vector<std::pair<SymShape, DType>>;
  const SymShape own{8, 64, 4};
  BOOST_TEST((stored(3, DType::f32, DType::f32) == Stored{{own, DType::f32}}));    // 3 exps cost 12 ops a use
  BOOST_TEST(stored(0, DType::f32, DType::f32).empty());                            // the input itself: nothing to store
  BOOST_TEST((stored(3, DType::bf16, DType::f32) == Stored{{own, DType::bf16}}));  // under the view and the cast
  // A narrowing cast is realized itself (the narrower value), here in the reduction's kernel.
  BOOST_TEST(stored(3, DType::f32, DType::bf16).empty());
}

// A channels-first net's layer norm permutes its input to channels-last, normalises, and permutes
// back for its readers (a depthwise convolution and a residual add): the value is stored in the
// readers' order, which is its input's, so that the readers' taps are read with unit stride
// along their fastest dim (the channels-last store made convnext's first depthwise convolution
// read 96 elements apart: 0.98 ms where the others took 0.21, on the H200). The input is in that
// order when it is stored so: a graph input, a gemm's product read through a reshape (an im2col
// patch embedding's [N, 1, C, H*W] as [N, C, H, W]), that plus a bias over the channels. A permute
// back that is not the inverse, or an input that is itself a permuted view, keeps the value in
// its own order.
BOOST_AUTO_TEST_CASE(values_read_through_an_undone_permute_are_stored_in_the_inputs_order) {
  enum class Source { input, gemm, gemm_plus_bias, permuted_input };
  // The node realized for the value the two readers share: "exp" (its own order) or "permute".
  auto realized = [](std::vector<int64_t> back, Source source) {
    Graph g;
    NodeId x;
    if (source == Source::input) {
      x = g.add_input(f32({2, 8, 6, 6}), "x");
    } else if (source == Source::permuted_input) {
      x = g.add(OpId::permute, {g.add_input(f32({2, 6, 6, 8}), "x")}, {std::vector<int64_t>{0, 3, 1, 2}});
    } else {
      const NodeId w = g.add_input(f32({1, 8, 5}), "w");
      const NodeId cols = g.add_input(f32({2, 1, 5, 36}), "cols");
      x = g.add(OpId::reshape, {g.add(OpId::matmul, {w, cols}, {})}, {std::vector<SymInt>{2, 8, 6, 6}});
      if (source == Source::gemm_plus_bias) x = g.add(OpId::add, {x, g.add_input(f32({8, 1, 1}), "bias")}, {});
    }
    NodeId v = g.add(OpId::permute, {x}, {std::vector<int64_t>{0, 2, 3, 1}});
    for (int i = 0; i < 3; ++i) v = g.add(OpId::exp, {v}, {});
    const NodeId p = g.add(OpId::permute, {v}, {back});
    g.set_outputs({g.add(OpId::sub, {p, g.add(OpId::sum, {p}, {std::vector<int64_t>{1}, true})}, {})});
    for (const std::string& d : schedule::schedule_graph(g).decisions)
      if (d.find("used 2 times") != std::string::npos) return d.substr(d.find('(') + 1, d.find(')') - d.find('(') - 1);
    return std::string("nothing");
  };
  for (Source s : {Source::input, Source::gemm, Source::gemm_plus_bias}) {
    BOOST_TEST(realized({0, 3, 1, 2}, s) == "permute");  // the input's order: x's own
    BOOST_TEST(realized({0, 3, 2, 1}, s) == "exp");      // not the inverse: the value's own order
  }
  BOOST_TEST(realized({0, 3, 1, 2}, Source::permuted_input) == "exp");  // x lies channels last
}

// A channels-last depthwise convolution reads its weight [C, 3, 3, 1] tap by tap along the
// channels, 9 elements apart as the weight lies: the permute to tap-major [9, C, 1] is stored (one
// small copy) so the taps' kernel reads each tap's weights side by side, as it reads x. A
// permuted weight that a matmul reads, or that a reader uses once per element, stays a view.
BOOST_AUTO_TEST_CASE(small_permuted_sources_are_stored_for_readers_that_reuse_them) {
  auto stored_permutes = [](const Graph& g) {
    std::vector<std::string> r;
    for (const std::string& d : schedule::schedule_graph(g).decisions)
      if (d.find("a small source permuted") != std::string::npos) r.push_back(d);
    return r;
  };
  using V = std::vector<int64_t>;
  {
    Graph g;
    const NodeId x = g.add_input(f32({2, 6, 6, 16}), "x");
    const NodeId w = g.add_input(f32({16, 3, 3, 1}), "w");
    g.set_outputs({g.add(OpId::convolution_channels_last, {x, w}, {V{1, 1}, V{1, 1, 1, 1}, V{1, 1}, int64_t{16}})});
    BOOST_TEST(stored_permutes(g).size() == 1u);
    const schedule::Schedule s = schedule::schedule_graph(g);
    bool copy = false;
    for (const schedule::Kernel& k : s.kernels) copy = copy || shape_str(k.domain) == "[9, 16, 1]" || shape_str(k.domain) == "[9, 16]";
    BOOST_TEST(copy, s.str());
  }
  {
    Graph g;  // a matmul reads the transposed weight in place
    const NodeId w = g.add_input(f32({16, 9}), "w");
    g.set_outputs({g.add(OpId::matmul, {g.add_input(f32({64, 9}), "x"), g.add(OpId::permute, {w}, {V{1, 0}})}, {})});
    BOOST_TEST(stored_permutes(g).empty());
  }
  {
    Graph g;  // each element read once: a copy first would only add one
    const NodeId w = g.add_input(f32({16, 9}), "w");
    g.set_outputs({g.add(OpId::exp, {g.add(OpId::permute, {w}, {V{1, 0}})}, {})});
    BOOST_TEST(stored_permutes(g).empty());
  }
  {
    Graph g;  // a permute that keeps the innermost dim in place reads it with unit stride already
    const NodeId w = g.add_input(f32({4, 9, 16}), "w");
    const NodeId p = g.add(OpId::permute, {w}, {V{1, 0, 2}});
    g.set_outputs({g.add(OpId::mul, {g.add_input(f32({64, 9, 4, 16}), "x"), p}, {})});
    BOOST_TEST(stored_permutes(g).empty());
  }
}

// A cat of several slices of one computed value (im2col's taps of a padded input) stores the
// value once and reads the slices through it, instead of storing each slice: one buffer, not
// one per tap. A slice reading little of a large value is stored alone.
BOOST_AUTO_TEST_CASE(cat_of_views_of_one_value_stores_the_value) {
  auto intermediates = [](int64_t width) {
    Graph g;
    const NodeId y = g.add(OpId::exp, {g.add_input(f32({2, width}), "x")}, {});
    std::vector<NodeId> taps;
    for (int64_t t = 0; t < 3; ++t) taps.push_back(g.add(OpId::slice, {y}, {int64_t{1}, t, t + 8, int64_t{1}}));
    g.set_outputs({g.add(OpId::cat, taps, {int64_t{0}})});
    const schedule::Schedule s = schedule::schedule_graph(g);
    std::vector<std::string> shapes;
    for (const schedule::Buffer& b : s.buffers)
      if (b.kind == schedule::BufferKind::intermediate) shapes.push_back(shape_str(b.sizes));
    return shapes;
  };
  BOOST_TEST(intermediates(10) == (std::vector<std::string>{shape_str(SymShape{SymInt(2), SymInt(10)})}),
             boost::test_tools::per_element());
  BOOST_TEST(intermediates(100).size() == 3u);  // 3 x 8 of 100 columns: each slice alone
}

BOOST_AUTO_TEST_CASE(single_pass_kernels_keep_nothing) {
  Graph g;
  const NodeId x = g.add_input(f32({16, 32}), "x");
  const NodeId e = g.add(OpId::exp, {x}, {});
  g.set_outputs({g.add(OpId::sum, {e}, {std::vector<int64_t>{1}, false}), g.add(OpId::tanh, {e}, {})});
  BOOST_TEST_MESSAGE(schedule::schedule_graph(g).str());
  for (const schedule::Kernel& k : schedule::schedule_graph(g).kernels)
    BOOST_TEST(schedule::values_reused_across_passes(k, 1).empty(), "kernel " << k.name);
}

BOOST_AUTO_TEST_SUITE_END()

// pad, cat and index_select with a constant index are loads that read only where they should
// (masked) or at a position read from the index (gathered), inside whatever kernel uses them.
BOOST_AUTO_TEST_SUITE(reading_at_other_positions)

namespace {
int count_loads(const schedule::Kernel& k, bool masked, bool gathered) {
  int n = 0;
  for (const schedule::Instr& in : k.instrs)
    if (in.kind == InstrKind::load && in.masked == masked && in.gathered == gathered) ++n;
  return n;
}
std::shared_ptr<const ConstantData> i64s(std::vector<int64_t> v) {
  auto c = std::make_shared<ConstantData>();
  c->dtype = DType::i64;
  c->sizes = {static_cast<int64_t>(v.size())};
  c->bytes.resize(v.size() * sizeof(int64_t));
  std::memcpy(c->bytes.data(), v.data(), c->bytes.size());
  return c;
}
}  // namespace

BOOST_AUTO_TEST_CASE(pad_and_cat_fuse_into_their_consumer) {
  Graph g;
  const NodeId a = g.add_input(f32({4, g.shapes().create_symbol(6, 2, 1 << 20, "s0", false)}), "a");
  const NodeId b = g.add_input(f32({4, 3}), "b");
  const NodeId c = g.add(OpId::cat, {a, b, a}, {int64_t{1}});
  const NodeId p = g.add(OpId::pad, {b}, {std::vector<int64_t>{1, 2, 0, 1}, 0.5});
  g.set_outputs({g.add(OpId::relu, {c}, {}), g.add(OpId::exp, {p}, {})});
  const schedule::Schedule s = schedule::schedule_graph(g);
  BOOST_REQUIRE_EQUAL(s.kernels.size(), 2u);
  for (const schedule::Kernel& k : s.kernels) BOOST_TEST((k.kind == schedule::KernelKind::pointwise), k.str());
  // relu(cat(a, b, a)): three loads, each masked to its part of the row.
  BOOST_TEST(count_loads(s.kernels[0], true, false) == 3, s.kernels[0].str());
  BOOST_TEST(count_loads(s.kernels[0], false, false) == 0);
  // exp(pad(b)): one masked load.
  BOOST_TEST(count_loads(s.kernels[1], true, false) == 1, s.kernels[1].str());
}

// A value computed in a kernel and reshaped by splitting its dims is read in place (each of its
// indices an affine sum of the reader's); a merge stores it.
BOOST_AUTO_TEST_CASE(a_computed_value_split_by_a_reshape_is_fused) {
  Graph g;
  const SymInt s0 = g.shapes().create_symbol(5, 2, 1 << 20, "s0", false);
  const NodeId x = g.add_input(f32({s0 * SymInt(3)}), "x");
  const NodeId y = g.add(OpId::reshape, {g.add(OpId::exp, {x})}, {SymShape{s0, 1, 3}});
  g.set_outputs({g.add(OpId::transpose, {g.add(OpId::neg, {y})}, {int64_t{0}, int64_t{2}})});
  const schedule::Kernel k = only_kernel(g);
  BOOST_TEST(count_loads(k, false, false) == 1, k.str());
  // rand(key): one kernel that loads the key alone (its counters are the flat iota, split).
  Graph r;
  const SymInt r0 = r.shapes().create_symbol(5, 2, 1 << 20, "s0", false);
  const NodeId key = r.add_input(TensorMeta{DType::i64, Device::cpu(), {}, {}}, "key");
  r.set_outputs({r.add(OpId::rand, {key}, {SymShape{r0, 3}, int64_t{1}, DType::f32})});
  const schedule::Kernel rk = only_kernel(r);
  BOOST_TEST(count_loads(rk, false, false) == 1, rk.str());
  Graph m;
  const NodeId a = m.add_input(f32({4, 6}), "a");
  m.set_outputs({m.add(OpId::neg, {m.add(OpId::reshape, {m.add(OpId::exp, {a})}, {SymShape{24}})})});
  BOOST_TEST(schedule::schedule_graph(m).kernels.size() == 2u);
}

BOOST_AUTO_TEST_CASE(a_computed_input_is_stored_first) {
  Graph g;
  const NodeId a = g.add_input(f32({4, 5}), "a");
  const NodeId e = g.add(OpId::exp, {a}, {});
  g.set_outputs({g.add(OpId::pad, {e}, {std::vector<int64_t>{1, 1}, 0.0})});
  const schedule::Schedule s = schedule::schedule_graph(g);
  BOOST_REQUIRE_EQUAL(s.kernels.size(), 2u);
  BOOST_TEST(count_loads(s.kernels[1], true, false) == 1, s.kernels[1].str());
}

// A slice's gradient: cat(zeros, dy, zeros), the zeros a `full` (here through an expand and
// a cast) that every such cat shares. The cat computes the zeros where it needs them: no kernel
// fills a buffer with them, and nothing reads one.
BOOST_AUTO_TEST_CASE(a_cat_computes_its_filled_inputs_in_place) {
  Graph g;
  const NodeId dy = g.add_input(f32({4, 3}), "dy");
  const NodeId dz = g.add_input(f32({4, 3}), "dz");
  const NodeId zeros = g.add(OpId::full, {}, {SymShape{SymInt(4), SymInt(3)}, 0.0, DType::f16});
  const NodeId wide = g.add(OpId::cast, {g.add(OpId::expand, {g.add(OpId::full, {}, {SymShape{SymInt(1), SymInt(2)}, 1.5, DType::f32})},
                                                {SymShape{SymInt(4), SymInt(2)}})},
                            {DType::f64});
  const NodeId z = g.add(OpId::cast, {zeros}, {DType::f32});
  g.set_outputs({g.add(OpId::cat, {z, dy, z}, {int64_t{1}}), g.add(OpId::cat, {dz, z, wide}, {int64_t{1}})});
  const schedule::Schedule s = schedule::schedule_graph(g);
  BOOST_REQUIRE_EQUAL(s.kernels.size(), 2u);
  for (const schedule::Kernel& k : s.kernels) {
    BOOST_TEST(count_loads(k, true, false) == 1, k.str());  // dy or dz, masked to its part
    BOOST_TEST(k.reads().size() == 1u, k.str());
  }
}

BOOST_AUTO_TEST_CASE(index_select_gathers_on_the_device_and_checks_run_time_indices) {
  struct Result {
    std::vector<std::string> kinds;
    std::vector<std::string> checks;
  };
  auto schedule = [](const std::vector<int64_t>& index, bool constant, bool symbolic_rows = false) {
    Graph g;
    const SymInt rows = symbolic_rows ? g.shapes().create_symbol(5, 2, 1 << 20, "s0", false) : SymInt(5);
    const NodeId x = g.add_input(TensorMeta{DType::f32, Device::cpu(), {rows, SymInt(3)}, {}}, "x");
    const NodeId i = constant ? g.add(OpId::constant, {}, {i64s(index)})
                              : g.add_input(TensorMeta{DType::i64, Device::cpu(), {SymInt(2)}, {}}, "i");
    g.set_outputs({g.add(OpId::neg, {g.add(OpId::index_select, {x, i}, {int64_t{0}})}, {})});
    const schedule::Schedule s = schedule::schedule_graph(g);
    Result r;
    for (const schedule::Kernel& k : s.kernels)
      r.kinds.emplace_back(std::string(schedule::kernel_kind_name(k.kind)) + (count_loads(k, false, true) ? "+gather" : ""));
    r.checks = s.checks;
    BOOST_TEST(s.outputs.size() == 1 + s.checks.size());
    return r;
  };
  // A constant index inside the dim: a plain gathering load.
  Result r = schedule({4, 0, 2}, true);
  BOOST_TEST(r.kinds == std::vector<std::string>{"pointwise+gather"}, boost::test_tools::per_element());
  BOOST_TEST(r.checks.empty());
  // Out of range, or known only when run: the load is clamped into the dim, and a check (a
  // reduction over the indices, one more output) counts the indices outside it.
  for (const Result& c : {schedule({4, 5}, true), schedule({-1}, true), schedule({}, false)}) {
    BOOST_TEST(c.kinds == (std::vector<std::string>{"pointwise+gather", "reduction"}), boost::test_tools::per_element());
    BOOST_REQUIRE_EQUAL(c.checks.size(), 1u);
    BOOST_TEST(c.checks[0].find("indices outside [0, 5), the size of dim 0") != std::string::npos, c.checks[0]);
  }
  // Along a symbolic dim the bound is not a constant: the reference kernel checks every index.
  r = schedule({}, false, true);
  BOOST_TEST(r.kinds == (std::vector<std::string>{"reference", "pointwise"}), boost::test_tools::per_element());
  BOOST_TEST(r.checks.empty());
}

// An index computed from an iota and clamped into the dim is inside it whatever runs: no check
// (which would make every call wait for its count), no clamp in the load. The same arithmetic
// unclamped, or over an input, is checked.
BOOST_AUTO_TEST_CASE(indices_the_graph_keeps_in_range_need_no_check) {
  auto checks = [](bool clamped, bool from_input) {
    Graph g;
    const NodeId x = g.add_input(TensorMeta{DType::f32, Device::cpu(), {SymInt(2), SymInt(7)}, {}}, "x");
    const NodeId p = from_input ? g.add_input(TensorMeta{DType::f32, Device::cpu(), {SymInt(12)}, {}}, "p")
                                : g.add(OpId::iota, {}, {SymShape{12}, int64_t{0}, DType::f32});
    auto k = [&](double v) { return g.add(OpId::full, {}, {SymShape{}, v, DType::f32}); };
    // floor((p + 1) / 2) - 1: [-1, 5]; clamped into [0, 6].
    NodeId q = g.add(OpId::sub, {g.add(OpId::floor, {g.add(OpId::div, {g.add(OpId::add, {p, k(1)}), k(2)})}), k(1)});
    if (clamped) q = g.add(OpId::minimum, {g.add(OpId::maximum, {q, k(0)}), k(6)});
    const NodeId i = g.add(OpId::cast, {q}, {DType::i64});
    g.set_outputs({g.add(OpId::index_select, {x, i}, {int64_t{1}})});
    return schedule::schedule_graph(g).checks.size();
  };
  BOOST_TEST(checks(true, false) == 0u);
  BOOST_TEST(checks(false, false) == 1u);
  BOOST_TEST(checks(true, true) == 1u);
}

// A target that convolves (CUDA's cuDNN) keeps the op as one kernel over whole contiguous
// buffers: a strided graph input is copied first, asymmetric pads become a pad before it, and
// the bias an add after it that joins the following pointwise kernel. Every other target sees
// the decomposition: the windows and a gemm.
BOOST_AUTO_TEST_CASE(convolutions_are_kernels_where_the_target_convolves) {
  auto schedule = [](bool convolves, bool strided_input, std::vector<int64_t> pads) {
    Graph g;
    const SymInt batch = g.shapes().create_symbol(2, 1, 1 << 20, "s0", false);
    TensorMeta xm{DType::f32, Device::cpu(), {batch, SymInt(4), SymInt(6), SymInt(6)}, {}};
    NodeId x = g.add_input(strided_input ? TensorMeta{DType::f32, Device::cpu(), {batch, SymInt(6), SymInt(6), SymInt(4)}, {}} : xm, "x");
    if (strided_input) x = g.add(OpId::permute, {x}, {std::vector<int64_t>{0, 3, 1, 2}});
    const NodeId w = g.add_input(TensorMeta{DType::f32, Device::cpu(), {SymInt(5), SymInt(4), SymInt(3), SymInt(3)}, {}}, "w");
    const NodeId b = g.add_input(TensorMeta{DType::f32, Device::cpu(), {SymInt(5)}, {}}, "b");
    const NodeId y = g.add(OpId::convolution, {x, w, b},
                           {std::vector<int64_t>{1, 1}, pads, std::vector<int64_t>{1, 1}, int64_t{1}});
    g.set_outputs({g.add(OpId::relu, {y}, {})});
    schedule::Target t;
    t.convolution = convolves;
    const schedule::Schedule s = schedule::schedule_graph(g, t);
    std::vector<std::string> kinds;
    for (const schedule::Kernel& k : s.kernels) {
      kinds.emplace_back(schedule::kernel_kind_name(k.kind));
      if (k.convolution) {
        BOOST_TEST(k.convolution->pads[0] == k.convolution->pads[2]);
        BOOST_TEST(k.convolution->pads[1] == k.convolution->pads[3]);
        BOOST_TEST(k.convolution->x_sizes[0].is_symbolic());
      }
    }
    return kinds;
  };
  using K = std::vector<std::string>;
  BOOST_TEST(schedule(true, false, {1, 1, 1, 1}) == (K{"convolution", "pointwise"}), boost::test_tools::per_element());
  BOOST_TEST(schedule(true, true, {1, 1, 1, 1}) == (K{"pointwise", "convolution", "pointwise"}), boost::test_tools::per_element());
  BOOST_TEST(schedule(true, false, {1, 1, 0, 0}) == (K{"pointwise", "convolution", "pointwise"}), boost::test_tools::per_element());
  const K decomposed = schedule(false, false, {1, 1, 1, 1});
  BOOST_TEST(std::count(decomposed.begin(), decomposed.end(), "convolution") == 0);
  BOOST_TEST(std::count(decomposed.begin(), decomposed.end(), "matmul") == 1);
}

// Even where the target convolves, three kinds decompose: a depthwise convolution is a sum over
// its taps that fuses with its epilogue into one kernel reading x in place (im2col would copy x
// once per tap), a 1x1 one of unit stride, no pads and one group is a gemm over x as it is, and
// one whose windows tile x (kernel = stride, no pads) over channels that are not a multiple of 8
// (a patch embedding over an image's 3) a gemm over x's patches. A strided 1x1 one stays the
// library's (its windows would be a copy), as do windows that overlap, leave gaps or reach into
// pads, and tiling windows over 8 or 16 channels (the library reads x once; the gemm would copy it)
// where the library runs f32 on tensor cores (Target::channels_last_f32); without them its f32
// kernels are FMA loops as the gemm's are, and those windows are a gemm too.
BOOST_AUTO_TEST_CASE(depthwise_and_pointwise_convolutions_decompose_where_the_target_convolves) {
  auto kinds_of = [](std::vector<int64_t> w_sizes, int64_t groups, std::vector<int64_t> strides, std::vector<int64_t> pads,
                     int64_t channels = 8, bool f32_tensor_cores = true) {
    Graph g;
    const NodeId x = g.add_input(TensorMeta{DType::f32, Device::cpu(), {SymInt(2), SymInt(channels), SymInt(10), SymInt(10)}, {}}, "x");
    SymShape ws;
    for (int64_t s : w_sizes) ws.push_back(SymInt(s));
    const NodeId w = g.add_input(TensorMeta{DType::f32, Device::cpu(), ws, {}}, "w");
    const NodeId y = g.add(OpId::convolution, {x, w}, {strides, pads, std::vector<int64_t>{1, 1}, groups});
    g.set_outputs({g.add(OpId::relu, {y}, {})});
    schedule::Target t;
    t.convolution = true;
    t.channels_last_f32 = f32_tensor_cores;
    std::vector<std::string> kinds;
    const schedule::Schedule s = schedule::schedule_graph(g, t);
    for (const schedule::Kernel& k : s.kernels) kinds.emplace_back(schedule::kernel_kind_name(k.kind));
    return kinds;
  };
  using K = std::vector<std::string>;
  BOOST_TEST(kinds_of({8, 1, 3, 3}, 8, {1, 1}, {1, 1, 1, 1}) == (K{"pointwise"}), boost::test_tools::per_element());
  BOOST_TEST(kinds_of({8, 1, 5, 5}, 8, {2, 2}, {2, 2, 2, 2}) == (K{"pointwise"}), boost::test_tools::per_element());
  // Two output channels per input channel: the sum's [N, C, 2, *O] is stored, then read as [N, 2C, *O].
  BOOST_TEST(kinds_of({16, 1, 5, 5}, 8, {2, 2}, {2, 2, 2, 2}) == (K{"pointwise", "pointwise"}), boost::test_tools::per_element());
  const K pointwise = kinds_of({12, 8, 1, 1}, 1, {1, 1}, {0, 0, 0, 0});
  BOOST_TEST(std::count(pointwise.begin(), pointwise.end(), "matmul") == 1);
  BOOST_TEST(std::count(pointwise.begin(), pointwise.end(), "convolution") == 0);
  BOOST_TEST(kinds_of({12, 8, 1, 1}, 1, {2, 2}, {0, 0, 0, 0}) == (K{"convolution", "pointwise"}), boost::test_tools::per_element());
  BOOST_TEST(kinds_of({8, 1, 11, 11}, 8, {1, 1}, {5, 5, 5, 5}) == (K{"convolution", "pointwise"}), boost::test_tools::per_element());
  for (const std::vector<int64_t>& tiling : {std::vector<int64_t>{12, 3, 2, 2}, std::vector<int64_t>{12, 3, 5, 2}}) {
    const K patches = kinds_of(tiling, 1, {tiling[2], tiling[3]}, {0, 0, 0, 0}, 3);
    BOOST_TEST(std::count(patches.begin(), patches.end(), "matmul") == 1);
    BOOST_TEST(std::count(patches.begin(), patches.end(), "convolution") == 0);
  }
  BOOST_TEST(kinds_of({12, 8, 2, 2}, 1, {2, 2}, {0, 0, 0, 0}) == (K{"convolution", "pointwise"}), boost::test_tools::per_element());
  const K fma = kinds_of({12, 8, 2, 2}, 1, {2, 2}, {0, 0, 0, 0}, 8, false);
  BOOST_TEST(std::count(fma.begin(), fma.end(), "matmul") == 1);
  BOOST_TEST(std::count(fma.begin(), fma.end(), "convolution") == 0);
  BOOST_TEST(kinds_of({12, 8, 3, 3}, 1, {2, 2}, {0, 0, 0, 0}, 8, false) == (K{"convolution", "pointwise"}), boost::test_tools::per_element());
  BOOST_TEST(kinds_of({12, 3, 2, 2}, 1, {2, 2}, {1, 1, 1, 1}, 3) == (K{"convolution", "pointwise"}), boost::test_tools::per_element());
  BOOST_TEST(kinds_of({12, 3, 3, 3}, 1, {2, 2}, {0, 0, 0, 0}, 3) == (K{"convolution", "pointwise"}), boost::test_tools::per_element());
  BOOST_TEST(kinds_of({12, 3, 2, 2}, 1, {3, 3}, {0, 0, 0, 0}, 3) == (K{"convolution", "pointwise"}), boost::test_tools::per_element());
  BOOST_TEST(kinds_of({12, 3, 2, 2}, 2, {2, 2}, {0, 0, 0, 0}, 6) == (K{"convolution", "pointwise"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()

// A chain of ops computed without storing is stored every Options::max_inline_depth ops, in
// realization and in fusion alike: walks over a kernel's values (lowering, every codegen) are as
// deep as that, not as the graph, and one kernel's code stays a size LLVM compiles in time.
BOOST_AUTO_TEST_SUITE(deep_graphs)

BOOST_AUTO_TEST_CASE(a_100k_op_chain_is_cut_every_max_inline_depth_ops) {
  Graph g;
  NodeId x = g.add_input(f32({64}), "x");
  const OpId ops[] = {OpId::tanh, OpId::sigmoid, OpId::neg, OpId::abs};
  constexpr int kOps = 100000;
  for (int i = 0; i < kOps; ++i) x = g.add(ops[i % 4], {x});
  g.set_outputs({x});
  const schedule::Schedule s = schedule::schedule_graph(g);
  const schedule::Options o;
  BOOST_TEST(static_cast<int64_t>(s.kernels.size()) >= kOps / o.max_inline_depth);
  size_t most = 0;
  for (const schedule::Kernel& k : s.kernels) most = std::max(most, k.instrs.size());
  // One load, at most max_inline_depth ops (each one instruction here).
  BOOST_TEST(static_cast<int64_t>(most) <= o.max_inline_depth + 1);
}

// A chain cut that lands on a view stores the value under it: a reshape that merges dims of a cat
// computed in the same kernel could not be lowered (argsort's network over 1000 elements hit it).
BOOST_AUTO_TEST_CASE(a_chain_cut_at_a_view_stores_what_it_views) {
  for (int64_t depth : {2, 3, 4, 5, 6}) {
    Graph g;
    NodeId x = g.add_input(f32({4, 6}), "x");
    for (int i = 0; i < 3; ++i) {
      const NodeId a = g.add(OpId::neg, {g.add(OpId::slice, {x}, {int64_t{1}, int64_t{0}, int64_t{3}, int64_t{1}})});
      const NodeId b = g.add(OpId::exp, {g.add(OpId::slice, {x}, {int64_t{1}, int64_t{3}, int64_t{6}, int64_t{1}})});
      const NodeId c = g.add(OpId::cat, {b, a}, {int64_t{0}});                           // [8, 3]
      x = g.add(OpId::reshape, {g.add(OpId::reshape, {c}, {SymShape{24}})}, {SymShape{4, 6}});  // merge, split
    }
    g.set_outputs({x});
    schedule::Options o;
    o.max_inline_depth = depth;
    BOOST_CHECK_NO_THROW(schedule::schedule_graph(g, o));
  }
}

BOOST_AUTO_TEST_CASE(fusion_does_not_join_realized_nodes_into_a_longer_chain) {
  // Every 10th op is used twice and costs over the recompute budget: realized. Fusion would join
  // them all into one kernel (the realized nodes are 100, max_fusion_size is 64 per kernel), but
  // no kernel may compute more than max_inline_depth = 32 ops on one path.
  Graph g;
  NodeId x = g.add_input(f32({64}), "x");
  for (int i = 0; i < 1000; ++i) {
    x = g.add(OpId::exp, {g.add(OpId::tanh, {x})});
    if (i % 10 == 9) x = g.add(OpId::add, {x, x});
  }
  g.set_outputs({x});
  schedule::Options o;
  o.max_inline_depth = 32;
  const schedule::Schedule s = schedule::schedule_graph(g, o);
  for (const schedule::Kernel& k : s.kernels) {
    // The longest chain of instructions in the kernel.
    std::vector<int64_t> depth(k.instrs.size(), 0);
    int64_t most = 0;
    for (size_t i = 0; i < k.instrs.size(); ++i) {
      for (int32_t a : k.instrs[i].args) depth[i] = std::max(depth[i], depth[static_cast<size_t>(a)]);
      depth[i] += k.instrs[i].kind == InstrKind::pointwise ? 1 : 0;
      most = std::max(most, depth[i]);
    }
    BOOST_TEST(most <= o.max_inline_depth, k.name << " computes " << most << " ops on one path");
  }
  BOOST_TEST(s.kernels.size() >= 2100u / 32u);
}

BOOST_AUTO_TEST_SUITE_END()
