// targets/vulkan/runtime beyond the op cases: the device list, command buffers recorded once per
// set of sizes, timestamps, outputs kept on the device and inputs bound where they lie, the
// codegen's fallbacks for devices without 16-/8-bit storage or subgroup arithmetic (run on this
// device, which accepts both forms), a device without f64, and bad inputs.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <regex>

#include "harness.h"
#include "kiln/graph/custom_ops.h"
#include "kiln/graph/error.h"
#include "kiln/passes/passes.h"
#include "kiln/schedule/schedule.h"
#include "kiln/target/target.h"
#include "kiln/vulkan/codegen.h"
#include "kiln/vulkan/runtime.h"

using namespace kiln;
using namespace cpu_test;

namespace {

using Ints = std::vector<int64_t>;

TensorMeta m(DType t, SymShape s) { return TensorMeta{t, Device::cpu(), std::move(s), {}}; }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TensorData values(DType t, Ints sizes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return tensor(t, sizes, random_values(t, n, Domain::normal, rng));
}

// softmax(x * x, 1) + x over [s0, 37] (s0 dynamic).
Graph softmax_graph(DType t) {
  Graph g;
  const SymInt s0 = g.shapes().create_symbol(5, 2, 1 << 20, "x.size(0)", true);
  const NodeId x = g.add_input(m(t, {s0, 37}));
  const NodeId two = g.add(OpId::mul, {x, x}, {});
  const NodeId sm = g.add(OpId::softmax, {two}, {int64_t{1}});
  g.set_outputs({g.add(OpId::add, {sm, x}, {})});
  return g;
}

std::shared_ptr<vulkan::PlanExecutable> load(const Graph& g, const vulkan::CodegenOptions& o) {
  const Graph opt = passes::run_default_pipeline(g);
  return vulkan::PlanExecutable::load(vulkan::generate(schedule::schedule_graph(opt, vulkan::schedule_target(o)), o));
}

void expect_matches(const Graph& g, const std::vector<TensorData>& in, const std::vector<TensorData>& got, DType t) {
  const std::vector<TensorData> want = eval::run_graph(g, in);
  BOOST_REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    const OutputDiff d = compare(got[k], want[k], tolerance_for(t, true));
    BOOST_TEST(d.ok, "output " << k << ": " << d.what);
  }
  const std::vector<std::string> msgs = vulkan::take_validation_messages();
  BOOST_TEST(msgs.empty(), (msgs.empty() ? "" : msgs[0]));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(vulkan_runtime)

BOOST_AUTO_TEST_CASE(device_list) {
  std::string why;
  const std::vector<vulkan::DeviceInfo> ds = vulkan::list_devices(&why);
  BOOST_REQUIRE_MESSAGE(!ds.empty(), why);
  for (const vulkan::DeviceInfo& d : ds) {
    BOOST_TEST_MESSAGE(d.str());
    BOOST_TEST(!d.name.empty());
    BOOST_TEST(d.str().find("vulkan:" + std::to_string(d.index)) == 0);
    BOOST_TEST(d.caps.int64);
  }
  const std::string e = error_of([&] { vulkan::codegen_options_for(static_cast<int>(ds.size()) + 2); });
  BOOST_TEST(e.find("no Vulkan device vulkan:") != std::string::npos, e);
}

// The compile cache keys a plan by the device's identity: it names what the runtime decided
// for the codegen too (KILN_VULKAN_SCHEDULE, _VECTORS, _CACHE_ROWS may change it), so a plan
// generated under other decisions is not reused.
BOOST_AUTO_TEST_CASE(device_identity_names_the_codegen_decisions) {
  target::ensure_builtin_targets();
  target::Runtime* rt = target::find_runtime("vulkan");
  BOOST_REQUIRE(rt != nullptr);
  const Device d{DeviceType::vulkan, 0};
  const std::string base = rt->device_identity(d);
  const bool gpu = vulkan::codegen_options_for(0).gpu;
  for (const auto& [name, value] : std::vector<std::pair<const char*, const char*>>{
           {"KILN_VULKAN_SCHEDULE", gpu ? "cpu" : "gpu"}, {"KILN_VULKAN_VECTORS", "0"}, {"KILN_VULKAN_CACHE_ROWS", "0"}}) {
    const char* before = std::getenv(name);
    const std::string kept = before ? before : "";
    ::setenv(name, value, 1);
    const std::string other = rt->device_identity(d);
    if (before) ::setenv(name, kept.c_str(), 1);
    else ::unsetenv(name);
    BOOST_TEST(other != base, name);
  }
  BOOST_TEST(rt->device_identity(d) == base);
}

BOOST_AUTO_TEST_CASE(recorded_once_per_sizes) {
  const Graph g = softmax_graph(DType::f32);
  auto exe = load(g, vulkan::codegen_options_for(0));
  const TensorData a = values(DType::f32, {5, 37}, 1), b = values(DType::f32, {9, 37}, 2);
  expect_matches(g, {a}, exe->run_host(std::vector<TensorData>{a}), DType::f32);
  expect_matches(g, {a}, exe->run_host(std::vector<TensorData>{a}), DType::f32);
  BOOST_TEST(exe->command_buffer_recordings() == 1);
  expect_matches(g, {b}, exe->run_host(std::vector<TensorData>{b}), DType::f32);
  BOOST_TEST(exe->command_buffer_recordings() == 2);
  const std::vector<double> ms = exe->last_kernel_ms();
  if (vulkan::list_devices()[0].timestamp_period_ns > 0) {
    BOOST_TEST(ms.size() == exe->plan().kernels.size());
    double total = 0;
    for (double x : ms) total += x;
    BOOST_TEST(total > 0);
  }
  // Bad input: a sentence naming the input and the dim.
  const std::string e = error_of([&] { exe->run_host(std::vector<TensorData>{values(DType::f32, {5, 36}, 3)}); });
  BOOST_TEST(e.find("input 0 has sizes [5, 36], but the plan needs 37 at dim 1") != std::string::npos, e);
}

// Without 16-bit / 8-bit storage f16, bf16 and bool are packed in uints and converted in the
// shader (stores replace their bits atomically): the same results.
BOOST_AUTO_TEST_CASE(packed_storage_fallback) {
  for (DType t : {DType::f16, DType::bf16}) {
    vulkan::CodegenOptions o = vulkan::codegen_options_for(0);
    o.caps.storage16 = false;
    o.caps.storage8 = false;
    Graph g;
    const SymInt s0 = g.shapes().create_symbol(7, 2, 1 << 20, "x.size(0)", true);
    const NodeId x = g.add_input(m(t, {s0, 33}));
    const NodeId y = g.add_input(m(t, {s0, 33}));
    const NodeId sum = g.add(OpId::add, {x, y}, {});
    const NodeId gt = g.add(OpId::gt, {x, y}, {});
    const NodeId sm = g.add(OpId::softmax, {sum}, {int64_t{1}});
    g.set_outputs({sum, gt, sm});
    auto exe = load(g, o);
    for (const plan::PlanKernel& k : exe->plan().kernels) {
      BOOST_TEST(k.source.find("16bit_storage") == std::string::npos);
      BOOST_TEST(k.source.find("8bit_storage") == std::string::npos);
    }
    for (int64_t rows : {7, 3}) {
      const std::vector<TensorData> in{values(t, {rows, 33}, 4), values(t, {rows, 33}, 5)};
      expect_matches(g, in, exe->run_host(in), t);
    }
  }
}

// run_device: inputs on the device are bound in place, outputs stay on the device (the plan's
// buffers handed over), and the command buffers are recorded again only when a binding changes:
// an output still held by the caller is not overwritten by the next run.
BOOST_AUTO_TEST_CASE(device_inputs_and_outputs) {
  const Graph g = softmax_graph(DType::f32);
  auto exe = load(g, vulkan::codegen_options_for(0));
  const TensorData a = values(DType::f32, {5, 37}, 11), b = values(DType::f32, {5, 37}, 12);
  const TensorData da = vulkan::to_device(a), db = vulkan::to_device(b);
  BOOST_TEST((da.device() == Device::vulkan(0)));
  const OutputDiff round_trip = compare(vulkan::to_host(da), a, tolerance_for(DType::f32, true));
  BOOST_TEST(round_trip.ok, round_trip.what);
  std::vector<TensorData> first = exe->run_device(std::vector<TensorData>{da});
  BOOST_TEST((first.at(0).device() == Device::vulkan(0)));
  const int64_t recorded = exe->command_buffer_recordings();
  // Same input, output dropped: resubmitted as recorded.
  first.clear();
  expect_matches(g, {a}, {vulkan::to_host(exe->run_device(std::vector<TensorData>{da}).at(0))}, DType::f32);
  BOOST_TEST(exe->command_buffer_recordings() == recorded);
  // Output held: the next run (another input tensor) writes elsewhere; both stay right.
  const TensorData held = exe->run_device(std::vector<TensorData>{da}).at(0);
  const TensorData other = exe->run_device(std::vector<TensorData>{db}).at(0);
  BOOST_TEST(exe->command_buffer_recordings() > recorded);
  expect_matches(g, {a}, {vulkan::to_host(held)}, DType::f32);
  expect_matches(g, {b}, {vulkan::to_host(other)}, DType::f32);
  // A device output as the next input, and a host input again, through run_host.
  expect_matches(g, {vulkan::to_host(held)}, exe->run_host(std::vector<TensorData>{held}), DType::f32);
  expect_matches(g, {b}, exe->run_host(std::vector<TensorData>{b}), DType::f32);
  // A view at an offset (not aligned for binding: copied on the device first).
  TensorData view = vulkan::to_device(values(DType::f32, {6, 37}, 13));
  view.offset = 37 + 1;  // 152 bytes: not a multiple of minStorageBufferOffsetAlignment (16 or more)
  view.sizes = {4, 37};
  const TensorData host_view = vulkan::to_host(view);
  expect_matches(g, {host_view}, exe->run_host(std::vector<TensorData>{view}), DType::f32);
  if (vulkan::list_devices()[0].timestamp_period_ns > 0) {
    const double before = vulkan::thread_device_ms();
    exe->run_host(std::vector<TensorData>{b});
    BOOST_TEST(exe->last_run_ms() > 0);
    BOOST_TEST(vulkan::thread_device_ms() - before == exe->last_run_ms(), boost::test_tools::tolerance(1e-9));
  }
}

// Row reductions combine with subgroup arithmetic where the device has it, and with the
// shared-memory tree alone where not: the same results (sum, max with NaN, mean/var passes).
BOOST_AUTO_TEST_CASE(subgroup_and_shared_memory_combines) {
  for (bool sub : {true, false}) {
    vulkan::CodegenOptions o = vulkan::codegen_options_for(0);
    if (!sub) o.caps.subgroup = false;
    else if (!o.caps.subgroup) continue;  // this device has no subgroup arithmetic
    Graph g;
    const SymInt s0 = g.shapes().create_symbol(6, 1, 1 << 20, "x.size(0)", true);
    const NodeId x = g.add_input(m(DType::f32, {s0, 1000}));
    const NodeId sm = g.add(OpId::softmax, {x}, {int64_t{1}});
    const NodeId mx = g.add(OpId::max, {x}, {Ints{1}, false});
    g.set_outputs({sm, mx});
    auto exe = load(g, o);
    bool uses = false;
    for (const plan::PlanKernel& k : exe->plan().kernels) uses = uses || k.source.find("subgroupAdd") != std::string::npos;
    BOOST_TEST(uses == sub);
    for (int64_t rows : {6, 1, 3}) {
      TensorData in = values(DType::f32, {rows, 1000}, 20 + static_cast<uint64_t>(rows));
      in.data_as<float>()[999] = NAN;  // row 0's max is NaN
      expect_matches(g, {in}, exe->run_host(std::vector<TensorData>{in}), DType::f32);
    }
  }
}

BOOST_AUTO_TEST_CASE(no_f64_is_a_clear_error) {
  vulkan::CodegenOptions o = vulkan::codegen_options_for(0);
  o.caps.float64 = false;
  const std::string e = error_of([&] { load(softmax_graph(DType::f64), o); });
  BOOST_TEST(e.find("has no shaderFloat64") != std::string::npos, e);
  // f32 pow and erf without f64: the float forms.
  Graph g;
  const NodeId x = g.add_input(m(DType::f32, {64}));
  const NodeId p = g.add(OpId::pow, {x, x}, {});
  g.set_outputs({p, g.add(OpId::erf, {x}, {})});
  auto exe = load(g, o);
  std::mt19937_64 rng(9);
  const std::vector<TensorData> in{tensor(DType::f32, {64}, random_values(DType::f32, 64, Domain::positive, rng))};
  expect_matches(g, in, exe->run_host(in), DType::f32);
}

// A custom op's own GLSL kernel (CustomOpKernel "vulkan") runs as a plan kernel of kind "custom"
// between generated ones, over symbolic sizes, with two inputs that may be the same buffer; where
// its buffers cannot be plain arrays (f16 on a device without 16-bit storage) the host runs it,
// with the same results.
BOOST_AUTO_TEST_CASE(custom_op_kernels_on_the_device) {
  CustomOpDef d;
  d.name = "vk_check::mul_index";  // y[i] = x0[i] * x1[i] + x1[i] + i
  d.version = "1";
  d.min_inputs = d.max_inputs = 2;
  d.infer = [](std::span<const TensorMeta* const> in, const std::string&, ShapeEnv&) { return *in[0]; };
  d.compute = [](std::span<const TensorData> in, const std::string&, const TensorData& out) {
    const TensorData a = eval::convert(in[0], DType::f64), b = eval::convert(in[1], DType::f64);
    TensorData y = a;
    for (int64_t i = 0; i < y.numel(); ++i) y.data_as<double>()[i] = a.data_as<double>()[i] * b.data_as<double>()[i] + b.data_as<double>()[i] + double(i);
    const TensorData r = eval::convert(y, out.dtype);
    std::memcpy(out.data(), r.data(), static_cast<size_t>(out.numel()) * dtype_size(out.dtype));
  };
  CustomOpKernel k;
  k.entry = "mul_index";
  k.block = 32;
  // (f16 elements are uint16_t bits, converted where they are read and written: 16-bit values
  // as such need shaderInt16, which Kiln does not ask for)
  k.source = R"(
void mul_index(int64_t i, int64_t n, int64_t y0, int64_t y1, int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
  kiln_out(i) = STORE(IN(kiln_in0(i)) * IN(kiln_in1(i)) + IN(kiln_in1(i)) + float(i));
}
)";
  for (DType t : {DType::f32, DType::f16}) {
    CustomOpDef dt = d;
    dt.version = dtype_name(t);
    CustomOpKernel kt = k;
    kt.source = (t == DType::f32 ? std::string("#define IN(e) (e)\n#define STORE(v) (v)\n")
                                 : std::string("#define IN(e) unpackHalf2x16(uint(e)).x\n"
                                               "#define STORE(v) uint16_t(packHalf2x16(vec2((v), 0.0)) & 0xffffu)\n")) +
                k.source;
    dt.device_kernels = {{"vulkan", kt}};
    register_custom_op(dt);
    Graph g;
    const SymInt s0 = g.shapes().create_symbol(6, 2, 1 << 20, "x.size(0)", true);
    const NodeId a = g.add_input(m(t, {s0, 3})), b = g.add_input(m(t, {s0, 3}));
    const Attrs call{std::string("vk_check::mul_index"), find_custom_op("vk_check::mul_index")->version, std::string("")};
    const NodeId y = g.add(OpId::custom, {g.add(OpId::exp, {a}, {}), b}, call);
    const NodeId z = g.add(OpId::custom, {b, b}, call);
    g.set_outputs({g.add(OpId::add, {y, g.add(OpId::neg, {z}, {})}, {})});
    for (bool storage16 : {true, false}) {
      if (t == DType::f32 && !storage16) continue;
      BOOST_TEST_CONTEXT(dtype_name(t) << (storage16 ? "" : ", no 16-bit storage")) {
        vulkan::CodegenOptions o = vulkan::codegen_options_for(0);
        o.caps.storage16 = o.caps.storage16 && storage16;
        auto exe = load(g, o);
        int64_t custom = 0;
        for (const plan::PlanKernel& pk : exe->plan().kernels) custom += pk.kind == "custom";
        BOOST_TEST(custom == (o.caps.storage16 || t == DType::f32 ? 2 : 0));
        for (int64_t rows : {6, 2, 37}) {
          const std::vector<TensorData> in{values(t, {rows, 3}, 40 + static_cast<uint64_t>(rows)),
                                           values(t, {rows, 3}, 50 + static_cast<uint64_t>(rows))};
          expect_matches(g, in, exe->run_host(in), t);
        }
      }
    }
    unregister_custom_op("vk_check::mul_index");
  }
}

