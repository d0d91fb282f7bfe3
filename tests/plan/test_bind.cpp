// plan::validate and plan::bind on real plans: the cpu codegen's plan of a sample graph and of a
// graph with a size symbol, the CUDA codegen's plan of a matmul (a gemm), and copies of them
// edited the way a hand-edited or corrupt plan file would be. Every malformed plan must give a
// kiln::Error that names what is wrong; a correct one binds to the right sizes.
#include <boost/test/unit_test.hpp>
#include <limits>
#include <tuple>

#include "kiln/cpu/codegen.h"
#include "kiln/cuda/codegen.h"
#include "kiln/format/graph_json.h"
#include "kiln/plan/bind.h"
#include "kiln/plan/plan_json.h"
#include "kiln_test_util.h"

using namespace kiln;
using kiln_test_util::contains;
using kiln_test_util::error_of;

namespace {

// x: f32[s0, 64] (s0 dynamic, example 8) -> softmax over dim 1 (kept in an intermediate buffer),
// then its column sums, f32[64]; and x + 1.
Graph dynamic_graph() {
  Graph g;
  const SymInt s0 = g.shapes().create_symbol(8, 2, int64_t{1} << 20, "input 0 (x) dim 0", true);
  const NodeId x = g.add_input(TensorMeta{DType::f32, Device::cpu(), {s0, 64}, {}}, "x");
  const NodeId sm = g.add(OpId::softmax, {x}, {int64_t{1}});
  const NodeId one = g.add(OpId::full, {}, {SymShape{}, 1.0, DType::f32});
  g.set_outputs({g.add(OpId::sum, {sm}, {std::vector<int64_t>{0}, false}), g.add(OpId::add, {x, one})});
  return g;
}

plan::KernelPlan sample_plan(const char* name) {
  return cpu::generate_plan(format::load_graph(std::string(KILN_SAMPLE_GRAPHS_DIR) + "/" + name));
}

// a: f32[64, 32] @ b: f32[32, 16] on the CUDA target: one kernel running a gemm.
plan::KernelPlan gemm_plan() {
  Graph g;
  const NodeId a = g.add_input(TensorMeta{DType::f32, Device::cuda(0), {64, 32}, {}}, "a");
  const NodeId b = g.add_input(TensorMeta{DType::f32, Device::cuda(0), {32, 16}, {}}, "b");
  g.set_outputs({g.add(OpId::matmul, {a, b})});
  return cuda::generate_plan(g);
}

TensorData host(DType t, std::vector<int64_t> sizes) { return TensorData::empty_host(t, sizes); }

// Random-free inputs of the plan's input types, at symbol values `syms`.
std::vector<TensorData> inputs_of(const plan::KernelPlan& p, const std::vector<int64_t>& syms = {}) {
  std::vector<TensorData> in;
  for (int32_t id : plan::input_buffers(p)) {
    const plan::PlanBuffer& b = p.buffers[static_cast<size_t>(id)];
    std::vector<int64_t> sizes;
    for (const SymInt& s : b.sizes) sizes.push_back(s.evaluate(syms));
    in.push_back(host(b.dtype, sizes));
  }
  return in;
}

// The first intermediate buffer of `p` (the test plans have one).
const plan::PlanBuffer& first_intermediate(const plan::KernelPlan& p) {
  for (const plan::PlanBuffer& b : p.buffers)
    if (b.kind == "intermediate") return b;
  BOOST_FAIL("the plan has no intermediate buffer");
  return p.buffers.front();
}

std::string bind_error(const plan::KernelPlan& p, const std::vector<TensorData>& in) {
  return error_of([&] { plan::bind(p, in, "test runtime"); });
}
std::string validate_error(const plan::KernelPlan& p) {
  return error_of([&] { plan::validate(p, "test plan"); });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(plan_bind)

// The CUDA library call of x[4, 6, 32] @ w[32, 16] is one gemm of 24 rows even where the
// kernel's epilogue (adding a [6, 4, 16] tensor read transposed) keeps its [4, 6, 16] domain;
// with a batch of B matrices it stays batched. Both plans validate.
// A product over [2, 3] batches of contiguous operands is one strided-batched call of 6.
BOOST_AUTO_TEST_CASE(a_gpu_gemm_merges_batch_dims_of_one_stride) {
  Graph g;
  const NodeId x = g.add_input(TensorMeta{DType::f32, Device::cuda(0), {2, 3, 5, 8}, {}}, "x");
  const NodeId y = g.add_input(TensorMeta{DType::f32, Device::cuda(0), {2, 3, 8, 4}, {}}, "y");
  g.set_outputs({g.add(OpId::matmul, {x, y})});
  const plan::KernelPlan p = cuda::generate_plan(g);
  BOOST_REQUIRE(p.kernels.size() == 1u);
  BOOST_REQUIRE(p.kernels[0].gemm.has_value());
  BOOST_TEST((p.kernels[0].gemm->batch == SymShape{6}));
  BOOST_TEST((p.kernels[0].gemm->a_batch_strides == SymShape{40}));
  BOOST_TEST((p.kernels[0].gemm->b_batch_strides == SymShape{32}));
  BOOST_CHECK_NO_THROW(plan::validate(p, "gemm plan"));
}

BOOST_AUTO_TEST_CASE(a_gpu_gemm_folds_shared_weight_batches_into_rows) {
  auto plan_of = [](SymShape w_sizes) {
    Graph g;
    const NodeId x = g.add_input(TensorMeta{DType::f32, Device::cuda(0), {4, 6, 32}, {}}, "x");
    const NodeId w = g.add_input(TensorMeta{DType::f32, Device::cuda(0), w_sizes, {}}, "w");
    const NodeId r = g.add_input(TensorMeta{DType::f32, Device::cuda(0), {6, 4, 16}, {}}, "r");
    const NodeId rt = g.add(OpId::permute, {r}, {std::vector<int64_t>{1, 0, 2}});
    g.set_outputs({g.add(OpId::add, {g.add(OpId::matmul, {x, w}), rt})});
    return cuda::generate_plan(g);
  };
  for (const auto& [w, rows, batches] : {std::tuple{SymShape{32, 16}, 24, 0}, std::tuple{SymShape{4, 32, 16}, 6, 1}}) {
    const plan::KernelPlan p = plan_of(w);
    const plan::PlanKernel* k = nullptr;
    for (const plan::PlanKernel& pk : p.kernels)
      if (pk.gemm) k = &pk;
    BOOST_REQUIRE(k != nullptr);
    BOOST_TEST(k->gemm->m.hint() == rows);
    BOOST_TEST(k->gemm->batch.size() == static_cast<size_t>(batches));
    BOOST_TEST(!k->source.empty());  // the epilogue kernel
    BOOST_CHECK_NO_THROW(plan::validate(p, "gemm plan"));
  }
}

BOOST_AUTO_TEST_CASE(a_correct_plan_binds_to_its_sizes) {
  const plan::KernelPlan p = cpu::generate_plan(dynamic_graph());
  BOOST_CHECK_NO_THROW(plan::validate(p, "test plan"));
  // The JSON reader validates too, and the plan survives the round trip.
  BOOST_CHECK_NO_THROW(plan::validate(plan::plan_from_json(plan::plan_to_json(p), "p.json"), "test plan"));
  BOOST_REQUIRE_EQUAL(p.symbols.size(), 1u);
  for (int64_t s0 : {int64_t{2}, int64_t{5}, int64_t{1000}}) {
    const std::vector<TensorData> in = {host(DType::f32, {s0, 64})};
    const plan::Binding b = plan::bind(p, in, "test runtime");
    BOOST_TEST(b.symbols() == std::vector<int64_t>{s0});
    BOOST_TEST(b.copy_input == std::vector<bool>{false});
    BOOST_REQUIRE_EQUAL(b.slot_bytes().size(), p.slots.size());
    for (size_t s = 0; s < p.slots.size(); ++s) BOOST_TEST(b.slot_bytes()[s] == p.slots[s].evaluate(b.symbols()));
    // The outputs: f32[64] and f32[s0, 64].
    BOOST_TEST(b.buffer_bytes()[static_cast<size_t>(p.outputs[0])] == 4 * 64);
    BOOST_TEST(b.buffer_bytes()[static_cast<size_t>(p.outputs[1])] == 4 * s0 * 64);
    BOOST_REQUIRE_EQUAL(b.extents().size(), p.kernels.size());
    for (size_t k = 0; k < p.kernels.size(); ++k) BOOST_TEST(b.extents()[k] == p.kernels[k].parallel_extent.evaluate(b.symbols()));
  }
  // A transposed input binds too, as one to copy contiguously.
  TensorData t = host(DType::f32, {64, 6});
  t.sizes = {6, 64};
  t.strides = {1, 6};
  const std::vector<TensorData> in = {t};
  BOOST_TEST(plan::bind(p, in, "test runtime").copy_input == std::vector<bool>{true});
  // Every sample plan validates and binds.
  for (const char* name : {"mlp.json", "transformer_block.json", "layernorm.json"}) {
    const plan::KernelPlan s = sample_plan(name);
    BOOST_CHECK_NO_THROW(plan::validate(s, name));
    BOOST_CHECK_NO_THROW(plan::bind(s, inputs_of(s), name));
  }
  const plan::KernelPlan g = gemm_plan();
  BOOST_CHECK_NO_THROW(plan::validate(g, "gemm"));
  BOOST_CHECK_NO_THROW(plan::bind(g, inputs_of(g), "gemm"));
}

// A runtime's Binder evaluates the plan's sizes once per symbol values: a call at the sizes of
// the one before shares them, a call at other sizes gets its own (and correct) ones, and a call
// a check refuses leaves the kept sizes as they were.
BOOST_AUTO_TEST_CASE(a_binder_keeps_the_sizes_of_the_last_symbols) {
  const plan::KernelPlan p = cpu::generate_plan(dynamic_graph());
  const plan::Binder binder(p, "test runtime");
  const std::vector<TensorData> at5 = {host(DType::f32, {5, 64})}, at7 = {host(DType::f32, {7, 64})};
  const plan::Binding a = binder.bind(at5), b = binder.bind(at5);
  BOOST_TEST(a.at.get() == b.at.get());
  const plan::Binding c = binder.bind(at7);
  BOOST_TEST(c.at.get() != a.at.get());
  BOOST_TEST(c.symbols() == std::vector<int64_t>{7});
  BOOST_TEST(c.buffer_bytes()[static_cast<size_t>(p.outputs[1])] == 4 * 7 * 64);
  BOOST_TEST(a.buffer_bytes()[static_cast<size_t>(p.outputs[1])] == 4 * 5 * 64);  // still its own
  // Same sizes as the last call but a wrong dtype: refused, and the next good call still shares.
  BOOST_TEST(contains(error_of([&] { binder.bind(std::vector<TensorData>{host(DType::f16, {7, 64})}); }), "has dtype f16"));
  BOOST_TEST(binder.bind(at7).at.get() == c.at.get());
  // Sizes out of the symbol's range are refused before anything is kept.
  BOOST_TEST(!error_of([&] { binder.bind(std::vector<TensorData>{host(DType::f32, {0, 64})}); }).empty());
  BOOST_TEST(binder.bind(at7).at.get() == c.at.get());
  // Every binding equals a fresh one's.
  for (const auto& in : {at5, at7, at5}) {
    const plan::Binding kept = binder.bind(in), fresh = plan::bind(p, in, "test runtime");
    BOOST_TEST(kept.symbols() == fresh.symbols());
    BOOST_TEST(kept.buffer_bytes() == fresh.buffer_bytes());
    BOOST_TEST(kept.slot_bytes() == fresh.slot_bytes());
    BOOST_TEST(kept.extents() == fresh.extents());
  }
}

BOOST_AUTO_TEST_CASE(wrong_inputs) {
  const plan::KernelPlan p = cpu::generate_plan(dynamic_graph());
  BOOST_TEST(bind_error(p, {}) == "test runtime: the plan takes 1 inputs, got 0");
  BOOST_TEST(bind_error(p, {host(DType::f16, {4, 64})}) == "test runtime: input 0 has dtype f16, the plan expects f32");
  BOOST_TEST(bind_error(p, {host(DType::f32, {4})}) == "test runtime: input 0 has rank 1, the plan expects 2");
  BOOST_TEST(bind_error(p, {host(DType::f32, {4, 64, 1})}) == "test runtime: input 0 has rank 3, the plan expects 2");
  BOOST_TEST(bind_error(p, {host(DType::f32, {4, 65})}) ==
             "test runtime: input 0 has sizes [4, 65], but the plan needs 64 at dim 1 (64)");
  BOOST_TEST(bind_error(p, {host(DType::f32, {1, 64})}) ==
             "test runtime: size s0 = 1 (input 0 (x) dim 0) is outside the plan's range [2, 1048576]");
}

BOOST_AUTO_TEST_CASE(an_edited_buffer_size) {
  // The output's size made larger than the kernels computing it: the sizes no longer agree with
  // the graph the slots and kernels were made for.
  plan::KernelPlan p = sample_plan("transformer_block.json");
  const std::vector<TensorData> in = inputs_of(p);
  plan::PlanBuffer& b = const_cast<plan::PlanBuffer&>(first_intermediate(p));
  b.sizes[0] = b.sizes[0] * SymInt(1000);
  b.strides = contiguous_strides(b.sizes);
  const std::string e = bind_error(p, in);
  BOOST_TEST(contains(e, "test runtime: buffer " + std::to_string(b.id) + " (intermediate "), e);
  BOOST_TEST(contains(e, "bytes, but its slot " + std::to_string(b.slot) + " holds "), e);
}

BOOST_AUTO_TEST_CASE(a_slot_too_small_for_its_intermediate) {
  plan::KernelPlan p = cpu::generate_plan(dynamic_graph());
  const plan::PlanBuffer& b = first_intermediate(p);
  p.slots[static_cast<size_t>(b.slot)] = SymInt(64);
  const std::string e = bind_error(p, {host(DType::f32, {8, 64})});
  BOOST_TEST(contains(e, "test runtime: buffer " + std::to_string(b.id) + " (intermediate f32"), e);
  BOOST_TEST(contains(e, "but its slot " + std::to_string(b.slot) + " holds 64 (at s0 = 8)"), e);
  // Through the JSON file too: the reader accepts the plan (sizes agree with themselves at
  // the examples only at bind time), bind refuses it.
  const plan::KernelPlan q = plan::plan_from_json(plan::plan_to_json(p), "edited.json");
  BOOST_TEST(contains(bind_error(q, {host(DType::f32, {8, 64})}), "holds 64"));
}

BOOST_AUTO_TEST_CASE(a_kernel_reading_buffer_99) {
  plan::KernelPlan p = sample_plan("mlp.json");
  p.kernels[0].reads.push_back(99);
  const std::string n = std::to_string(p.buffers.size());
  BOOST_TEST(validate_error(p) == "test plan: kernels[0].reads[" + std::to_string(p.kernels[0].reads.size() - 1) +
                                      "]: buffer 99 does not exist (the plan has " + n + " buffers)");
  // The JSON reader refuses it with the same words.
  const std::string e = error_of([&] { plan::plan_from_json(plan::plan_to_json(p), "edited.json"); });
  BOOST_TEST(contains(e, "edited.json: kernels[0].reads["), e);
  BOOST_TEST(contains(e, "buffer 99 does not exist"), e);
  p = sample_plan("mlp.json");
  p.outputs[0] = -3;
  BOOST_TEST(validate_error(p) == "test plan: outputs[0]: buffer -3 does not exist (the plan has " + n + " buffers)");
  p = sample_plan("mlp.json");
  p.buffers[1].id = 7;
  BOOST_TEST(contains(validate_error(p), "test plan: buffers[1].id: buffers must be listed with ids 0, 1, ..."));
  p = sample_plan("transformer_block.json");
  const_cast<plan::PlanBuffer&>(first_intermediate(p)).slot = 40;
  BOOST_TEST(contains(validate_error(p), "slot 40 does not exist"));
  p = sample_plan("mlp.json");
  p.bindings.push_back({0, 0, 0});
  BOOST_TEST(contains(validate_error(p), "test plan: bindings["));
  p = sample_plan("mlp.json");
  for (plan::PlanBuffer& b : p.buffers)
    if (b.kind == "input" && b.index == 0) b.index = 5;
  BOOST_TEST(contains(validate_error(p), "no input buffer has index 0"));
}

// A generated kernel writes every buffer in its writes: an edit that makes one of them an
// input (the caller's tensor) or a constant is refused (the plan fuzzer's finding: the cpu
// runtime ran mlp.json's plan with its output buffer edited into a second input, and the kernel
// wrote into that input).
BOOST_AUTO_TEST_CASE(a_kernel_writing_an_input_or_a_constant) {
  plan::KernelPlan p = sample_plan("mlp.json");
  const int32_t out = p.outputs[0];
  plan::PlanBuffer& b = p.buffers[static_cast<size_t>(out)];
  BOOST_REQUIRE(b.kind == "output");
  size_t writer = 0;
  while (writer < p.kernels.size() && p.kernels[writer].writes != std::vector<int32_t>{out}) ++writer;
  BOOST_REQUIRE(writer < p.kernels.size());
  int32_t inputs = 0;
  for (const plan::PlanBuffer& x : p.buffers) inputs += x.kind == "input";
  b.kind = "input";
  b.index = inputs;  // a new last input: the plan is otherwise valid
  const std::string at = "test plan: kernels[" + std::to_string(writer) + "].writes[0]: the kernel writes buffer " +
                         std::to_string(out);
  BOOST_TEST(validate_error(p) == at + ", an input buffer");
  b.kind = "constant";
  b.index = -1;
  auto data = std::make_shared<ConstantData>();
  data->dtype = b.dtype;
  int64_t n = dtype_size(b.dtype);
  for (const SymInt& s : b.sizes) {
    data->sizes.push_back(s.hint());
    n *= s.hint();
  }
  data->bytes.resize(static_cast<size_t>(n));
  b.data = data;
  BOOST_TEST(validate_error(p) == at + ", a constant buffer");
}

BOOST_AUTO_TEST_CASE(a_gemm_reading_past_its_buffer) {
  plan::KernelPlan p = gemm_plan();
  BOOST_REQUIRE(p.kernels[0].gemm.has_value());
  plan::PlanGemm& g = *p.kernels[0].gemm;
  g.k = SymInt(33);  // a is 64 x 32, b 32 x 16: k = 33 reads one column of a and one row of b too many
  const std::vector<TensorData> in = inputs_of(p);
  std::string e = bind_error(p, in);
  BOOST_TEST(contains(e, "test runtime: kernel 0 (" + p.kernels[0].name + ")'s gemm reads its a operand at elements 0 to "), e);
  BOOST_TEST(contains(e, "of buffer " + std::to_string(g.a) + ", which holds 2048"), e);
  g.k = SymInt(32);
  g.b_offset = SymInt(16);
  e = bind_error(p, in);
  BOOST_TEST(contains(e, "reads its b operand at elements 16 to 527 of buffer " + std::to_string(g.b) + ", which holds 512"), e);
  g.b_offset = SymInt(0);
  g.m = SymInt(65);
  BOOST_TEST(contains(bind_error(p, in), "writes 1040 elements of buffer " + std::to_string(g.c) + ", which holds 1024"));
  g.m = SymInt(64);
  g.c = g.a;  // writing an input
  BOOST_TEST(contains(validate_error(p), "kernels[0].gemm.c: the gemm writes buffer " + std::to_string(g.a) + ", an input buffer"));
}

BOOST_AUTO_TEST_CASE(sizes_that_overflow) {
  // A slot of s0^4 * 2^40 bytes: 2^72 at s0 = 4096 wraps int64.
  plan::KernelPlan p = cpu::generate_plan(dynamic_graph());
  const plan::PlanBuffer& b = first_intermediate(p);
  const SymInt s0 = SymInt::symbol(0, 8);
  p.slots[static_cast<size_t>(b.slot)] = s0 * s0 * s0 * s0 * SymInt(int64_t{1} << 40);
  std::string e = bind_error(p, {host(DType::f32, {4096, 64})});
  BOOST_TEST(contains(e, "test runtime: slot " + std::to_string(b.slot) + " ("), e);
  BOOST_TEST(contains(e, "overflows 64-bit integers (at s0 = 4096)"), e);
  // One that does not wrap but is no tensor: 2^50 bytes.
  p.slots[static_cast<size_t>(b.slot)] = s0 * SymInt(int64_t{1} << 38);
  e = bind_error(p, {host(DType::f32, {4096, 64})});
  BOOST_TEST(contains(e, "needs 1125899906842624 bytes, more than a buffer may have (2^48)"), e);
  // An output whose element count wraps.
  p = cpu::generate_plan(dynamic_graph());
  for (plan::PlanBuffer& o : p.buffers)
    if (o.kind == "output" && o.sizes.size() == 2) {
      o.sizes[1] = SymInt(std::numeric_limits<int64_t>::max() / 2);
      o.strides = {SymInt(1), SymInt(1)};
    }
  e = bind_error(p, {host(DType::f32, {8, 64})});
  BOOST_TEST(contains(e, "overflows 64-bit integers"), e);
  // A negative parallel extent.
  p = cpu::generate_plan(dynamic_graph());
  p.kernels[0].parallel_extent = s0 - SymInt(100);
  e = bind_error(p, {host(DType::f32, {8, 64})});
  BOOST_TEST(contains(e, "has a negative parallel extent, -92 (at s0 = 8)"), e);
}

// The plan's shape facts hold or the call is refused, whoever calls bind (issue 31: only the
// frontends' guards checked them, so a runtime called directly ran kernels made for s0 == s1 at
// sizes where it does not hold).
BOOST_AUTO_TEST_CASE(sizes_that_break_a_shape_fact) {
  Graph g;
  const SymInt s0 = g.shapes().create_symbol(8, 2, 1 << 20, "input 0 (x) dim 0", true);
  const SymInt s1 = g.shapes().create_symbol(8, 2, 1 << 20, "input 1 (y) dim 0", true);
  const NodeId x = g.add_input(TensorMeta{DType::f32, Device::cpu(), {s0, 4}, {}}, "x");
  const NodeId y = g.add_input(TensorMeta{DType::f32, Device::cpu(), {s1, 4}, {}}, "y");
  g.set_outputs({g.add(OpId::add, {x, y})});
  BOOST_TEST_REQUIRE(g.shapes().facts().size() == 1u);
  const plan::KernelPlan p = cpu::generate_plan(g);
  BOOST_TEST_REQUIRE(p.facts.size() == 1u);
  BOOST_CHECK_NO_THROW(plan::bind(p, std::vector<TensorData>{host(DType::f32, {5, 4}), host(DType::f32, {5, 4})}, "test runtime"));
  const std::string e = bind_error(p, {host(DType::f32, {3, 4}), host(DType::f32, {5, 4})});
  BOOST_TEST(contains(e, "test runtime: the sizes break the plan's shape fact s0 == s1"), e);
  BOOST_TEST(contains(e, ": 3 != 5 (at s0 = 3, s1 = 5)"), e);
}

BOOST_AUTO_TEST_CASE(reference_kernels_pass_their_shape_rule) {
  plan::KernelPlan p = cpu::generate_plan(dynamic_graph());
  plan::PlanKernel k;
  k.name = "k_ref";
  k.kind = "reference";
  k.op = OpId::exp;
  k.inputs = {0, 0};
  k.output = p.outputs[1];
  p.kernels.push_back(k);
  const std::string where = "test plan: kernels[" + std::to_string(p.kernels.size() - 1) + "]";
  BOOST_TEST(validate_error(p) == where + ".inputs: exp takes 1 input, got 2");
  p.kernels.back().inputs = {0};
  BOOST_CHECK_NO_THROW(plan::validate(p, "test plan"));
  p.kernels.back().output = p.outputs[0];  // f32[64], not exp's f32[s0, 64]
  BOOST_TEST(contains(validate_error(p), where + ".output: buffer " + std::to_string(p.outputs[0]) +
                                             " is f32[64], but exp of the inputs gives f32[s0, 64]"));
  p.kernels.back().op = OpId::input;
  BOOST_TEST(validate_error(p) == where + ".op: a reference kernel cannot run 'input' (inputs are buffers)");
}

BOOST_AUTO_TEST_SUITE_END()
