// Row reductions over many short rows (cuda/codegen internal.h, row_geometry): the LLVM IR path
// packs rows of at most 512 elements into blocks, a power-of-two segment of a warp per row
// combined by shuffles among its lanes alone. Without a device the plans' launches and modules
// are checked; with one, every graph runs against the reference: row counts that leave the last
// block part empty, segments of 1 to 32 lanes, several reductions and the online softmax in one
// kernel, a symbolic row count (the grid-stride loop over rows), f32 and bf16.
#include <boost/test/unit_test.hpp>

#include <random>

#include "harness.h"
#include "kiln/config/config.h"
#include "op_cases.h"
#include "kiln_test_util.h"

using namespace kiln;
using kiln_test_util::contains;

namespace {

// Rows of x [rows, cols]: their sum, max and argmax, softmax and log_softmax, a layer norm with
// weight and bias.
// A symbolic row count has `rows` as its example.
Graph row_ops(DType t, int64_t example_rows, int64_t cols, bool symbolic = false) {
  Graph g;
  const SymInt rows = symbolic ? g.shapes().create_symbol(example_rows, 1, int64_t{1} << 30, "rows", false) : SymInt(example_rows);
  const NodeId x = g.add_input(TensorMeta{t, Device::cpu(), {rows, cols}, {}}, "x");
  const NodeId w = g.add_input(TensorMeta{t, Device::cpu(), {cols}, {}}, "w");
  const NodeId b = g.add_input(TensorMeta{t, Device::cpu(), {cols}, {}}, "b");
  const std::vector<int64_t> last{1};
  g.set_outputs({g.add(OpId::sum, {x}, {last, false}), g.add(OpId::max, {x}, {last, false}),
                 g.add(OpId::argmax, {x}, {last, false}), g.add(OpId::softmax, {x}, {int64_t{1}}),
                 g.add(OpId::log_softmax, {x}, {int64_t{1}}), g.add(OpId::layer_norm, {x, w, b}, {int64_t{1}, 1e-5})});
  return g;
}

// row_ops' outputs' tolerances: the op cases'.
std::vector<cpu_test::Tolerance> tolerances(DType t) {
  std::vector<cpu_test::Tolerance> tol;
  for (OpId op : {OpId::sum, OpId::max, OpId::argmax, OpId::softmax, OpId::log_softmax, OpId::layer_norm})
    tol.push_back(cpu_test::op_tolerance(op, op == OpId::argmax ? DType::i64 : t));
  return tol;
}

// A tensor of standard normal values.
TensorData random_tensor(DType t, const std::vector<int64_t>& sizes, std::mt19937_64& rng) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return cpu_test::tensor(t, sizes, cpu_test::random_values(t, n, cpu_test::Domain::normal, rng));
}

std::vector<TensorData> inputs(DType t, int64_t rows, int64_t cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return {random_tensor(t, {rows, cols}, rng), random_tensor(t, {cols}, rng), random_tensor(t, {cols}, rng)};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_rows)

BOOST_AUTO_TEST_CASE(short_rows_share_blocks_and_match_the_reference) {
  struct Shape {
    int64_t rows, cols;
    int64_t threads_per_row;  // row_geometry's: 16 elements a thread, 32 at most
  };
  // Rows of 5 take one lane each, 256 rows a block (33797 of them leave the last block part
  // empty); 24 and 96 take 2 and 8 lanes; 256 and 500 take 16 and 32; 513 takes a block of 128
  // threads (shared memory and barriers) as before.
  const std::vector<Shape> shapes = {{33797, 5, 1}, {9001, 24, 2}, {5003, 96, 8}, {4099, 256, 16}, {2051, 500, 32}, {300, 513, 128}};
  uint64_t seed = 1;
  for (DType t : {DType::f32, DType::bf16}) {
    for (const Shape& s : shapes) {
      const std::string what = std::string(dtype_name(t)) + " [" + std::to_string(s.rows) + ", " + std::to_string(s.cols) + "]";
      const cpu_test::Compiled c = cpu_test::compile(row_ops(t, s.rows, s.cols));
      BOOST_REQUIRE_MESSAGE(c.error.empty(), what << ": " << c.error);
      int rows_kernels = 0;
      for (const plan::PlanKernel& k : c.plan.kernels) {
        if (k.kind != "reduction" || k.language != "llvm") continue;
        ++rows_kernels;
        const int64_t per_row = k.launch.block / k.launch.items_per_block;
        BOOST_TEST(per_row == s.threads_per_row, what << ": " << k.name << " has " << per_row << " threads a row");
        // Segments combine with shuffles alone; whole blocks through shared memory. Every shape
        // here has rows enough that segments share blocks (of at most 256 threads); a long row
        // has a block of its own.
        BOOST_TEST(contains(k.source, "@llvm.nvvm.barrier0") == (per_row > 32), what << "\n" << k.source);
        BOOST_TEST((k.launch.items_per_block > 1) == (per_row <= 32), what << ": " << k.launch.items_per_block << " rows a block");
        BOOST_TEST(k.launch.block <= 256, what);
      }
      BOOST_TEST(rows_kernels >= 1, what << "\n" << c.plan.str());
      const std::string diff = cpu_test::run_and_compare(c, inputs(t, s.rows, s.cols, seed++), tolerances(t));
      BOOST_TEST(diff.empty(), what << ": " << diff);
    }
    // A symbolic row count: the blocks loop over the rows (a grid-stride loop), at the example
    // size and at sizes that fill no block.
    const cpu_test::Compiled c = cpu_test::compile(row_ops(t, 5003, 96, true));
    BOOST_REQUIRE_MESSAGE(c.error.empty(), c.error);
    for (int64_t rows : {5003, 1, 300, 70001}) {
      const std::string diff = cpu_test::run_and_compare(c, inputs(t, rows, 96, seed++), tolerances(t));
      BOOST_TEST(diff.empty(), dtype_name(t) << " [" << rows << " (symbolic), 96]: " << diff);
    }
  }
}