// erf in each of its approximations' intervals (below 0.46875, up to 4, up to 6, beyond) and at
// their edges, in f32 through the f64 form and through the f32 form of devices without f64, and
// in f64; against the reference (libm's erf).
BOOST_AUTO_TEST_CASE(erf_over_each_interval) {
  std::vector<double> xs = {0.0, -0.0, 1e-30, -3e-8, 0.46875, -0.46875, 0.4687501, 4.0, -4.0, 4.0000005, 5.999, 6.0, -6.5,
                            30.0, 1e30, std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                            std::numeric_limits<double>::quiet_NaN()};
  for (int i = 0; xs.size() < 400; ++i) xs.push_back(-7.0 + 14.0 * i / 381.0);
  const int64_t n = static_cast<int64_t>(xs.size());
  for (DType t : {DType::f32, DType::f64}) {
    Graph g;
    const NodeId x = g.add_input(m(t, {n}));
    g.set_outputs({g.add(OpId::erf, {x}, {})});
    const std::vector<TensorData> in{tensor(t, {n}, xs)};
    for (bool f64 : {true, false}) {
      if (t == DType::f64 && !f64) continue;
      BOOST_TEST_CONTEXT(dtype_name(t) << (f64 ? "" : ", without f64")) {
        vulkan::CodegenOptions o = vulkan::codegen_options_for(0);
        o.caps.float64 = o.caps.float64 && f64;
        if (t == DType::f64 && !o.caps.float64) continue;
        auto exe = load(g, o);
        expect_matches(g, in, exe->run_host(in), t);
      }
    }
  }
}

