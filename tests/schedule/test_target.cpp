// schedule::Target: what a target tells the scheduler. Full reductions split wider for GPUs;
// f16/bf16 matmuls keep their operands' dtype for GPUs (tensor cores) and go through f32 for the
// CPU; Target::cpu() (the default) schedules exactly as before.
#include <algorithm>
#include <functional>

#include <kiln/graph/graph.h>
#include <kiln/schedule/schedule.h>

#include <boost/test/unit_test.hpp>

using namespace kiln;
using schedule::KernelKind;

namespace {

TensorMeta meta(DType t, SymShape s) { return TensorMeta{t, Device::cpu(), std::move(s), {}}; }

Graph full_sum(int64_t n) {
  Graph g;
  const NodeId x = g.add_input(meta(DType::f32, {n}), "x");
  g.set_outputs({g.add(OpId::sum, {x}, {std::vector<int64_t>{}, false})});
  return g;
}

Graph matmul(DType a, DType b, int64_t m) {
  Graph g;
  const NodeId x = g.add_input(meta(a, {m, 32}), "x");
  const NodeId w = g.add_input(meta(b, {32, 16}), "w");
  g.set_outputs({g.add(OpId::matmul, {x, w}, {})});
  return g;
}

const schedule::Kernel& gemm_kernel(const schedule::Schedule& s) {
  for (const schedule::Kernel& k : s.kernels)
    if (k.gemm) return k;
  BOOST_FAIL("no gemm kernel in\n" << s.str());
  return s.kernels.front();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(target)

BOOST_AUTO_TEST_CASE(full_reductions_split_by_the_targets_factors) {
  const Graph g = full_sum(int64_t{1} << 26);
  const schedule::Schedule cpu = schedule::schedule_graph(g, schedule::Target::cpu());
  BOOST_REQUIRE_EQUAL(cpu.kernels.size(), 2u);
  BOOST_TEST(cpu.kernels[0].domain[0].hint() == 64);
  BOOST_TEST(cpu.kernels[1].domain[0].hint() == 64);
  const schedule::Schedule gpu = schedule::schedule_graph(g, schedule::Target::gpu());
  BOOST_REQUIRE_EQUAL(gpu.kernels.size(), 2u);
  BOOST_TEST(gpu.kernels[0].domain[0].hint() == 2048);  // partials
  BOOST_TEST(gpu.kernels[0].num_outer == 1);
  BOOST_TEST(gpu.kernels[1].domain[0].hint() == 2048);  // folded by one block
  // The default is the CPU's.
  BOOST_TEST(schedule::schedule_graph(g).kernels[0].domain[0].hint() == 64);

  // Slices stay at least min_split_chunk long: 2^17 elements on the GPU split 32 ways (4096 each).
  const schedule::Schedule small = schedule::schedule_graph(full_sum(int64_t{1} << 17), schedule::Target::gpu());
  BOOST_REQUIRE_EQUAL(small.kernels.size(), 2u);
  BOOST_TEST(small.kernels[0].domain[0].hint() == 32);
  // Too small to split, or no factor divides: one kernel.
  BOOST_TEST(schedule::schedule_graph(full_sum(1000), schedule::Target::gpu()).kernels.size() == 1u);
  BOOST_TEST(schedule::schedule_graph(full_sum(1000003), schedule::Target::gpu()).kernels.size() == 1u);
  schedule::Target none = schedule::Target::gpu();
  none.split_parts = {};
  BOOST_TEST(schedule::schedule_graph(full_sum(int64_t{1} << 20), none).kernels.size() == 1u);
}

// A reduction with few outputs over many rows (a batch norm's statistics over [N * H * W, C]
// channels last) splits its rows on the GPU: partials [parts, C], then a fold per output; a
// variance (two passes) splits pass by pass. The CPU keeps one kernel (its threads take the
// outputs); many outputs keep one kernel on the GPU too.
BOOST_AUTO_TEST_CASE(reductions_with_few_outputs_split_their_rows_on_the_gpu) {
  auto columns = [](OpId op, int64_t rows, int64_t channels) {
    Graph g;
    const NodeId x = g.add_input(meta(DType::f32, {rows, channels}), "x");
    Attrs a{std::vector<int64_t>{0}, false};
    if (op == OpId::var) a.values.push_back(int64_t{0});
    g.set_outputs({g.add(op, {x}, a)});
    return g;
  };
  const schedule::Schedule sum = schedule::schedule_graph(columns(OpId::sum, 200704, 256), schedule::Target::gpu());
  BOOST_REQUIRE_EQUAL(sum.kernels.size(), 2u);
  BOOST_TEST(sum.kernels[0].num_outer == 2);
  // The fewest parts that give 512 blocks of 32 columns: 64 (slices of 3136 rows).
  BOOST_TEST(sum.kernels[0].domain[0].hint() == 64);
  BOOST_TEST(sum.kernels[0].domain[1].hint() == 256);
  BOOST_TEST(sum.kernels[1].num_outer == 1);
  BOOST_TEST(sum.kernels[1].domain[0].hint() == 256);
  const schedule::Schedule var = schedule::schedule_graph(columns(OpId::var, 200704, 256), schedule::Target::gpu());
  BOOST_REQUIRE_EQUAL(var.kernels.size(), 4u);  // the mean's partials and fold, then the deviations'
  BOOST_TEST(var.kernels[1].stores.size() == 1u);
  BOOST_TEST(schedule::schedule_graph(columns(OpId::sum, 200704, 256), schedule::Target::cpu()).kernels.size() == 1u);
  // A longer reduction with more outputs: [12544, 1024] (a batch norm's statistics at 14 x 14)
  // takes 16 parts (16 * 1024 / 32 = 512 blocks).
  BOOST_TEST(schedule::schedule_graph(columns(OpId::sum, 12544, 1024), schedule::Target::gpu()).kernels[0].domain[0].hint() == 16);
  // Channels first, [C | N, H * W] (a block per output, 256): the batch dim splits 8 ways, the
  // fewest parts listed, each slice a loop over chunk x H * W.
  Graph cf;
  const NodeId x = cf.add_input(meta(DType::f32, {64, 256, 56, 56}), "x");
  cf.set_outputs({cf.add(OpId::sum, {x}, {std::vector<int64_t>{0, 2, 3}, false})});
  const schedule::Schedule first = schedule::schedule_graph(cf, schedule::Target::gpu());
  BOOST_REQUIRE_EQUAL(first.kernels.size(), 2u);
  BOOST_TEST(shape_str(first.kernels[0].domain) == "[8, 256, 8, 3136]");
  // Enough outputs to fill the GPU (16384 / 32 = 512 blocks): one kernel.
  BOOST_TEST(schedule::schedule_graph(columns(OpId::sum, 200704, 16384), schedule::Target::gpu()).kernels.size() == 1u);
  // x - mean(x, 0) over [rows, 256] (a batch norm's normalisation over a channels-last tensor):
  // the reduction runs [channels | rows], but the pointwise kernel after the fold stores the
  // rows x channels output in memory order (adjacent threads, adjacent elements).
  Graph norm;
  const NodeId y = norm.add_input(meta(DType::f32, {200704, 256}), "x");
  const NodeId mean = norm.add(OpId::mean, {y}, {std::vector<int64_t>{0}, true});
  norm.set_outputs({norm.add(OpId::sub, {y, mean})});
  const schedule::Schedule centred = schedule::schedule_graph(norm, schedule::Target::gpu());
  BOOST_REQUIRE_EQUAL(centred.kernels.size(), 3u);
  const schedule::Kernel& apply = centred.kernels.back();
  BOOST_TEST((apply.kind == schedule::KernelKind::pointwise));
  BOOST_TEST(shape_str(apply.domain) == "[200704, 256]");
  BOOST_REQUIRE_EQUAL(apply.stores.size(), 1u);
  BOOST_TEST(apply.stores[0].index.str() == "256*i0 + i1");
}

// A value stored beside the sum that reads it (an activation's gradient beside its bias
// gradient, sum(g, 0)) needs nothing of the sum: the split's partial kernel stores it as it
// reads it, no pointwise kernel after the fold reads the inputs again. A norm's weight gradient
// (sum over rows of dy * x * rstd, rstd one value per row) takes the column strategy though it
// reads rstd along the rows (one address for all the columns side by side), so its 768 columns
// split their rows too.
BOOST_AUTO_TEST_CASE(values_a_split_sum_does_not_need_are_stored_by_its_partials) {
  Graph g;
  const NodeId x = g.add_input(meta(DType::f32, {4096, 3072}), "x");
  const NodeId dy = g.add_input(meta(DType::f32, {4096, 3072}), "dy");
  const NodeId dx = g.add(OpId::mul, {dy, g.add(OpId::gelu, {x}, {std::string("tanh")})});
  g.set_outputs({dx, g.add(OpId::sum, {dx}, {std::vector<int64_t>{0}, false})});
  const schedule::Schedule s = schedule::schedule_graph(g, schedule::Target::gpu());
  BOOST_REQUIRE_MESSAGE(s.kernels.size() == 2u, s.str());
  BOOST_TEST(s.kernels[0].num_outer == 2);  // partials [8, 3072], and dx
  BOOST_TEST(s.kernels[0].stores.size() == 2u);
  BOOST_TEST(s.kernels[1].stores.size() == 1u);  // the fold
  for (const schedule::Kernel& k : s.kernels) BOOST_TEST((k.kind == KernelKind::reduction));

  Graph norm;
  const NodeId y = norm.add_input(meta(DType::f32, {4096, 768}), "dy");
  const NodeId xs = norm.add_input(meta(DType::f32, {4096, 768}), "x");
  const NodeId rstd = norm.add_input(meta(DType::f32, {4096, 1}), "rstd");
  const NodeId prod = norm.add(OpId::mul, {norm.add(OpId::mul, {y, xs}), rstd});
  norm.set_outputs({norm.add(OpId::sum, {prod}, {std::vector<int64_t>{0}, false})});
  const schedule::Schedule w = schedule::schedule_graph(norm, schedule::Target::gpu());
  BOOST_REQUIRE_MESSAGE(w.kernels.size() == 2u, w.str());
  BOOST_TEST(shape_str(w.kernels[0].domain) == "[32, 768, 128]");
}

// An attention whose mask hides every key after its query's row is marked causal (a kernel may
// skip the keys after a block's last row), however the mask is written: iotas compared, an
// additive mask at -inf or the dtype's lowest value, a constant. One that keeps a key after its
// row, a graph input, or a mask broadcast along the rows is not.
BOOST_AUTO_TEST_CASE(attention_masks_hiding_the_keys_after_each_row_are_causal) {
  constexpr int64_t L = 48;
  auto attention = [](const std::function<NodeId(Graph&)>& mask) {
    Graph g;
    auto in = [&](const char* name) { return g.add_input(meta(DType::bf16, {2, 3, L, 64}), name); };
    const NodeId q = in("q"), k = in("k"), v = in("v");
    g.set_outputs({g.add(OpId::scaled_dot_product_attention, {q, k, v, mask(g)}, {0.125})});
    schedule::Target t = schedule::Target::gpu();
    t.fused_attention = true;
    const schedule::Schedule s = schedule::schedule_graph(g, t);
    for (const schedule::Kernel& k : s.kernels)
      if (k.attention) return k.attention->causal;
    BOOST_FAIL("no attention kernel in\n" << s.str());
    return false;
  };
  auto iota = [](Graph& g, int64_t dim) { return g.add(OpId::iota, {}, {SymShape{L, L}, dim, DType::i64}); };
  auto keys_up_to_row = [&](Graph& g) { return g.add(OpId::le, {iota(g, 1), iota(g, 0)}); };
  BOOST_TEST(attention(keys_up_to_row));
  BOOST_TEST(attention([&](Graph& g) {  // additive, the lowest bf16 value
    return g.add(OpId::where, {keys_up_to_row(g), g.add(OpId::full, {}, {SymShape{}, 0.0, DType::bf16}),
                               g.add(OpId::full, {}, {SymShape{}, -3.3895313892515355e38, DType::bf16})});
  }));
  BOOST_TEST(attention([&](Graph& g) {  // a window: also hides keys before the row
    const NodeId after = g.add(OpId::add, {iota(g, 1), g.add(OpId::full, {}, {SymShape{}, 8.0, DType::i64})});
    return g.add(OpId::logical_and, {keys_up_to_row(g), g.add(OpId::gt, {after, iota(g, 0)})});
  }));
  BOOST_TEST(!attention([&](Graph& g) { return g.add(OpId::le, {iota(g, 0), iota(g, 1)}); }));  // keys from the row on
  BOOST_TEST(!attention([&](Graph& g) {  // keeps the next key too
    const NodeId next = g.add(OpId::add, {iota(g, 0), g.add(OpId::full, {}, {SymShape{}, 1.0, DType::i64})});
    return g.add(OpId::le, {iota(g, 1), next});
  }));
  BOOST_TEST(!attention([&](Graph& g) {  // additive, but -1e4: not masked enough to skip
    return g.add(OpId::where, {keys_up_to_row(g), g.add(OpId::full, {}, {SymShape{}, 0.0, DType::bf16}),
                               g.add(OpId::full, {}, {SymShape{}, -1e4, DType::bf16})});
  }));
  BOOST_TEST(!attention([&](Graph& g) {  // additive, its last rows masked everywhere: they weigh every key alike
    const NodeId window = g.add(OpId::logical_and, {keys_up_to_row(g), g.add(OpId::lt, {iota(g, 1), g.add(OpId::full, {}, {SymShape{}, 40.0, DType::i64})})});
    const NodeId in_window = g.add(OpId::logical_and, {window, g.add(OpId::lt, {iota(g, 0), g.add(OpId::full, {}, {SymShape{}, 40.0, DType::i64})})});
    return g.add(OpId::where, {in_window, g.add(OpId::full, {}, {SymShape{}, 0.0, DType::bf16}),
                               g.add(OpId::full, {}, {SymShape{}, -3.3895313892515355e38, DType::bf16})});
  }));
  BOOST_TEST(attention([&](Graph& g) {  // the same rows as a boolean mask: they keep none, 0 either way
    const NodeId window = g.add(OpId::logical_and, {keys_up_to_row(g), g.add(OpId::lt, {iota(g, 1), g.add(OpId::full, {}, {SymShape{}, 40.0, DType::i64})})});
    return g.add(OpId::logical_and, {window, g.add(OpId::lt, {iota(g, 0), g.add(OpId::full, {}, {SymShape{}, 40.0, DType::i64})})});
  }));
  BOOST_TEST(!attention([&](Graph& g) { return g.add_input(meta(DType::bool_, {L, L}), "mask"); }));
  BOOST_TEST(!attention([&](Graph& g) {  // one row for all: says nothing per row
    return g.add(OpId::le, {g.add(OpId::iota, {}, {SymShape{1, L}, int64_t{1}, DType::i64}), g.add(OpId::full, {}, {SymShape{}, 0.0, DType::i64})});
  }));
}

BOOST_AUTO_TEST_CASE(low_precision_gemms_keep_their_dtype_where_the_target_says) {
  for (DType t : {DType::bf16, DType::f16}) {
    const Graph g = matmul(t, t, 64);
    // CPU: f32 operands (cast kernels before), an f32 product, cast back in the epilogue.
    const schedule::Schedule cpu = schedule::schedule_graph(g, schedule::Target::cpu());
    BOOST_TEST((gemm_kernel(cpu).gemm->dtype == DType::f32), "gemm dtype");
    BOOST_TEST(cpu.kernels.size() > 1u);
    // GPU: the gemm multiplies the operands as they are, writing the output buffer directly.
    const schedule::Schedule gpu = schedule::schedule_graph(g, schedule::Target::gpu());
    BOOST_REQUIRE_EQUAL(gpu.kernels.size(), 1u);
    const schedule::Kernel& k = gemm_kernel(gpu);
    BOOST_TEST((k.gemm->dtype == t), dtype_name(t));
    BOOST_TEST((gpu.buffers[static_cast<size_t>(k.gemm->a)].dtype == t), "operand dtype");
    BOOST_TEST((gpu.buffers[static_cast<size_t>(k.gemm->c)].dtype == t), "product dtype");
    BOOST_TEST((gpu.buffers[static_cast<size_t>(k.gemm->c)].kind == schedule::BufferKind::output), "product is the output");
  }
  // Mixed operands multiply in the result's dtype: bf16 @ f32 is an f32 gemm on every target.
  const schedule::Schedule mixed = schedule::schedule_graph(matmul(DType::bf16, DType::f32, 64), schedule::Target::gpu());
  BOOST_TEST((gemm_kernel(mixed).gemm->dtype == DType::f32), "gemm dtype");
  // Integer products stay on the reference kernel.
  const schedule::Schedule ints = schedule::schedule_graph(matmul(DType::i32, DType::i32, 8), schedule::Target::gpu());
  BOOST_REQUIRE_EQUAL(ints.kernels.size(), 1u);
  BOOST_TEST((ints.kernels[0].kind == KernelKind::reference), "reference kernel");
}

// A linear layer over [batch, seq, d] (weights shared by every batch element) is one gemm of
// batch * seq rows, with its bias epilogue over [rows, n], and so is one of a permuted activation
// whose last dim stays (permuted after); where A's rows do not run on across the batch or B
// differs per batch element, the batch stays.
BOOST_AUTO_TEST_CASE(batches_that_share_the_weights_are_rows_of_one_gemm) {
  for (const schedule::Target& t : {schedule::Target::cpu(), schedule::Target::gpu()}) {
    Graph g;
    const NodeId x = g.add_input(meta(DType::f32, {4, 6, 32}), "x");
    const NodeId w = g.add_input(meta(DType::f32, {32, 16}), "w");
    const NodeId bias = g.add_input(meta(DType::f32, {16}), "bias");
    g.set_outputs({g.add(OpId::add, {g.add(OpId::matmul, {x, w}, {}), bias}, {})});
    const schedule::Schedule s = schedule::schedule_graph(g, t);
    const schedule::Kernel& k = gemm_kernel(s);
    BOOST_TEST(k.gemm->batch.empty(), s.str());
    BOOST_TEST(k.gemm->m.hint() == 24);
    BOOST_TEST((k.domain == SymShape{24, 16}), s.str());

    Graph p;  // x permuted ([6, 4, 32] of a [4, 6, 32]): x's own product, permuted after
    const NodeId px = p.add(OpId::permute, {p.add_input(meta(DType::f32, {4, 6, 32}), "x")}, {std::vector<int64_t>{1, 0, 2}});
    p.set_outputs({p.add(OpId::matmul, {px, p.add_input(meta(DType::f32, {32, 16}), "w")}, {})});
    const schedule::Schedule ps = schedule::schedule_graph(p, t);
    BOOST_TEST(gemm_kernel(ps).gemm->batch.empty(), ps.str());
    BOOST_TEST(gemm_kernel(ps).gemm->m.hint() == 24);

    Graph q;  // a permute moving the last dim: the batch stays
    const NodeId qx = q.add(OpId::permute, {q.add_input(meta(DType::f32, {4, 32, 6}), "x")}, {std::vector<int64_t>{0, 2, 1}});
    q.set_outputs({q.add(OpId::matmul, {qx, q.add_input(meta(DType::f32, {32, 16}), "w")}, {})});
    const schedule::Schedule qs = schedule::schedule_graph(q, t);
    BOOST_TEST(gemm_kernel(qs).gemm->batch.size() == 1u, qs.str());

    Graph b;  // a batched matmul: B differs per batch element
    b.set_outputs({b.add(OpId::matmul, {b.add_input(meta(DType::f32, {4, 6, 32}), "x"), b.add_input(meta(DType::f32, {4, 32, 16}), "y")}, {})});
    const schedule::Schedule bs = schedule::schedule_graph(b, t);
    BOOST_TEST(gemm_kernel(bs).gemm->batch.size() == 1u, bs.str());
    BOOST_TEST(gemm_kernel(bs).gemm->m.hint() == 6);
  }
}

// Attention's products read q, k and v as [B, H, S, D] views of [B, S, H, D] values: batch
// dims of no common stride. A GPU target (one batch stride per gemm operand) copies such an
// operand contiguous first; the CPU reads it in place.
BOOST_AUTO_TEST_CASE(gpu_gemms_copy_operands_whose_batch_dims_share_no_stride) {
  auto product = [](const schedule::Target& t) {
    Graph g;
    const std::vector<int64_t> heads_first{0, 2, 1, 3};
    const NodeId q = g.add(OpId::permute, {g.add_input(meta(DType::f32, {2, 5, 3, 8}), "q")}, {heads_first});
    const NodeId k = g.add(OpId::permute, {g.add_input(meta(DType::f32, {2, 5, 3, 8}), "k")}, {std::vector<int64_t>{0, 2, 3, 1}});
    g.set_outputs({g.add(OpId::matmul, {q, k}, {})});
    return schedule::schedule_graph(g, t);
  };
  const schedule::Schedule gpu = product(schedule::Target::gpu());
  const schedule::Gemm& gg = *gemm_kernel(gpu).gemm;
  BOOST_REQUIRE(gg.batch.size() == 2u);
  BOOST_TEST((gg.a_batch_strides[0] == gg.a_batch_strides[1] * 3), gpu.str());
  BOOST_TEST((gg.b_batch_strides[0] == gg.b_batch_strides[1] * 3), gpu.str());
  BOOST_TEST(gpu.kernels.size() > 1u, gpu.str());  // the copies
  // k^T is copied as the rows of k it reads, [2, 3, 5, 8] (unit strides on both sides of the
  // copy), and the gemm takes the copy transposed.
  BOOST_TEST((gg.b_row_stride == 1), gpu.str());
  BOOST_TEST((gg.b_col_stride == 8), gpu.str());
  const schedule::Schedule cpu = product(schedule::Target::cpu());
  const schedule::Gemm& cg = *gemm_kernel(cpu).gemm;
  BOOST_TEST(!(cg.a_batch_strides[0] == cg.a_batch_strides[1] * 3), cpu.str());  // read in place

  // An operand two products read (an attention backward's dO, in dO V^T and P^T dO) is
  // copied once: one copy kernel storing one buffer, two gemms.
  Graph g;
  const NodeId d = g.add(OpId::permute, {g.add_input(meta(DType::f32, {2, 5, 3, 8}), "dO")}, {std::vector<int64_t>{0, 2, 1, 3}});
  const NodeId v = g.add_input(meta(DType::f32, {2, 3, 8, 5}), "vT");
  const NodeId p = g.add_input(meta(DType::f32, {2, 3, 5, 5}), "pT");
  g.set_outputs({g.add(OpId::matmul, {d, v}, {}), g.add(OpId::matmul, {p, d}, {})});
  const schedule::Schedule two = schedule::schedule_graph(g, schedule::Target::gpu());
  BOOST_REQUIRE_MESSAGE(two.kernels.size() == 3u, two.str());
  BOOST_TEST(two.kernels[0].stores.size() == 1u, two.str());
}

// A 2x2 patch embedding channels last (ConvNeXt's downsampling as a gemm): x's windows, a
// permute merged into [N, OH, OW, 4 * C] rows that no strides express, are stored once by the
// fusion (the merge's input) and the gemm reads them as they lie: no second copy for the GPU's
// one batch stride.
BOOST_AUTO_TEST_CASE(gpu_gemms_read_merged_windows_where_the_fusion_stores_them) {
  Graph g;
  const NodeId x = g.add(OpId::exp, {g.add_input(meta(DType::f32, {2, 6, 6, 4}), "x")}, {});
  const NodeId split = g.add(OpId::reshape, {x}, {std::vector<SymInt>{2, 3, 2, 3, 2, 4}});
  const NodeId windows = g.add(OpId::permute, {split}, {std::vector<int64_t>{0, 1, 3, 2, 4, 5}});
  const NodeId rows = g.add(OpId::reshape, {windows}, {std::vector<SymInt>{2, 3, 3, 16}});
  g.set_outputs({g.add(OpId::matmul, {rows, g.add_input(meta(DType::f32, {16, 8}), "w")}, {})});
  const schedule::Schedule s = schedule::schedule_graph(g, schedule::Target::gpu());
  BOOST_TEST(s.kernels.size() == 2u, s.str());  // the windows (with exp), the gemm
  int64_t intermediate = 0;
  for (const schedule::Buffer& b : s.buffers)
    if (b.kind == schedule::BufferKind::intermediate) ++intermediate;
  BOOST_TEST(intermediate == 1, s.str());
}

// A large product whose K or N leaves rows unaligned for the target's gemm
// (Target::gemm_row_alignment) multiplies operands padded with zeros to aligned sizes, and its
// result is sliced back; f32 products, small ones, targets that do not ask, and aligned ones stay
// as they are. (The op cases, tests/cpu_target/op_cases.cpp "unaligned rows", check the values on CUDA.)
BOOST_AUTO_TEST_CASE(products_with_unaligned_rows_are_padded) {
  auto product = [](DType t, int64_t m, int64_t k, int64_t n) {
    Graph g;
    const NodeId x = g.add_input(meta(t, {2, m, k}), "x");
    const NodeId w = g.add_input(meta(t, {k, n}), "w");
    g.set_outputs({g.add(OpId::matmul, {x, w}, {})});
    return g;
  };
  schedule::Target aligned = schedule::Target::gpu();
  aligned.gemm_row_alignment = 16;
  // f32 products are left as they are (padding them was slower, docs/cuda.md).
  BOOST_TEST(gemm_kernel(schedule::schedule_graph(product(DType::f32, 96, 100, 1001), aligned)).gemm->n.hint() == 1001);
  for (DType t : {DType::bf16, DType::f16}) {
    const schedule::Schedule s = schedule::schedule_graph(product(t, 96, 100, 1001), aligned);
    const schedule::Gemm& gemm = *gemm_kernel(s).gemm;
    const int64_t align = 16 / dtype_size(t);  // 8 elements
    BOOST_TEST(gemm.k.hint() == (100 + align - 1) / align * align, s.str());
    BOOST_TEST(gemm.n.hint() == (1001 + align - 1) / align * align, s.str());
    BOOST_TEST(gemm.m.hint() == 192);
    // The output keeps the graph's sizes.
    const schedule::Buffer& out = s.buffers[static_cast<size_t>(s.outputs[0])];
    BOOST_TEST((out.sizes == SymShape{2, 96, 1001}), s.str());
    // Unpadded: the other targets, a small product, aligned sizes.
    BOOST_TEST(gemm_kernel(schedule::schedule_graph(product(t, 96, 100, 1001), schedule::Target::gpu())).gemm->n.hint() == 1001);
    BOOST_TEST(gemm_kernel(schedule::schedule_graph(product(t, 8, 100, 1001), aligned)).gemm->n.hint() == 1001);
    const schedule::Schedule even = schedule::schedule_graph(product(t, 96, 128, 1024), aligned);
    BOOST_TEST(gemm_kernel(even).gemm->n.hint() == 1024);
    BOOST_TEST(even.kernels.size() == 1u, even.str());
  }
}

// Operands that view one value are padded once, beneath their views and casts: a tied weight
// read as cast(e^T) by a product and as its transpose by another, and a gradient read as it is
// and reshaped (GPT-2's vocabulary path: four pads and a transposed cast kernel before).
BOOST_AUTO_TEST_CASE(operands_viewing_one_value_share_its_pad) {
  Graph g;
  const NodeId x = g.add_input(meta(DType::bf16, {2, 96, 128}), "x");
  const NodeId e = g.add_input(meta(DType::f32, {1001, 128}), "e");
  const NodeId w = g.add(OpId::cast, {g.add(OpId::transpose, {e}, {int64_t{0}, int64_t{1}})}, Attrs{DType::bf16});
  const NodeId logits = g.add(OpId::matmul, {x, w});
  const NodeId dl = g.add(OpId::tanh, {logits});
  const NodeId dx = g.add(OpId::matmul, {dl, g.add(OpId::transpose, {w}, {int64_t{0}, int64_t{1}})});
  const NodeId rows = g.add(OpId::transpose, {g.add(OpId::reshape, {x}, {SymShape{192, 128}})}, {int64_t{0}, int64_t{1}});
  const NodeId dw = g.add(OpId::matmul, {rows, g.add(OpId::reshape, {dl}, {SymShape{192, 1001}})});
  g.set_outputs({logits, dx, dw});
  schedule::Target aligned = schedule::Target::gpu();
  aligned.gemm_row_alignment = 16;
  const schedule::Schedule s = schedule::schedule_graph(g, aligned);
  std::vector<SymShape> pads;
  for (const Node& n : s.graph.nodes()) {
    if (n.op == OpId::pad) pads.push_back(n.meta.sizes);
    // The weight is cast after its pad, in e's own order: no cast reads it transposed.
    if (n.op == OpId::cast) BOOST_TEST((s.graph.node(n.inputs[0]).op != OpId::permute), s.str());
  }
  BOOST_TEST(pads.size() == 2u, s.str());
  BOOST_TEST((std::count(pads.begin(), pads.end(), SymShape{1008, 128}) == 1), s.str());
  BOOST_TEST((std::count(pads.begin(), pads.end(), SymShape{2, 96, 1008}) == 1), s.str());
  size_t gemms = 0;
  for (const schedule::Kernel& k : s.kernels) gemms += k.gemm ? 1 : 0;
  BOOST_TEST(gemms == 3u, s.str());
}

// Siblings over one domain that share an input fuse horizontally (an optimizer's update of
// many same-sized parameters by one learning rate), but never into a kernel binding more buffers
// than the target allows (Vulkan's storage buffers per shader: lavapipe's 32).
BOOST_AUTO_TEST_CASE(kernels_bind_no_more_buffers_than_the_target_allows) {
  Graph g;
  const NodeId rate = g.add_input(meta(DType::f32, {}), "lr");
  std::vector<NodeId> outs;
  for (int i = 0; i < 12; ++i) {
    const NodeId p = g.add_input(meta(DType::f32, {64}), "p" + std::to_string(i));
    const NodeId d = g.add_input(meta(DType::f32, {64}), "g" + std::to_string(i));
    outs.push_back(g.add(OpId::sub, {p, g.add(OpId::mul, {d, rate})}));
  }
  g.set_outputs(outs);
  auto widest = [](const schedule::Schedule& s) {
    size_t most = 0;
    for (const schedule::Kernel& k : s.kernels) {
      std::vector<int32_t> b = k.reads();
      const std::vector<int32_t> w = k.writes();
      b.insert(b.end(), w.begin(), w.end());
      std::sort(b.begin(), b.end());
      most = std::max<size_t>(most, static_cast<size_t>(std::unique(b.begin(), b.end()) - b.begin()));
    }
    return most;
  };
  const schedule::Schedule any = schedule::schedule_graph(g, schedule::Target::gpu());
  BOOST_TEST(any.kernels.size() == 1u, any.str());  // 12 * 3 + 1 = 37 buffers in one kernel
  BOOST_TEST(widest(any) == 37u);
  schedule::Target limited = schedule::Target::gpu();
  limited.max_kernel_buffers = 16;
  const schedule::Schedule s = schedule::schedule_graph(g, limited);
  BOOST_TEST(widest(s) <= 16u, s.str());
  BOOST_TEST(s.kernels.size() >= 3u);
}

BOOST_AUTO_TEST_SUITE_END()

// A batch dim of size 1 (a 1x1 convolution's input gradient as [N, groups = 1] products with
// the weight broadcast over N) goes, whatever its strides: one strided batch of N products, not
// N calls of one (the CUDA runtime loops over all batch dims but the last).
BOOST_AUTO_TEST_CASE(batch_dims_of_size_one_leave_the_gemm) {
  schedule::Gemm g;
  g.m = 256, g.n = 196, g.k = 1024;
  g.batch = {64, 1};
  g.a_batch_strides = {0, 262144};      // the weight: the same for every image; its group dim
  g.b_batch_strides = {200704, 200704};  // gy per image; the size-1 group dim at any stride
  g.merge_batch_dims();
  BOOST_TEST(g.batch.size() == 1u);
  BOOST_TEST(g.batch[0].hint() == 64);
  BOOST_TEST(g.a_batch_strides[0].hint() == 0);
  BOOST_TEST(g.b_batch_strides[0].hint() == 200704);
  // Dims that step at one stride still merge; others stay.
  schedule::Gemm h;
  h.m = h.n = h.k = 8;
  h.batch = {3, 1, 4};
  h.a_batch_strides = {256, 7, 64};
  h.b_batch_strides = {0, 5, 0};
  h.merge_batch_dims();
  BOOST_TEST(h.batch.size() == 1u);
  BOOST_TEST(h.batch[0].hint() == 12);
  h.batch = {3, 4};
  h.a_batch_strides = {100, 64};
  h.b_batch_strides = {0, 0};
  h.merge_batch_dims();
  BOOST_TEST(h.batch.size() == 2u);
}