// Heavy rows: ConvNeXt's block (a 7x7 depthwise convolution, channels last, its taps computed
// in the layer norm's row kernel over the channels) after a strided stem and its norm, some 25
// loads an element (a weight vector and an input vector per tap and 4 channels: the weight is
// stored tap-major for the kernel). The row kernel matches the reference for channel counts that give segments of 4 to
// 32 lanes, f16 and bf16 (channels last: the layout that makes the taps and the norm one kernel).
BOOST_AUTO_TEST_CASE(depthwise_taps_in_a_norms_row_kernel_match_the_reference) {
  const config::Patch channels_last{{"cuda.channels_last", true}};
  using V = std::vector<int64_t>;
  uint64_t seed = 100;
  for (DType t : {DType::bf16, DType::f16}) {
    for (int64_t c : {64, 96, 192, 384}) {
      const int64_t n = 2, hw = 40;  // 3200 rows: segments share blocks
      Graph g;
      auto in = [&](std::vector<int64_t> sizes, const std::string& name) {
        std::vector<SymInt> s(sizes.begin(), sizes.end());
        return g.add_input(TensorMeta{t, Device::cpu(), s, {}}, name);
      };
      const NodeId x = in({n, 3, 4 * hw, 4 * hw}, "x");
      const NodeId stem = g.add(OpId::convolution, {x, in({c, 3, 4, 4}, "stem")}, {V{4, 4}, V{0, 0, 0, 0}, V{1, 1}, int64_t{1}});
      // The stem's norm over the channels (torchvision's LayerNorm2d), which the taps read.
      const NodeId stem_norm = g.add(OpId::permute, {g.add(OpId::layer_norm, {g.add(OpId::permute, {stem}, {V{0, 2, 3, 1}}), in({c}, "g0"), in({c}, "b0")},
                                                           {int64_t{1}, 1e-6})},
                                     {V{0, 3, 1, 2}});
      const NodeId dw = g.add(OpId::convolution, {stem_norm, in({c, 1, 7, 7}, "w")}, {V{1, 1}, V{3, 3, 3, 3}, V{1, 1}, c});
      g.set_outputs({g.add(OpId::layer_norm, {g.add(OpId::permute, {dw}, {V{0, 2, 3, 1}}), in({c}, "g"), in({c}, "b")}, {int64_t{1}, 1e-6})});
      const std::string what = std::string(dtype_name(t)) + " depthwise + norm over " + std::to_string(c) + " channels";
      const cpu_test::Compiled compiled = cpu_test::compile(g);
      BOOST_REQUIRE_MESSAGE(compiled.error.empty(), what << ": " << compiled.error);
      // The taps are in a row kernel: one whose module has a load of the input and of the weight
      // for each of the 49 taps at least.
      bool heavy = false;
      for (const plan::PlanKernel& k : compiled.plan.kernels) {
        if (k.kind != "reduction" || k.language != "llvm" || kiln_test_util::count_of(k.source, " = load ") < 2 * 49) continue;
        heavy = true;
        // Each vector is loaded just before its first use (a step's lanes and groups emitted
        // interleaved): loading all 49 taps' vectors ahead of the first product kept them all
        // live (255 registers and spills). At most an input and a weight vector for each of up to
        // 4 groups of channels come before it.
        const std::string ahead = k.source.substr(0, k.source.find(" = fmul "));
        const size_t vectors_ahead = kiln_test_util::count_of(ahead, "load <4 x");
        BOOST_TEST(vectors_ahead <= 8, what << ": " << vectors_ahead << " vectors loaded before the first product\n" << k.source);
        // Each vector is widened to f32 as a vector and its lanes taken from that: lanes taken
        // from the 16-bit vector and widened one by one made LLVM split the loads and join them
        // again, over half of the kernel's LLVM time.
        const std::string narrow_lane = t == DType::bf16 ? "extractelement <4 x i16>" : "extractelement <4 x half>";
        BOOST_TEST(kiln_test_util::count_of(k.source, narrow_lane) == 0u, what << ": lanes widened one by one\n" << k.source);
      }
      BOOST_TEST(heavy, what << "\n" << compiled.plan.str());
      std::mt19937_64 rng(seed++);
      std::vector<TensorData> values;
      for (const std::vector<int64_t>& sizes : std::vector<std::vector<int64_t>>{{n, 3, 4 * hw, 4 * hw}, {c, 3, 4, 4}, {c}, {c}, {c, 1, 7, 7}, {c}, {c}})
        values.push_back(random_tensor(t, sizes, rng));
      const std::string diff = cpu_test::run_and_compare(compiled, values, {cpu_test::op_tolerance(OpId::layer_norm, t)});
      BOOST_TEST(diff.empty(), what << ": " << diff);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