// What a GPU gets that lavapipe's defaults do not, run here by asking for it: full reductions
// split into partials (schedule_target of a GPU), vec4/ivec4 accesses (beside a load at an offset
// that is not a multiple of 4, read one by one), and rows kept in registers between passes; each
// switched off in turn, the same results.
BOOST_AUTO_TEST_CASE(gpu_schedule_vector_accesses_and_row_cache) {
  {
    vulkan::CodegenOptions o = vulkan::codegen_options_for(0);
    o.gpu = true;
    Graph g;
    const NodeId x = g.add_input(m(DType::f32, {int64_t{1} << 18}));
    g.set_outputs({g.add(OpId::sum, {x}, {Ints{0}, false})});
    auto exe = load(g, o);
    BOOST_TEST(exe->plan().kernels.size() == 2u, "a full reduction in two stages on a GPU");
    const std::vector<TensorData> in{values(DType::f32, {int64_t{1} << 18}, 31)};
    expect_matches(g, in, exe->run_host(in), DType::f32);
  }
  for (int variant = 0; variant < 4; ++variant) {
    vulkan::CodegenOptions o = vulkan::codegen_options_for(0);
    o.vector_accesses = variant & 1;
    o.cache_rows = variant & 2;
    // y = x[:, 1:37] of x: [s0, 40] (at an offset of 1: read one by one) beside z = x[:, 4:40]
    // and an i32 input (read and written as vectors).
    Graph g;
    const SymInt s0 = g.shapes().create_symbol(3, 1, 1 << 20, "x.size(0)", true);
    const NodeId x = g.add_input(m(DType::f32, {s0, 40}));
    const NodeId i = g.add_input(m(DType::i32, {s0, 36}));
    const NodeId y = g.add(OpId::slice, {x}, {int64_t{1}, int64_t{1}, int64_t{37}, int64_t{1}});
    const NodeId z = g.add(OpId::slice, {x}, {int64_t{1}, int64_t{4}, int64_t{40}, int64_t{1}});
    const NodeId sm = g.add(OpId::softmax, {z}, {int64_t{1}});
    const NodeId am = g.add(OpId::argmax, {z}, {Ints{1}, false});
    const NodeId lin = g.add(OpId::add, {g.add(OpId::mul, {y, z}, {}), sm}, {});
    g.set_outputs({sm, am, lin, g.add(OpId::add, {i, i}, {})});
    auto exe = load(g, o);
    bool views = false, registers = false;
    for (const plan::PlanKernel& k : exe->plan().kernels) {
      views = views || k.source.find("v[int(") != std::string::npos;
      registers = registers || k.source.find(" lc") != std::string::npos;
    }
    BOOST_TEST(views == o.vector_accesses, "variant " << variant);
    BOOST_TEST(registers == o.cache_rows, "variant " << variant);
    for (int64_t rows : {3, 5, 1}) {
      const std::vector<TensorData> in{values(DType::f32, {rows, 40}, 40 + static_cast<uint64_t>(rows)),
                                       values(DType::i32, {rows, 36}, 50 + static_cast<uint64_t>(rows))};
      expect_matches(g, in, exe->run_host(in), DType::f32);
    }
  }
}

// Attention as Vulkan runs it (decomposed) over 4-D inputs with two batch dims, and each of its
// stages alone: q @ k^T (a batched gemm with a transposed operand), softmax(s * 0.25) over
// [2, 3, 16, 16], p @ v, the whole op. (On the H100's Vulkan driver the whole op's 4-D cases
// failed while lavapipe passed; the stages say which part a driver gets wrong.)
BOOST_AUTO_TEST_CASE(attention_stages_over_two_batch_dims) {
  const vulkan::CodegenOptions o = vulkan::codegen_options_for(0);
  const Ints shape{2, 3, 16, 16};
  auto in = [&](Graph& g) { return g.add_input(m(DType::f32, {2, 3, 16, 16})); };
  std::vector<std::pair<std::string, Graph>> stages;
  {
    Graph g;
    const NodeId q = in(g), k = in(g);
    g.set_outputs({g.add(OpId::matmul, {q, g.add(OpId::permute, {k}, {Ints{0, 1, 3, 2}})})});
    stages.emplace_back("q @ k^T", g);
  }
  {
    Graph g;
    const NodeId x = in(g);
    const NodeId c = g.add(OpId::mul, {x, x}, {});
    g.set_outputs({g.add(OpId::softmax, {c}, {int64_t{3}})});
    stages.emplace_back("softmax", g);
  }
  {
    Graph g;
    const NodeId p = in(g), v = in(g);
    g.set_outputs({g.add(OpId::matmul, {p, v})});
    stages.emplace_back("p @ v", g);
  }
  {
    Graph g;
    const NodeId q = in(g), k = in(g), v = in(g);
    g.set_outputs({g.add(OpId::scaled_dot_product_attention, {q, k, v}, {0.25})});
    stages.emplace_back("attention", g);
  }
  uint64_t seed = 60;
  for (const auto& [name, g] : stages) {
    BOOST_TEST_CONTEXT(name) {
      std::vector<TensorData> inputs;
      for (size_t i = 0; i < g.inputs().size(); ++i) inputs.push_back(values(DType::f32, shape, seed++));
      auto exe = load(g, o);
      expect_matches(g, inputs, exe->run_host(inputs), DType::f32);
    }
  }
}


// The gemm shader's blockings: 64 x 64 tiles (4 x 4 per invocation), 16 x 16 for a skinny product
// (8 x 8 blocks are set by vulkan.gemm_blocking only: gemm_blockings_set_by_config); ragged edges in
// M, N and K, a transposed B (its tile loaded k-fast) and a B broadcast over the batch.
BOOST_AUTO_TEST_CASE(gemm_blockings) {
  const vulkan::CodegenOptions o = vulkan::codegen_options_for(0);
  struct Case { Ints a, b; bool transposed_b; int64_t tile; };
  uint64_t seed = 70;
  const bool wide = o.caps.max_workgroup >= 256;
  for (const Case& c : {Case{{66, 250, 70}, {66, 250, 70}, true, wide ? 64 : 0}, Case{{3, 120, 77}, {1, 77, 100}, false, wide ? 64 : 0},
                        Case{{2, 1, 300}, {1, 300, 7}, false, 16}}) {
    auto sym = [](const Ints& v) { return SymShape(v.begin(), v.end()); };
    BOOST_TEST_CONTEXT(shape_str(sym(c.a)) << " @ " << shape_str(sym(c.b)) << (c.transposed_b ? "^T" : "")) {
      Graph g;
      const NodeId a = g.add_input(m(DType::f32, sym(c.a))), b = g.add_input(m(DType::f32, sym(c.b)));
      const NodeId rhs = c.transposed_b ? g.add(OpId::permute, {b}, {Ints{0, 2, 1}}) : b;
      g.set_outputs({g.add(OpId::matmul, {a, rhs})});
      const Compiled cc = compile(g);
      BOOST_REQUIRE_MESSAGE(cc.error.empty(), cc.error);
      const std::vector<plan::PlanKernel>& ks = cc.plan.kernels;
      const auto gemm = std::find_if(ks.begin(), ks.end(), [](const plan::PlanKernel& k) { return k.gemm.has_value(); });
      BOOST_REQUIRE(gemm != ks.end());
      if (c.tile > 0) BOOST_TEST((gemm->gemm->tile == std::array<int64_t, 2>{c.tile, c.tile}));
      BOOST_TEST(gemm->launch.block <= o.caps.max_workgroup);
      // (sums of 70-odd products: the error bound scales with the sum of their magnitudes)
      Tolerance tol = tolerance_for(DType::f32, true);
      tol.rtol *= 4;
      tol.scale_by_abs_run = true;
      const std::vector<TensorData> in{values(DType::f32, c.a, seed++), values(DType::f32, c.b, seed++)};
      BOOST_TEST(run_and_compare(cc, in, {tol}) == "");
    }
  }
}

// Blockings set by vulkan.gemm_blocking (CodegenOptions::gemm_blocking): non-square tiles and
// blocks, 8 x 8 blocks in small workgroups, each over ragged edges with a transposed B and a GELU
// epilogue in the shader, against the reference; one the shader cannot run is an error naming it.
BOOST_AUTO_TEST_CASE(gemm_blockings_set_by_config) {
  Graph g;
  const NodeId x = g.add_input(m(DType::f32, {2, 70, 45})), w = g.add_input(m(DType::f32, {99, 45}));
  const NodeId y = g.add(OpId::matmul, {x, g.add(OpId::permute, {w}, {Ints{1, 0}})});
  g.set_outputs({g.add(OpId::gelu, {y}, {std::string("none")})});
  const std::vector<TensorData> in{values(DType::f32, {2, 70, 45}, 90), values(DType::f32, {99, 45}, 91)};
  for (const char* blocking : {"128x64/8x8/8", "64x128/8x8/8", "64x64/8x8/8", "128x64/8x4/16", "32x64/4x8/16"}) {
    BOOST_TEST_CONTEXT(blocking) {
      vulkan::CodegenOptions o = vulkan::codegen_options_for(0);
      o.gemm_blocking = blocking;
      int bm = 0, bn = 0, tm = 0, tn = 0;
      BOOST_REQUIRE(std::sscanf(blocking, "%dx%d/%dx%d", &bm, &bn, &tm, &tn) == 4);
      auto exe = load(g, o);
      const auto& ks = exe->plan().kernels;
      const auto gemm = std::find_if(ks.begin(), ks.end(), [](const plan::PlanKernel& k) { return k.gemm.has_value(); });
      BOOST_REQUIRE(gemm != ks.end());
      if ((bm / tm) * (bn / tn) <= o.caps.max_workgroup)
        BOOST_TEST((gemm->gemm->tile == std::array<int64_t, 2>{bm, bn}));
      expect_matches(g, in, exe->run_host(in), DType::f32);
    }
  }
  // Operands loaded 4 k at a time (vec4) where K, the base and the other stride are multiples of
  // 4 (A: 52 columns of rows of 56; B: a Linear's weight as B^T), and a slice of A at an odd
  // offset (the same shader loading it element by element), with and without the gemm's vector
  // loads (off by default: slower on an H100, docs/vulkan.md).
  Graph gv;
  const NodeId xv = gv.add_input(m(DType::f32, {3, 37, 56})), wv = gv.add_input(m(DType::f32, {40, 52}));
  const NodeId wt = gv.add(OpId::permute, {wv}, {Ints{1, 0}});
  const NodeId x0 = gv.add(OpId::slice, {xv}, {int64_t{2}, int64_t{0}, int64_t{52}, int64_t{1}});
  const NodeId x1 = gv.add(OpId::slice, {xv}, {int64_t{2}, int64_t{1}, int64_t{53}, int64_t{1}});
  gv.set_outputs({gv.add(OpId::matmul, {x0, wt}), gv.add(OpId::matmul, {x1, wt})});
  const std::vector<TensorData> inv{values(DType::f32, {3, 37, 56}, 92), values(DType::f32, {40, 52}, 93)};
  for (const char* blocking : {"auto", "128x64/8x8/8", "32x64/4x8/16"})
    for (bool vectors : {true, false}) {
      BOOST_TEST_CONTEXT(blocking << (vectors ? ", vector loads" : ", element loads")) {
        vulkan::CodegenOptions o = vulkan::codegen_options_for(0);
        o.gemm_blocking = blocking;
        o.gemm_vector_loads = vectors;
        auto exe = load(gv, o);
        int vector_gemms = 0;
        for (const plan::PlanKernel& k : exe->plan().kernels)
          vector_gemms += k.gemm && k.source.find("v[(") != std::string::npos;
        BOOST_TEST(vector_gemms == (vectors ? 2 : 0));
        expect_matches(gv, inv, exe->run_host(inv), DType::f32);
      }
    }
  vulkan::CodegenOptions o = vulkan::codegen_options_for(0);
  o.gemm_blocking = "64x64/6x8/8";
  BOOST_CHECK_EXCEPTION(load(g, o), Error, [](const Error& e) {
    return std::string(e.what()).find("vulkan.gemm_blocking '64x64/6x8/8' is not a blocking") != std::string::npos;
  });
}

// A gemm's pointwise epilogue computed in the gemm shader (CodegenOptions::fuse_gemm_epilogue):
// in place over C (bias and GELU: one kernel, C never stored as the bare product), with C an
// output too (stored, and the epilogue's result beside it) and over batch dims; an epilogue that
// reads C at other elements than the one it writes (its domain in a transposed output's order,
// or z + z^T) keeps its own kernel. Each with and without the fusion, against the reference.
BOOST_AUTO_TEST_CASE(gemm_epilogues_in_the_gemm_shader) {
  struct Case {
    const char* what;
    Ints x, w;
    std::function<std::vector<NodeId>(Graph&, NodeId, NodeId, NodeId)> build;  // (x, w, bias)
    bool fused;
  };
  const std::vector<Case> cases = {
      {"gelu(x @ w + b)", {9, 20}, {20, 33}, [](Graph& g, NodeId x, NodeId w, NodeId b) {
         return std::vector<NodeId>{g.add(OpId::gelu, {g.add(OpId::add, {g.add(OpId::matmul, {x, w}), b})}, {std::string("none")})};
       }, true},
      {"c and relu(c) + b", {9, 20}, {20, 33}, [](Graph& g, NodeId x, NodeId w, NodeId b) {
         const NodeId c = g.add(OpId::matmul, {x, w});
         return std::vector<NodeId>{c, g.add(OpId::add, {g.add(OpId::relu, {c}, {}), b}, {})};
       }, true},
      {"batched x @ w + b", {3, 7, 20}, {20, 33}, [](Graph& g, NodeId x, NodeId w, NodeId b) {
         return std::vector<NodeId>{g.add(OpId::add, {g.add(OpId::matmul, {x, w}), b})};
       }, true},
      {"(x @ w + b)^T", {9, 20}, {20, 33}, [](Graph& g, NodeId x, NodeId w, NodeId b) {
         const NodeId y = g.add(OpId::add, {g.add(OpId::matmul, {x, w}), b});
         return std::vector<NodeId>{g.add(OpId::neg, {g.add(OpId::permute, {y}, {Ints{1, 0}})}, {})};
       }, false},
      {"z + z^T", {33, 20}, {20, 33}, [](Graph& g, NodeId x, NodeId w, NodeId) {
         const NodeId z = g.add(OpId::matmul, {x, w});
         return std::vector<NodeId>{g.add(OpId::add, {z, g.add(OpId::permute, {z}, {Ints{1, 0}})}, {})};
       }, false},
  };
  uint64_t seed = 300;
  for (const Case& c : cases) {
    Graph g;
    const NodeId x = g.add_input(m(DType::f32, SymShape(c.x.begin(), c.x.end())));
    const NodeId w = g.add_input(m(DType::f32, SymShape(c.w.begin(), c.w.end())));
    const NodeId b = g.add_input(m(DType::f32, {c.w.back()}));
    g.set_outputs(c.build(g, x, w, b));
    const std::vector<TensorData> in{values(DType::f32, c.x, seed), values(DType::f32, c.w, seed + 1),
                                     values(DType::f32, {c.w.back()}, seed + 2)};
    seed += 3;
    for (bool fuse : {true, false}) {
      BOOST_TEST_CONTEXT(c.what << (fuse ? ", fused" : ", not fused")) {
        vulkan::CodegenOptions o = vulkan::codegen_options_for(0);
        o.fuse_gemm_epilogue = fuse;
        auto exe = load(g, o);
        bool any = false;
        for (const plan::PlanKernel& k : exe->plan().kernels)
          any = any || (k.gemm && k.source.find("kiln_epilogue(") != std::string::npos);
        BOOST_TEST(any == (fuse && c.fused));
        expect_matches(g, in, exe->run_host(in), DType::f32);
      }
    }
  }
}

// Kernels that compute alike over buffers in the same order (a model's repeated layers) give
// byte-identical shaders (buffers named by binding position), which load builds into one
// pipeline; each kernel still binds its own buffers: x_i @ w_i for three pairs, against the
// reference; and a plan whose gemm lost its tile is refused at load.
BOOST_AUTO_TEST_CASE(repeated_layers_share_pipelines_and_bind_their_own_buffers) {
  Graph g;
  std::vector<NodeId> outs;
  for (int i = 0; i < 3; ++i) {
    const NodeId x = g.add_input(m(DType::f32, {40, 24})), w = g.add_input(m(DType::f32, {24, 24}));
    outs.push_back(g.add(OpId::matmul, {x, w}));
  }
  g.set_outputs(outs);
  const Compiled cc = compile(g);
  BOOST_REQUIRE_MESSAGE(cc.error.empty(), cc.error);
  std::vector<const plan::PlanKernel*> gemms;
  for (const plan::PlanKernel& k : cc.plan.kernels)
    if (k.gemm) gemms.push_back(&k);
  BOOST_REQUIRE_EQUAL(gemms.size(), 3u);
  BOOST_TEST(gemms[0]->source == gemms[1]->source);
  BOOST_TEST(gemms[1]->source == gemms[2]->source);
  BOOST_TEST(gemms[0]->reads != gemms[2]->reads);
  Tolerance tol = tolerance_for(DType::f32, true);
  tol.rtol *= 4;
  tol.scale_by_abs_run = true;
  uint64_t seed = 90;
  std::vector<TensorData> in;
  for (int i = 0; i < 3; ++i) {
    in.push_back(values(DType::f32, {40, 24}, seed++));
    in.push_back(values(DType::f32, {24, 24}, seed++));
  }
  BOOST_TEST(run_and_compare(cc, in, {tol}) == "");

  plan::KernelPlan p = cc.plan;
  for (plan::PlanKernel& k : p.kernels)
    if (k.gemm) k.gemm->tile = {0, 0};
  const std::string err = error_of([&] { vulkan::PlanExecutable::load(p); });
  BOOST_TEST(err.find("without its tile") != std::string::npos, err);
}

// Flat indices are split into dims with 32-bit arithmetic where the kernel's domain has < 2^32
// elements, chosen at run time for symbolic domains (`narrow`), 64-bit where it has more (an
// iteration domain may: a reduction of a broadcast). NVIDIA's driver got int64 division chains
// wrong (docs/vulkan.md): the rank-5 broadcast and the gemm over two batch dims below are the
// cases it failed.
BOOST_AUTO_TEST_CASE(index_splits_by_domain_width) {
  const vulkan::CodegenOptions o = vulkan::codegen_options_for(0);
  auto sources = [&](const Graph& g) {
    std::string all;
    for (const plan::PlanKernel& k : vulkan::generate(schedule::schedule_graph(passes::run_default_pipeline(g),
                                                                               vulkan::schedule_target(o)), o).kernels)
      all += k.source;
    return all;
  };
  auto int64_rem = [](const std::string& src) {  // `x % <int64 size>` (not the uint splits)
    static const std::regex rem(R"( % (\d+l|pc\.s\d+)\b)");
    return std::regex_search(src, rem);
  };
  uint64_t seed = 80;
  {  // static, small: 32-bit splits only
    Graph g;
    const NodeId x = g.add_input(m(DType::f32, {2, 3, 1, 4, 1})), y = g.add_input(m(DType::f32, {3, 5, 1, 5}));
    const NodeId a = g.add_input(m(DType::f32, {2, 3, 16, 8})), b = g.add_input(m(DType::f32, {2, 3, 8, 16}));
    g.set_outputs({g.add(OpId::add, {x, y}, {}), g.add(OpId::matmul, {a, b})});
    const std::string src = sources(g);
    BOOST_TEST(src.find("const uint x0_u") != std::string::npos);
    BOOST_TEST(src.find("*int(") != std::string::npos, "buffer indices in 32 bits");
    BOOST_TEST(src.find("narrow") == std::string::npos);
    BOOST_TEST(!int64_rem(src), src);
    const std::vector<TensorData> in{values(DType::f32, {2, 3, 1, 4, 1}, seed++), values(DType::f32, {3, 5, 1, 5}, seed++),
                                     values(DType::f32, {2, 3, 16, 8}, seed++), values(DType::f32, {2, 3, 8, 16}, seed++)};
    expect_matches(g, in, load(g, o)->run_host(in), DType::f32);
  }
  {  // symbolic: the width is picked at run time
    Graph g;
    const SymInt s0 = g.shapes().create_symbol(4, 1, int64_t{1} << 40, "x.size(0)", true);
    const NodeId x = g.add_input(m(DType::f32, {s0, 3, 1, 5})), y = g.add_input(m(DType::f32, {3, 4, 1}));
    const NodeId a = g.add_input(m(DType::f32, {s0, 3, 16, 8})), b = g.add_input(m(DType::f32, {s0, 3, 8, 16}));
    g.set_outputs({g.add(OpId::mul, {x, y}, {}), g.add(OpId::matmul, {a, b})});
    const std::string src = sources(g);
    BOOST_TEST(src.find("const bool narrow = ") != std::string::npos);
    auto exe = load(g, o);
    for (int64_t n : {4, 1, 7}) {
      const std::vector<TensorData> in{values(DType::f32, {n, 3, 1, 5}, seed++), values(DType::f32, {3, 4, 1}, seed++),
                                       values(DType::f32, {n, 3, 16, 8}, seed++), values(DType::f32, {n, 3, 8, 16}, seed++)};
      expect_matches(g, in, exe->run_host(in), DType::f32);
    }
  }
  {  // a reduction over a static broadcast domain of 2^32 elements: 64-bit (generated, not run)
    Graph g;
    const NodeId x = g.add_input(m(DType::f32, {65536, 1})), y = g.add_input(m(DType::f32, {1, 65536}));
    g.set_outputs({g.add(OpId::sum, {g.add(OpId::mul, {x, y}, {})}, {Ints{0, 1}, false})});
    const std::string src = sources(g);
    BOOST_TEST(int64_rem(src), src);
    BOOST_TEST(src.find("uint(o)") == std::string::npos);
  }
}

// f32 sin and cos beyond the f32 reduction's range (|x| > 8192: Payne-Hanek in 32-bit integers,
// the polynomial in f32), at its edge, up to the largest f32, and of inf and NaN, with and without
// f64 on the device; the op cases' values stay below 8192. The kernel takes groups of 4 with the
// fast variants and computes a group again exactly when one of its elements needs it: elements
// 24-27 are a group that needs nothing, the others groups that do.
BOOST_AUTO_TEST_CASE(sin_cos_of_large_magnitudes) {
  std::vector<double> xs = {8191.75, 8192.0, -8192.0, 8192.001, -8192.5, 1e4, -31415.9, 65536.0, 123456.789,
                            -1e6, 3.0e7, -1.0e9, 4.0e11, 1e20, -2.5e30, 3.4e38, -3.4028234e38, 1.6166e38,
                            std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                            std::numeric_limits<double>::quiet_NaN(), 0.5, -1.25, 3.0, 100.0, -7.5, 2.0, 8191.0};
  std::mt19937_64 rng(90);
  std::uniform_real_distribution<double> mag(3.9, 38.5);
  while (xs.size() < 512) xs.push_back((rng() % 2 ? 1 : -1) * std::pow(10.0, mag(rng)));
  const int64_t n = static_cast<int64_t>(xs.size());
  Graph g;
  const NodeId x = g.add_input(m(DType::f32, {n}));
  g.set_outputs({g.add(OpId::sin, {x}, {}), g.add(OpId::cos, {x}, {})});
  const std::vector<TensorData> in{tensor(DType::f32, {n}, xs)};
  for (bool f64 : {true, false}) {  // (the same code: it needs no f64)
    vulkan::CodegenOptions o = vulkan::codegen_options_for(0);
    o.caps.float64 = o.caps.float64 && f64;
    auto exe = load(g, o);
    const std::string& src = exe->plan().kernels[0].source;
    BOOST_TEST(src.find("kiln_trig_reduce_f") != std::string::npos);
    BOOST_TEST(src.find("kiln_sin_fast_f(") != std::string::npos, "the group-wide exact path");
    BOOST_TEST(src.find("if (kiln_inexact != 0u)") != std::string::npos);
    expect_matches(g, in, exe->run_host(in), DType::f32);
  }
}

BOOST_AUTO_TEST_SUITE_END()
