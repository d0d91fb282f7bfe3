// What the CUDA codegen makes of the benchmark suite's workloads (shared/bench/suite.md) at their
// GPU sizes, without a GPU: vector accesses where the last dim allows them, registers for short
// rows, full reductions split over thousands of blocks, bf16 gemms kept in bf16. Every module is
// compiled with NVRTC for sm_90. --log_level=message prints the modules.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>

#include "kiln/config/config.h"
#include "kiln/graph/custom_ops.h"
#include "kiln/cuda/codegen.h"
#include "kiln/cuda/llvm_ptx.h"
#include "kiln/cuda/nvrtc.h"
#include "kiln/plan/plan_json.h"
#include "kiln/passes/passes.h"
#include "kiln/schedule/schedule.h"
#include "kiln_test_util.h"

using namespace kiln;
using kiln_test_util::contains;

namespace {

TensorMeta meta(DType t, SymShape s) { return TensorMeta{t, Device::cuda(0), std::move(s), {}}; }

// The CUDA C form unless asked otherwise (most cases here read it; the LLVM IR form:
// kernels_as_llvm_ir).
cuda::CodegenOptions cuda_c() {
  cuda::CodegenOptions o;
  o.compiler = "nvrtc";
  return o;
}
cuda::CodegenOptions llvm_ir() { return {}; }

plan::KernelPlan plan_of(const Graph& g, const cuda::CodegenOptions& o = cuda_c()) {
  const Graph opt = passes::run_default_pipeline(g);
  plan::KernelPlan p = cuda::generate(schedule::schedule_graph(opt, cuda::schedule_target()), o);
  BOOST_TEST_MESSAGE(p.module_source());
  cuda::nvrtc_compile(p.module_source(), "suite", 90, true);  // throws with the log on an error
  for (const plan::PlanKernel& k : p.kernels)
    if (k.own_module()) {  // LLVM IR: LLVM's NVPTX backend, then nvJitLink (throw on an error)
      BOOST_TEST_MESSAGE(k.source);
      cuda::cubin_from_ptx(cuda::ptx_from_llvm_ir(k.source, 90, "suite").ptx, 90, "suite");
    }
  return p;
}

const plan::PlanKernel& launched(const plan::KernelPlan& p, size_t i) {
  size_t n = 0;
  for (const plan::PlanKernel& k : p.kernels)
    if (!k.source.empty() && n++ == i) return k;
  BOOST_FAIL("plan has fewer than " << i + 1 << " generated kernels");
  return p.kernels.front();
}

NodeId scalar(Graph& g, double v) { return g.add(OpId::full, {}, {SymShape{}, v, DType::f32}); }

}  // namespace

BOOST_AUTO_TEST_SUITE(suite_codegen)

// Two layers computing the same thing on different buffers are one function in the module:
// kernels are named by content (lower::name_by_content), and the module holds a source once.
BOOST_AUTO_TEST_CASE(identical_layers_are_one_kernel_in_the_module) {
  Graph g;
  std::vector<NodeId> outs;
  for (const char* name : {"a", "b"}) {
    const NodeId x = g.add_input(meta(DType::f32, {64, 300}), name);
    outs.push_back(g.add(OpId::sum, {g.add(OpId::exp, {x}, {})}, {std::vector<int64_t>{1}, false}));
  }
  g.set_outputs(outs);
  const plan::KernelPlan p = plan_of(g);
  BOOST_REQUIRE_EQUAL(p.kernels.size(), 2u);
  BOOST_TEST(p.kernels[0].name != p.kernels[1].name);
  BOOST_TEST(p.kernels[0].entry == p.kernels[1].entry);
  BOOST_TEST(p.kernels[0].entry.rfind("kiln_", 0) == 0, p.kernels[0].entry);
  const std::string m = p.module_source();
  BOOST_TEST(m.find(p.kernels[0].source) == m.rfind(p.kernels[0].source));
}

BOOST_AUTO_TEST_CASE(pointwise_kernels_use_vector_accesses) {
  const cuda::CodegenOptions nvrtc = cuda_c();
  Graph g;  // sincos
  const NodeId x = g.add_input(meta(DType::f32, {16777216}), "x");
  g.set_outputs({g.add(OpId::add, {g.add(OpId::sin, {x}), g.add(OpId::cos, {x})})});
  const plan::KernelPlan p = plan_of(g, nvrtc);
  const std::string& src = launched(p, 0).source;
  BOOST_TEST(contains(src, "*(const float4*)(arg0 + "), src);
  BOOST_TEST(contains(src, "*(float4*)(arg1 + "), src);
  // Static sizes: nothing to check per launch (addresses are aligned, cuda::kBufferAlignment).
  BOOST_TEST(contains(src, "const bool vec = true;"), src);
  BOOST_TEST(!contains(src, "% 16 == 0"), src);
  // A thread a vector, one pass: no grid-stride loop (PlanLaunch::grid_stride).
  BOOST_TEST(!launched(p, 0).launch.grid_stride);
  BOOST_TEST(!contains(src, "gridDim"), src);

  Graph h;  // gelu_bias: the bias is a vector too (unit stride in the last dim)
  const NodeId a = h.add_input(meta(DType::f32, {64, 8192}), "x");
  const NodeId b = h.add_input(meta(DType::f32, {8192}), "b");
  h.set_outputs({h.add(OpId::gelu, {h.add(OpId::add, {a, b})}, {std::string("tanh")})});
  const plan::KernelPlan ph = plan_of(h, nvrtc);  // kept alive: hs refers into it
  const std::string& hs = launched(ph, 0).source;
  BOOST_TEST(contains(hs, "*(const float4*)(arg0 + "), hs);
  BOOST_TEST(contains(hs, "*(const float4*)(arg1 + "), hs);

  // A last dim that is not a multiple of 4: scalar accesses only.
  Graph odd;
  const NodeId y = odd.add_input(meta(DType::f32, {7, 33}), "y");
  odd.set_outputs({odd.add(OpId::exp, {y})});
  BOOST_TEST(!contains(launched(plan_of(odd, nvrtc), 0).source, "float4"));
  // Turned off: scalar accesses, 4 elements a thread in a grid-stride loop.
  cuda::CodegenOptions off = nvrtc;
  off.vector_accesses = false;
  const plan::KernelPlan scalar = plan_of(g, off);
  BOOST_TEST(!contains(launched(scalar, 0).source, "float4"));
  BOOST_TEST(launched(scalar, 0).launch.grid_stride);
  BOOST_TEST(contains(launched(scalar, 0).source, "gridDim"));
}

BOOST_AUTO_TEST_CASE(kernels_as_llvm_ir) {
  // cuda.compiler "llvm" (the default): pointwise kernels and row reductions are LLVM IR modules
  // for NVPTX, with the vector accesses, launches and math of their CUDA C form; plan_of
  // compiles each to a cubin (LLVM's NVPTX backend, nvJitLink).
  Graph g;  // gelu_bias
  const NodeId a = g.add_input(meta(DType::f32, {64, 8192}), "x");
  const NodeId b = g.add_input(meta(DType::f32, {8192}), "b");
  g.set_outputs({g.add(OpId::gelu, {g.add(OpId::add, {a, b})}, {std::string("tanh")})});
  const plan::KernelPlan p = plan_of(g, llvm_ir());
  const plan::PlanKernel& k = launched(p, 0);
  BOOST_TEST(k.language == "llvm");
  BOOST_TEST(cuda::is_nvptx_program(k.source));
  BOOST_TEST(!contains(p.module_source(), "k0"), "an LLVM IR kernel is not part of the CUDA C module");
  for (const char* s : {"load <4 x float>, ptr addrspace(1)", "store <4 x float>", "@__nv_tanhf"})
    BOOST_TEST(contains(k.source, s), s << "\n" << k.source);
  // 256 threads a block: no register bound (nvJitLink's ptxas would take all its budget); above
  // 256 the block bounds the registers (.maxntid), so that the block fits an SM.
  BOOST_TEST(k.launch.block == 256);
  BOOST_TEST(!contains(k.source, "maxntidx"), k.source);
  Graph wide;  // rows of 65536: a row reduction of 512 threads a row
  const NodeId w = wide.add_input(meta(DType::f32, {8, 65536}), "w");
  wide.set_outputs({wide.add(OpId::sum, {w}, {std::vector<int64_t>{1}, false})});
  const plan::KernelPlan pw = plan_of(wide, llvm_ir());
  const plan::PlanKernel& kw = launched(pw, 0);
  BOOST_TEST(kw.language == "llvm");
  BOOST_TEST(kw.launch.block > 256);
  BOOST_TEST(contains(kw.source, "\"maxntidx\", i32 " + std::to_string(kw.launch.block)), kw.source);
  BOOST_TEST(!k.launch.grid_stride);
  BOOST_TEST(!contains(k.source, "nctaid"), k.source);

  // A symbolic size: a grid-stride loop over the flattened domain (of a symbolic extent, so one
  // element at a time).
  Graph d;
  const SymInt n = d.shapes().create_symbol(64, 2, 1 << 20, "n", false);
  const NodeId y = d.add_input(meta(DType::f32, {n, 4096}), "y");
  const NodeId z = d.add_input(meta(DType::bf16, {n, 4096}), "z");
  d.set_outputs({d.add(OpId::mul, {d.add(OpId::exp, {y}), d.add(OpId::cast, {z}, {DType::f32})})});
  const plan::KernelPlan pd = plan_of(d, llvm_ir());
  const plan::PlanKernel& dk = launched(pd, 0);
  BOOST_TEST(dk.launch.grid_stride);
  for (const char* s : {"nctaid", "load i16", "@llvm.nvvm.ex2.approx.f"}) BOOST_TEST(contains(dk.source, s), s << "\n" << dk.source);

  // Every dtype and the integer ops, masked loads (pad) and precise math compile too.
  Graph m;
  const NodeId i = m.add_input(meta(DType::i32, {3, 10}), "i");
  const NodeId f = m.add_input(meta(DType::f16, {3, 10}), "f");
  const NodeId e = m.add_input(meta(DType::f64, {3, 10}), "e");
  const NodeId q = m.add(OpId::pow, {i, m.add(OpId::abs, {i})});
  const NodeId padded = m.add(OpId::pad, {f}, {std::vector<int64_t>{1, 1}, 0.0});
  m.set_outputs({q, padded, m.add(OpId::erf, {m.add(OpId::div, {e, m.add(OpId::cast, {f}, {DType::f64})})}),
                 m.add(OpId::logical_not, {m.add(OpId::isnan, {e})})});
  cuda::CodegenOptions precise = llvm_ir();
  precise.precise_math = true;
  const plan::KernelPlan pm = plan_of(m, precise);
  for (const plan::PlanKernel& mk : pm.kernels) BOOST_TEST((mk.source.empty() || mk.language == "llvm"));

  // Rows: softmax over rows kept in registers (16 a thread), over long rows (online max and
  // sum), layer_norm with its per-row values; warp shuffles and shared memory combine them.
  // (2048 rows: fewer long ones would be split, docs/schedule.md.)
  for (int64_t cols : {8192, 100000}) {
    Graph r;
    const NodeId x = r.add_input(meta(DType::f32, {2048, cols}), "x");
    r.set_outputs({r.add(OpId::softmax, {x}, {int64_t{1}})});
    const plan::KernelPlan pr = plan_of(r, llvm_ir());
    const std::string& src = launched(pr, 0).source;
    BOOST_TEST(launched(pr, 0).language == "llvm");
    for (const char* s : {"@llvm.nvvm.shfl.sync.bfly.i32", "@llvm.nvvm.barrier0", "addrspace(3) global", "load <4 x float>"})
      BOOST_TEST(contains(src, s), s << "\n" << src);
    BOOST_TEST(contains(src, "alloca [") == (cols == 8192), src);  // the row cache
  }
  Graph ln;
  const NodeId lx = ln.add_input(meta(DType::bf16, {64, 1000}), "x");
  const NodeId lw = ln.add_input(meta(DType::bf16, {1000}), "w");
  const NodeId lb = ln.add_input(meta(DType::bf16, {1000}), "b");
  ln.set_outputs({ln.add(OpId::layer_norm, {lx, lw, lb}, {int64_t{1}, 1e-5}),
                  ln.add(OpId::argmax, {lx}, {std::vector<int64_t>{1}, false}),
                  ln.add(OpId::max, {ln.add(OpId::cast, {lx}, {DType::f64})}, {std::vector<int64_t>{1}, false})});
  for (const plan::PlanKernel& lk : plan_of(ln, llvm_ir()).kernels) BOOST_TEST((lk.source.empty() || lk.language == "llvm"));

  // cuda.compiler "nvrtc": CUDA C.
  const plan::KernelPlan pc = plan_of(g, cuda_c());
  BOOST_TEST(launched(pc, 0).language.empty());
  BOOST_TEST(contains(launched(pc, 0).source, "float4"));
}

// scatter_add: a kernel setting the buffer to x, then one adding src atomically at run-time
// indices (clamped into the dim), in both compilers and every dtype a kernel adds (f16 and bf16
// add in f32); the embedding gradient's form (a 1-D index spread over rows) stays two kernels
// of the rows' and the table's sizes, not a one-hot product.
BOOST_AUTO_TEST_CASE(scatter_add_kernels_add_atomically) {
  for (DType t : {DType::f32, DType::f64, DType::i32, DType::i64, DType::bf16}) {
    Graph g;
    const NodeId x = g.add_input(meta(t, {50, 64}), "x");
    const NodeId i = g.add_input(meta(DType::i64, {300}), "ids");
    const NodeId src = g.add_input(meta(t, {300, 64}), "g");
    const NodeId index = g.add(OpId::expand, {g.add(OpId::reshape, {i}, {SymShape{300, 1}})}, {SymShape{300, 64}});
    g.set_outputs({g.add(OpId::scatter_add, {x, index, src}, {int64_t{0}})});
    for (const cuda::CodegenOptions& o : {cuda_c(), llvm_ir()}) {
      const plan::KernelPlan p = plan_of(g, o);
      size_t generated = 0;
      for (const plan::PlanKernel& k : p.kernels) generated += k.source.empty() ? 0 : 1;
      // init, scatter, the index check's sum (and bf16's cast of the f32 sums back)
      BOOST_TEST(generated == (t == DType::bf16 ? 4u : 3u), dtype_name(t));
      const std::string& src_text = launched(p, 1).source;
      const bool f = t != DType::i32 && t != DType::i64;
      BOOST_TEST(contains(src_text, o.compiler == "llvm" ? (f ? "atomicrmw fadd" : "atomicrmw add") : "atomicAdd("),
                 dtype_name(t) << "\n" << src_text);
    }
  }
}

// scatter_reduce: the same two kernels, the second combining with a compare-and-swap loop
// around the combine's op (atom.cas), compiled by both compilers for every dtype.
BOOST_AUTO_TEST_CASE(scatter_reduce_kernels_combine_by_compare_and_swap) {
  for (const char* reduce : {"amax", "amin", "prod"})
    for (DType t : {DType::f32, DType::f64, DType::i32, DType::i64, DType::f16}) {
      Graph g;
      const NodeId x = g.add_input(meta(t, {50, 64}), "x");
      const NodeId i = g.add_input(meta(DType::i64, {300}), "ids");
      const NodeId src = g.add_input(meta(t, {300, 64}), "g");
      const NodeId index = g.add(OpId::expand, {g.add(OpId::reshape, {i}, {SymShape{300, 1}})}, {SymShape{300, 64}});
      g.set_outputs({g.add(OpId::scatter_reduce, {x, index, src}, {int64_t{0}, std::string(reduce)})});
      for (const cuda::CodegenOptions& o : {cuda_c(), llvm_ir()}) {
        const plan::KernelPlan p = plan_of(g, o);
        const std::string& src_text = launched(p, 1).source;
        BOOST_TEST(contains(src_text, o.compiler == "llvm" ? "cmpxchg" : "atomicCAS("),
                   reduce << " " << dtype_name(t) << "\n" << src_text);
      }
    }
}

BOOST_AUTO_TEST_CASE(short_rows_are_read_once_as_vectors) {
  for (OpId op : {OpId::softmax, OpId::layer_norm}) {
    Graph g;
    const NodeId x = g.add_input(meta(DType::f32, {64, 8192}), "x");
    if (op == OpId::softmax) {
      g.set_outputs({g.add(OpId::softmax, {x}, {int64_t{1}})});
    } else {
      const NodeId w = g.add_input(meta(DType::f32, {8192}), "w");
      const NodeId b = g.add_input(meta(DType::f32, {8192}), "b");
      g.set_outputs({g.add(OpId::layer_norm, {x, w, b}, {int64_t{1}, 1e-5})});
    }
    const plan::KernelPlan p = plan_of(g);
    BOOST_REQUIRE_EQUAL(p.kernels.size(), 1u);
    const std::string& src = p.kernels[0].source;
    BOOST_TEST(p.kernels[0].launch.block == 512);
    // 64 rows, a block each: no grid-stride loop (PlanLaunch::grid_stride).
    BOOST_TEST(!p.kernels[0].launch.grid_stride);
    BOOST_TEST(contains(src, "const long long o = blockIdx.x;"), src);
    BOOST_TEST(!contains(src, "gridDim"), src);
    BOOST_TEST(contains(src, "[16];"), src);  // 16 elements a thread in registers
    BOOST_TEST(contains(src, "*(const float4*)(arg0 + "), src);
    BOOST_TEST(contains(src, "*(float4*)(arg"), src);  // and stores a vector
    if (op == OpId::layer_norm) {
      // mean and 1 / sqrt(var + eps) once per row, not once per element of the last pass
      size_t n = 0;
      for (size_t at = src.find("sqrtf("); at != std::string::npos; at = src.find("sqrtf(", at + 1)) ++n;
      BOOST_TEST(n == 1u, src);
    }
  }
}

BOOST_AUTO_TEST_CASE(f32_math_as_torch_compile_computes_it) {
  // softmax over rows of 8192: exp and division as Triton's (ex2.approx, div.full.f32), the
  // row max through NaN-propagating maxima (no flag beside it), and no bounds check per group
  // of elements where the row fills every group (512 threads x 4 groups x 4).
  Graph g;
  const NodeId x = g.add_input(meta(DType::f32, {64, 8192}), "x");
  g.set_outputs({g.add(OpId::softmax, {x}, {int64_t{1}})});
  const std::string fast = plan_of(g).kernels[0].source;
  for (const char* s : {"kiln_exp(", "kiln_div(", "kiln_fmaxn("}) BOOST_TEST(contains(fast, s), s << "\n" << fast);
  for (const char* s : {"expf(", " / ", "_nan", "if (jg < inner_total)"}) BOOST_TEST(!contains(fast, s), s << "\n" << fast);
  cuda::CodegenOptions precise = cuda_c();
  precise.precise_math = true;
  const std::string exact = plan_of(g, precise).kernels[0].source;
  for (const char* s : {"expf(", " / "}) BOOST_TEST(contains(exact, s), s << "\n" << exact);
  for (const char* s : {"kiln_exp(", "kiln_div("}) BOOST_TEST(!contains(exact, s), s << "\n" << exact);

  // A row that leaves the last group part-filled keeps the check; f64 keeps its NaN flag and
  // IEEE operations.
  Graph h;
  const NodeId y = h.add_input(meta(DType::f32, {64, 8000}), "y");
  h.set_outputs({h.add(OpId::softmax, {y}, {int64_t{1}})});
  BOOST_TEST(contains(plan_of(h).kernels[0].source, "if (jg < inner_total)"));
  Graph d;
  const NodeId z = d.add_input(meta(DType::f64, {64, 8192}), "z");
  d.set_outputs({d.add(OpId::softmax, {z}, {int64_t{1}})});
  const std::string f64 = plan_of(d).kernels[0].source;
  for (const char* s : {"_nan", "exp(", " / "}) BOOST_TEST(contains(f64, s), s << "\n" << f64);
  BOOST_TEST(!contains(f64, "kiln_exp("), f64);
}

BOOST_AUTO_TEST_CASE(add_layernorm_stores_both_outputs_as_vectors) {
  Graph g;  // add_layernorm: h = x + y is an output too, stored in the first pass
  const NodeId x = g.add_input(meta(DType::f32, {64, 8192}), "x");
  const NodeId y = g.add_input(meta(DType::f32, {64, 8192}), "y");
  const NodeId w = g.add_input(meta(DType::f32, {8192}), "w");
  const NodeId b = g.add_input(meta(DType::f32, {8192}), "b");
  const NodeId h = g.add(OpId::add, {x, y});
  g.set_outputs({h, g.add(OpId::layer_norm, {h, w, b}, {int64_t{1}, 1e-5})});
  const plan::KernelPlan p = plan_of(g);
  BOOST_REQUIRE_EQUAL(p.kernels.size(), 1u);
  const std::string& src = p.kernels[0].source;
  for (int buffer : {0, 1, 2, 3}) BOOST_TEST(contains(src, "*(const float4*)(arg" + std::to_string(buffer) + " + "), src);
  BOOST_TEST(contains(src, "*(float4*)(arg4 + "), src);
  BOOST_TEST(contains(src, "*(float4*)(arg5 + "), src);
}

BOOST_AUTO_TEST_CASE(full_reductions_spread_over_thousands_of_blocks) {
  Graph g;  // sum_all
  const NodeId x = g.add_input(meta(DType::f32, {int64_t{1} << 26}), "x");
  g.set_outputs({g.add(OpId::sum, {x}, {std::vector<int64_t>{}, false})});
  const plan::KernelPlan p = plan_of(g);
  BOOST_REQUIRE_EQUAL(p.kernels.size(), 2u);
  BOOST_TEST(p.kernels[0].parallel_extent.hint() == 2048);
  BOOST_TEST(contains(p.kernels[0].source, "float4"), p.kernels[0].source);
}

// A column reduction's thread loads cuda.column_loads_ahead rows of its column before it uses the
// first (one row at a time, a row's stores kept the next row's loads waiting); the rows left
// over go one at a time. The differential and op tests check the sums on a device.
BOOST_AUTO_TEST_CASE(column_reductions_load_rows_ahead) {
  Graph g;  // a bias's gradient beside the gradient itself: sum over rows, and a value per element
  const NodeId x = g.add_input(meta(DType::bf16, {1000, 768}), "x");
  const NodeId y = g.add(OpId::tanh, {x}, {});
  g.set_outputs({g.add(OpId::sum, {y}, {std::vector<int64_t>{0}, false}), g.add(OpId::mul, {y, y}, {})});
  for (int64_t ahead : {1, 4, 8}) {
    cuda::CodegenOptions o = cuda_c();
    o.column_loads_ahead = ahead;
    const plan::KernelPlan p = plan_of(g, o);
    std::string sources;
    for (const plan::PlanKernel& k : p.kernels) sources += k.source;
    const bool unrolled = contains(sources, "j + " + std::to_string(ahead - 1) + "LL * ");
    BOOST_TEST(unrolled == (ahead > 1), sources);
    BOOST_TEST(contains(sources, "for (; j < inner_total; j += "), sources);  // the rows left over
  }
}

BOOST_AUTO_TEST_CASE(attention_is_one_flash_kernel) {
  // attention_bf16 as the suite writes it: softmax(q @ k^T * (1/sqrt(64)), -1) @ v.
  Graph g;
  const NodeId q = g.add_input(meta(DType::bf16, {4, 16, 2048, 64}), "q");
  const NodeId k = g.add_input(meta(DType::bf16, {4, 16, 2048, 64}), "k");
  const NodeId v = g.add_input(meta(DType::bf16, {4, 16, 2048, 64}), "v");
  const NodeId s = g.add(OpId::mul, {g.add(OpId::matmul, {q, g.add(OpId::transpose, {k}, {int64_t{2}, int64_t{3}})}),
                                     g.add(OpId::full, {}, {SymShape{}, 0.125, DType::bf16})});
  g.set_outputs({g.add(OpId::matmul, {g.add(OpId::softmax, {s}, {int64_t{3}}), v})});
  const auto t0 = std::chrono::steady_clock::now();
  const plan::KernelPlan p = plan_of(g);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  BOOST_TEST_MESSAGE("attention: codegen and NVRTC (sm_90 cubin) " << ms << " ms");
  BOOST_REQUIRE_EQUAL(p.kernels.size(), 1u);
  const plan::PlanKernel& a = p.kernels[0];
  BOOST_TEST(a.kind == "attention");
  BOOST_TEST(contains(a.source, "kiln_flash<true, 64, 64, 2, 64, false, 0>"), a.source);
  BOOST_TEST(contains(p.prelude, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"));
  BOOST_TEST(a.launch.block == 128);
  BOOST_TEST(a.launch.items_per_block == 128);
  BOOST_TEST(a.reads == (std::vector<int32_t>{0, 1, 2}));
  BOOST_TEST((plan::plan_from_json(plan::plan_to_json(p), "attention").kernels[0].source == a.source), "json round trip");
  BOOST_TEST(p.arch == 0);

  // For an sm_90 device: Hopper's kernel (wgmma; 2 warpgroups of 64 rows, tiles in dynamic shared
  // memory), which plan_of compiles for sm_90a. The plan says which device it is for.
  cuda::CodegenOptions hopper;
  hopper.arch = 90;
  const plan::KernelPlan h = plan_of(g, hopper);
  BOOST_REQUIRE_EQUAL(h.kernels.size(), 1u);
  const plan::PlanKernel& w = h.kernels[0];
  BOOST_TEST(contains(w.source, "kiln_flash_wg<true, 64, 64, 2, 64, false, 0>"), w.source);
  BOOST_TEST(w.entry == "kiln_flash_sm90_bf16_d64_v64_t2_c64_pos_a16_dense_b4");
  BOOST_TEST(contains(h.prelude, "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"));
  BOOST_TEST(w.launch.block == 256);
  BOOST_TEST(w.launch.items_per_block == 128);
  BOOST_TEST(w.launch.shared_bytes == 82944);  // Q, 4 stages of K and V, 1 KiB to align
  BOOST_TEST(h.arch == 90);
  BOOST_TEST(plan::plan_from_json(plan::plan_to_json(h), "attention").arch == 90, "json round trip");
  hopper.attention_sm90 = false;  // max-autotune's other kernel
  BOOST_TEST(contains(plan_of(g, hopper).kernels[0].source, "kiln_flash<true, 64, 64, 2, 64, false, 0>"));
  hopper.attention_sm90 = true;
  Graph narrow;  // head dims other than 64 and 128: the mma.sync kernel
  auto in32 = [&](const char* name) { return narrow.add_input(meta(DType::f16, {2, 256, 32}), name); };
  const NodeId nq = in32("q"), nk = in32("k"), nv = in32("v");
  narrow.set_outputs({narrow.add(OpId::scaled_dot_product_attention, {nq, nk, nv}, {0.2})});
  BOOST_TEST(contains(plan_of(narrow, hopper).kernels[0].source, "kiln_flash<false, 32, 32, 2, "));

  // f32 (no fused kernel for it) and a head dim of 8 stay two gemms around a softmax.
  for (auto [t, d] : {std::pair{DType::f32, int64_t{64}}, std::pair{DType::bf16, int64_t{8}}}) {
    Graph h;
    const NodeId hq = h.add_input(meta(t, {2, 128, d}), "q");
    const NodeId hk = h.add_input(meta(t, {2, 128, d}), "k");
    const NodeId hv = h.add_input(meta(t, {2, 128, d}), "v");
    h.set_outputs({h.add(OpId::scaled_dot_product_attention, {hq, hk, hv}, {0.3})});
    const plan::KernelPlan hp = plan_of(h);
    int gemms = 0;
    for (const plan::PlanKernel& pk : hp.kernels) {
      BOOST_TEST(pk.kind != "attention");
      gemms += pk.gemm ? 1 : 0;
    }
    BOOST_TEST(gemms == 2, dtype_name(t) << " d " << d);
  }
}

BOOST_AUTO_TEST_CASE(masked_attention_is_one_flash_kernel) {
  // BERT's padding mask (one additive value per batch index and key, broadcast over heads and
  // query rows) and a decoder's causal mask (bool, from iotas): the flash kernel reads either in
  // place, at strides 0 along the dims it is broadcast over.
  Graph g;
  const NodeId q = g.add_input(meta(DType::bf16, {2, 12, 128, 64}), "q");
  const NodeId k = g.add_input(meta(DType::bf16, {2, 12, 128, 64}), "k");
  const NodeId v = g.add_input(meta(DType::bf16, {2, 12, 128, 64}), "v");
  const NodeId m = g.add_input(meta(DType::bf16, {2, 1, 1, 128}), "mask");
  g.set_outputs({g.add(OpId::scaled_dot_product_attention, {q, k, v, m}, {0.125})});
  for (int arch : {0, 90}) {
    cuda::CodegenOptions o;
    o.arch = arch;
    const plan::KernelPlan p = plan_of(g, o);
    BOOST_REQUIRE_EQUAL(p.kernels.size(), 1u);
    const plan::PlanKernel& a = p.kernels[0];
    BOOST_TEST(a.kind == "attention");
    BOOST_TEST(contains(a.source, arch == 90 ? "kiln_flash_wg<true, 64, 64, 2, 64, false, 2>" : "kiln_flash<true, 64, 64, 2, 64, false, 2>"),
               a.source);
    BOOST_TEST(a.entry.ends_with("_madd"), a.entry);
    BOOST_TEST(a.arg_buffers.size() == 5u);  // q, k, v, the mask, out
    BOOST_TEST(a.reads == (std::vector<int32_t>{0, 1, 2, 3}));
  }
  Graph c;  // causal: key <= row
  const NodeId cq = c.add_input(meta(DType::f16, {1, 8, 256, 64}), "q");
  const NodeId ck = c.add_input(meta(DType::f16, {1, 8, 256, 64}), "k");
  const NodeId cv = c.add_input(meta(DType::f16, {1, 8, 256, 64}), "v");
  const NodeId rows = c.add(OpId::iota, {}, {SymShape{256, 256}, int64_t{0}, DType::i64});
  const NodeId cols = c.add(OpId::iota, {}, {SymShape{256, 256}, int64_t{1}, DType::i64});
  c.set_outputs({c.add(OpId::scaled_dot_product_attention, {cq, ck, cv, c.add(OpId::le, {cols, rows})}, {0.125})});
  const plan::KernelPlan cp = plan_of(c);
  BOOST_REQUIRE_EQUAL(cp.kernels.size(), 2u);  // the mask, then attention reading it
  BOOST_TEST(cp.kernels[1].kind == "attention");
  BOOST_TEST(cp.kernels[1].entry.ends_with("_mbool_causal"), cp.kernels[1].entry);  // keys after a block's rows are skipped
  BOOST_TEST(contains(cp.kernels[1].source, "kiln_flash<false, 64, 64, 2, 64, false, 1>"), cp.kernels[1].source);
}

BOOST_AUTO_TEST_CASE(bf16_matmuls_multiply_in_bf16) {
  Graph g;  // mlp_bf16's first layer
  const NodeId x = g.add_input(meta(DType::bf16, {256, 512}), "x");
  const NodeId w = g.add_input(meta(DType::bf16, {512, 512}), "w");
  const NodeId b = g.add_input(meta(DType::bf16, {512}), "b");
  g.set_outputs({g.add(OpId::gelu, {g.add(OpId::add, {g.add(OpId::matmul, {x, w}), b})}, {std::string("tanh")})});
  const plan::KernelPlan p = plan_of(g);
  BOOST_REQUIRE_EQUAL(p.kernels.size(), 1u);  // the gemm and its epilogue; no casts
  BOOST_REQUIRE(p.kernels[0].gemm.has_value());
  const plan::PlanGemm& gm = *p.kernels[0].gemm;
  BOOST_TEST((gm.dtype == DType::bf16), "gemm dtype");
  // bias + gelu_tanh is cuBLASLt's GELU_BIAS epilogue: the gemm writes the output, no kernel.
  BOOST_TEST(gm.epilogue == "gelu_bias");
  BOOST_TEST(gm.bias == 2);
  BOOST_TEST(gm.c == p.outputs[0]);
  BOOST_TEST(p.kernels[0].entry.empty());
  // The plan file keeps the epilogue.
  BOOST_TEST((plan::plan_from_json(plan::plan_to_json(p), "mlp").kernels[0].gemm == p.kernels[0].gemm), "json round trip");

  // Without epilogues (or with an epilogue cuBLASLt has not: erf GELU): a vectorised kernel.
  cuda::CodegenOptions off = cuda_c();
  off.gemm_epilogues = false;
  const plan::KernelPlan q = plan_of(g, off);
  BOOST_TEST(q.kernels[0].gemm->epilogue.empty());
  BOOST_TEST(contains(q.kernels[0].source, "ushort4"), q.kernels[0].source);
  Graph h;
  const NodeId hx = h.add_input(meta(DType::bf16, {256, 512}), "x");
  const NodeId hw = h.add_input(meta(DType::bf16, {512, 512}), "w");
  const NodeId hb = h.add_input(meta(DType::bf16, {512}), "b");
  h.set_outputs({h.add(OpId::gelu, {h.add(OpId::add, {h.add(OpId::matmul, {hx, hw}), hb})}, {std::string("none")})});
  const plan::KernelPlan r = plan_of(h);
  BOOST_TEST(r.kernels[0].gemm->epilogue.empty());
  BOOST_TEST(!r.kernels[0].entry.empty());

  // A bias alone (the MLP's second layer).
  Graph b2;
  const NodeId y = b2.add_input(meta(DType::bf16, {256, 512}), "y");
  const NodeId w2 = b2.add_input(meta(DType::bf16, {512, 128}), "w2");
  const NodeId bias2 = b2.add_input(meta(DType::bf16, {128}), "b2");
  b2.set_outputs({b2.add(OpId::add, {b2.add(OpId::matmul, {y, w2}), bias2})});
  BOOST_TEST(plan_of(b2).kernels[0].gemm->epilogue == "bias");
}

// GPT-2's MLP: [B*T, C] @ [C, 4C] viewed as [B, T, 4C], the tanh GELU (here already as the op;
// test_recognize has the hand-written form), viewed back as [B*T, 4C] for the second gemm.
// simplify moves the GELU above the first view, the two views compose to nothing, and the GELU
// joins the first gemm: with a bias cuBLASLt's GELU_BIAS epilogue, without one its GELU epilogue.
BOOST_AUTO_TEST_CASE(a_gelu_after_a_view_of_the_product_is_the_gemms_epilogue) {
  for (const bool bias : {true, false}) {
    Graph g;
    const NodeId x = g.add_input(meta(DType::bf16, {32, 64}), "x");
    const NodeId w = g.add_input(meta(DType::bf16, {64, 256}), "w");
    NodeId p = g.add(OpId::matmul, {x, w});
    if (bias) p = g.add(OpId::add, {p, g.add_input(meta(DType::bf16, {256}), "b")});
    const NodeId v = g.add(OpId::reshape, {p}, {SymShape{2, 16, 256}});
    const NodeId h = g.add(OpId::reshape, {g.add(OpId::gelu, {v}, {std::string("tanh")})}, {SymShape{32, 256}});
    g.set_outputs({g.add(OpId::matmul, {h, g.add_input(meta(DType::bf16, {256, 64}), "w2")})});
    const plan::KernelPlan k = plan_of(g);
    BOOST_REQUIRE_EQUAL(k.kernels.size(), 2u);  // the two gemms
    BOOST_REQUIRE(k.kernels[0].gemm.has_value());
    BOOST_TEST(k.kernels[0].gemm->epilogue == (bias ? "gelu_bias" : "gelu"));
    BOOST_TEST(k.kernels[0].gemm->bias == (bias ? 2 : -1));
    BOOST_TEST(k.kernels[0].entry.empty());
    BOOST_TEST((plan::plan_from_json(plan::plan_to_json(k), "mlp").kernels[0].gemm == k.kernels[0].gemm), "json round trip");
  }
}

BOOST_AUTO_TEST_CASE(a_scaled_product_is_scaled_by_the_gemm) {
  Graph g;  // q k^T * 0.125 as an output of its own (in attention the softmax kernel scales inline)
  const NodeId q = g.add_input(meta(DType::bf16, {2, 4, 256, 64}), "q");
  const NodeId k = g.add_input(meta(DType::bf16, {2, 4, 256, 64}), "k");
  const NodeId s = g.add(OpId::matmul, {q, g.add(OpId::transpose, {k}, {int64_t{2}, int64_t{3}})});
  g.set_outputs({g.add(OpId::mul, {s, g.add(OpId::full, {}, {SymShape{}, 0.125, DType::bf16})})});
  const plan::KernelPlan p = plan_of(g);
  BOOST_REQUIRE_EQUAL(p.kernels.size(), 1u);
  BOOST_REQUIRE(p.kernels[0].gemm.has_value());
  BOOST_TEST(p.kernels[0].gemm->alpha == 0.125);
  BOOST_TEST(p.kernels[0].gemm->c == p.outputs[0]);
  BOOST_TEST(p.kernels[0].entry.empty());
  BOOST_TEST((plan::plan_from_json(plan::plan_to_json(p), "scaled").kernels[0].gemm == p.kernels[0].gemm), "json round trip");
  // Without gemm epilogues the scale is the epilogue kernel's.
  cuda::CodegenOptions off = cuda_c();
  off.gemm_epilogues = false;
  const plan::KernelPlan r = plan_of(g, off);
  BOOST_TEST(r.kernels[0].gemm->alpha == 1.0);
  BOOST_TEST(!r.kernels[0].entry.empty());
}

// A gemm does its epilogue itself (cuBLASLt's GELU_BIAS, alpha) only where no later kernel reads
// its product: a training step's backward reads x @ w again (gelu's gradient at x @ w + b), and a
// gemm writing only gelu(x @ w + b) left x @ w unwritten (the f32 GPT-2 step on the H200).
BOOST_AUTO_TEST_CASE(a_gemm_keeps_its_product_where_a_later_kernel_reads_it) {
  for (const bool gelu : {true, false}) {
    Graph g;
    const NodeId x = g.add_input(meta(DType::f32, {256, 512}), "x");
    const NodeId w = g.add_input(meta(DType::f32, {512, 1024}), "w");
    const NodeId b = g.add_input(meta(DType::f32, {1024}), "b");
    const NodeId p = g.add(OpId::matmul, {x, w});
    const NodeId e = gelu ? g.add(OpId::gelu, {g.add(OpId::add, {p, b})}, {std::string("tanh")})
                          : g.add(OpId::mul, {p, scalar(g, 0.125)});
    g.set_outputs({e});
    const plan::KernelPlan alone = plan_of(g);
    if (gelu) BOOST_TEST(alone.kernels[0].gemm->epilogue == "gelu_bias");
    else BOOST_TEST(alone.kernels[0].gemm->alpha == 0.125);
    g.set_outputs({e, g.add(OpId::sum, {p}, Attrs{std::vector<int64_t>{1}, false})});
    const plan::KernelPlan read_again = plan_of(g);
    BOOST_TEST(read_again.kernels[0].gemm->epilogue.empty());
    BOOST_TEST(read_again.kernels[0].gemm->alpha == 1.0);
    BOOST_TEST(!read_again.kernels[0].entry.empty());  // the epilogue kernel runs after the gemm
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(suite_codegen_online)

BOOST_AUTO_TEST_CASE(long_rows_take_max_and_sum_in_one_pass) {
  // 65536 elements a row: more than a block keeps in registers, so the row is read twice
  // (max and sum together, then the output) instead of three times. (2048 rows: fewer would
  // split their rows over blocks, docs/schedule.md.)
  for (int64_t cols : {int64_t{65536}, int64_t{65537}}) {
    Graph g;
    const NodeId x = g.add_input(meta(DType::f32, {2048, cols}), "x");
    g.set_outputs({g.add(OpId::softmax, {x}, {int64_t{1}})});
    const plan::KernelPlan p = plan_of(g);
    BOOST_REQUIRE_EQUAL(p.kernels.size(), 1u);
    const std::string& src = p.kernels[0].source;
    BOOST_TEST(contains(src, "_acc * kiln_exp("), src);
    BOOST_TEST(contains(src, "a1_nan"), src);  // the running max skips NaN: a flag says it was seen
    BOOST_TEST(!contains(src, "lc"), src);
    cuda::CodegenOptions off = cuda_c();
    off.online_softmax = false;
    BOOST_TEST(!contains(plan_of(g, off).kernels[0].source, "_acc * kiln_exp("));
    BOOST_TEST(!contains(plan_of(g, off).kernels[0].source, "_nan"));
  }
}

// A convolution is one kernel of kind convolution (cuDNN's, no source) followed by the pointwise
// kernel of its bias, batch norm and activation; the plan's JSON keeps it byte for byte, and a
// plan whose convolution does not fit its buffers is refused when read.
BOOST_AUTO_TEST_CASE(convolutions_run_through_cudnn_and_their_epilogue_is_one_kernel) {
  Graph g;
  const NodeId x = g.add_input(meta(DType::bf16, {8, 16, 14, 14}), "x");
  const NodeId w = g.add_input(meta(DType::bf16, {32, 16, 3, 3}), "w");
  const NodeId b = g.add_input(meta(DType::bf16, {32}), "b");
  const NodeId scale = g.add_input(meta(DType::bf16, {32, 1, 1}), "scale");
  const NodeId y = g.add(OpId::convolution, {x, w, b},
                         {std::vector<int64_t>{2, 2}, std::vector<int64_t>{1, 1, 1, 1}, std::vector<int64_t>{1, 1}, int64_t{1}});
  g.set_outputs({g.add(OpId::relu, {g.add(OpId::mul, {y, scale})}, {})});
  const config::Patch channels_first{{"cuda.channels_last", false}};
  const plan::KernelPlan p = plan_of(g);
  BOOST_REQUIRE_EQUAL(p.kernels.size(), 2u);
  BOOST_TEST(p.kernels[0].kind == "convolution");
  BOOST_TEST(p.kernels[0].source.empty());
  BOOST_REQUIRE(p.kernels[0].convolution.has_value());
  const plan::PlanConvolution& c = *p.kernels[0].convolution;
  BOOST_TEST((c.dtype == DType::bf16));
  BOOST_TEST(shape_str(c.y_sizes()) == "[8, 32, 7, 7]");
  BOOST_TEST(p.kernels[1].kind == "pointwise");
  const std::string text = plan::plan_to_json(p);
  BOOST_TEST(plan::plan_to_json(plan::plan_from_json(text, "conv.json")) == text);
  auto error_of = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json d = nlohmann::json::parse(text);
    edit(d["kernels"][0]["convolution"]);
    try {
      plan::plan_from_json(d.dump(), "conv.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  BOOST_TEST(contains(error_of([](nlohmann::json& v) { v["strides"] = {1, 1}; }), "but the convolution gives [8, 32, 14, 14]"));
  BOOST_TEST(contains(error_of([&](nlohmann::json& v) { v["y"] = v["x"]; }), "three different buffers"));
  BOOST_TEST(contains(error_of([](nlohmann::json& v) { v["dtype"] = "f32"; }), "the convolution is f32 but buffer"));
  BOOST_TEST(contains(error_of([](nlohmann::json& v) { v["groups"] = 3; }), "does not match 16 input channels in 3 groups"));
}

// A convolution's gradients (convolution_input_grad and convolution_weight_grad, what the
// autodiff rule of a convolution gives) run through cuDNN's backward data and backward filter,
// channels last like the forward, each one kernel writing the gradient buffer; the plan says
// which (computes) and keeps it through JSON; a plan whose gradient kernel would write an input
// is refused. A 1x1 one of unit stride is a gemm over the channels instead.
BOOST_AUTO_TEST_CASE(convolution_gradients_run_through_cudnn) {
  const config::Patch channels_last{{"cuda.channels_last", true}};
  using V = std::vector<int64_t>;
  Graph g;
  const NodeId x = g.add_input(meta(DType::bf16, {8, 16, 14, 14}), "x");
  const NodeId w = g.add_input(meta(DType::bf16, {32, 16, 3, 3}), "w");
  const NodeId gy = g.add_input(meta(DType::bf16, {8, 32, 7, 7}), "gy");
  const NodeId w1 = g.add_input(meta(DType::bf16, {32, 16, 1, 1}), "w1");
  const NodeId gy1 = g.add_input(meta(DType::bf16, {8, 32, 14, 14}), "gy1");
  const Attrs a{V{2, 2}, V{1, 1, 1, 1}, V{1, 1}, int64_t{1}, V{14, 14}, false};
  const Attrs aw{V{2, 2}, V{1, 1, 1, 1}, V{1, 1}, int64_t{1}, V{3, 3}, false};
  const Attrs unit{V{1, 1}, V{0, 0, 0, 0}, V{1, 1}, int64_t{1}, V{14, 14}, false};
  const Attrs unit_w{V{1, 1}, V{0, 0, 0, 0}, V{1, 1}, int64_t{1}, V{1, 1}, false};
  g.set_outputs({g.add(OpId::convolution_input_grad, {gy, w}, a), g.add(OpId::convolution_weight_grad, {x, gy}, aw),
                 g.add(OpId::convolution_input_grad, {gy1, w1}, unit), g.add(OpId::convolution_weight_grad, {x, gy1}, unit_w)});
  const plan::KernelPlan p = plan_of(g);
  std::vector<ConvolutionComputes> seen;
  for (const plan::PlanKernel& k : p.kernels) {
    if (k.kind != "convolution") continue;
    BOOST_REQUIRE(k.convolution.has_value());
    BOOST_TEST(k.convolution->channels_last);
    BOOST_TEST(shape_str(k.convolution->x_sizes) == "[8, 14, 14, 16]");
    BOOST_TEST(shape_str(k.convolution->y_sizes()) == "[8, 7, 7, 32]");
    seen.push_back(k.convolution->computes);
  }
  BOOST_REQUIRE_EQUAL(seen.size(), 2u);  // the 1x1 ones are gemms
  BOOST_TEST((std::count(seen.begin(), seen.end(), ConvolutionComputes::x) == 1));
  BOOST_TEST((std::count(seen.begin(), seen.end(), ConvolutionComputes::w) == 1));
  const std::string text = plan::plan_to_json(p);
  BOOST_TEST(contains(text, "\"computes\""));
  BOOST_TEST(plan::plan_to_json(plan::plan_from_json(text, "conv.json")) == text);
  auto error_of = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json d = nlohmann::json::parse(text);
    for (nlohmann::json& k : d["kernels"])
      if (k.contains("convolution") && k["convolution"].value("computes", "y") == "x") edit(k["convolution"]);
    try {
      plan::plan_from_json(d.dump(), "conv.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  BOOST_TEST(contains(error_of([](nlohmann::json& c) { c["computes"] = "z"; }), "expected \"y\""));
  BOOST_TEST(contains(error_of([](nlohmann::json& c) { c["x"] = c["y"]; }), "three different buffers"));
  BOOST_TEST(contains(error_of([](nlohmann::json& c) { c["x_sizes"][1] = 15; }), "are not the sizes of buffer"));
}

// The layout a compiled call's forward and backward are cut on (schedule::channels_last_layout,
// frontends/cpp/src/call_gradients.cpp): a bf16 convolution, relu, convolution chain comes back
// channels last, the relu reading the first convolution's channels-last output (the permutes
// between them cancelled), so a value the forward stores for the backward is that output; in
// f32 (no TF32) the schedule keeps the graph's layout, and nothing comes back.
BOOST_AUTO_TEST_CASE(a_graph_to_cut_gets_the_layout_its_schedule_would_give_it) {
  const config::Patch channels_last{{"cuda.channels_last", true}};
  auto chain = [](DType t) {
    Graph g;
    const NodeId x = g.add_input(meta(t, {8, 16, 14, 14}), "x");
    const NodeId w0 = g.add_input(meta(t, {16, 16, 3, 3}), "w0");
    const NodeId w1 = g.add_input(meta(t, {16, 16, 3, 3}), "w1");
    const NodeId h = g.add(OpId::relu, {g.add(OpId::convolution, {x, w0},
                                              {std::vector<int64_t>{1, 1}, std::vector<int64_t>{1, 1, 1, 1},
                                               std::vector<int64_t>{1, 1}, int64_t{1}})},
                           {});
    g.set_outputs({g.add(OpId::convolution, {h, w1},
                         {std::vector<int64_t>{1, 1}, std::vector<int64_t>{1, 1, 1, 1}, std::vector<int64_t>{1, 1}, int64_t{1}})});
    return g;
  };
  const std::optional<Graph> laid = schedule::channels_last_layout(chain(DType::bf16), cuda::schedule_target());
  BOOST_REQUIRE(laid.has_value());
  int convolutions = 0, relus = 0;
  for (const Node& n : laid->nodes()) {
    convolutions += n.op == OpId::convolution_channels_last;
    if (n.op != OpId::relu) continue;
    ++relus;
    BOOST_TEST((laid->node(n.inputs[0]).op == OpId::convolution_channels_last), laid->str());
  }
  BOOST_TEST(convolutions == 2, laid->str());
  BOOST_TEST(relus == 1, laid->str());
  BOOST_TEST(!schedule::channels_last_layout(chain(DType::f32), cuda::schedule_target()).has_value());
}

// Channels last (cuda.channels_last): the convolution reads x and w as NHWC and
// KRSC copies (an input's layout is the caller's) and writes y channels last; its epilogue
// reads y channels last and writes the output in the graph's order. The plan says so and keeps
// it through JSON; a plan claiming the other layout does not fit its buffers.
// ConvNeXt blocks (a 7x7 depthwise convolution, a layer norm over the channels and an MLP
// between a permute to channels last and one back, a residual add) after a 4x4 stem of stride 4
// run channels last though no convolution is cuDNN's (the stem's windows tile x: a gemm over
// its patches) and the MLPs do most of the work: the blocks' permutes cancel the
// convolutions', so the depthwise taps and the norm are one row kernel over the channels, and
// that kernel computes its taps once, keeping the values across the norm's passes
// (cstyle::row_values_to_keep) rather than the 98 loads each is computed from, and reads each
// tap's weights as it reads x's, side by side along the channels (a small copy of the weight,
// tap-major, before it).
BOOST_AUTO_TEST_CASE(convnext_blocks_run_channels_last_with_the_taps_computed_once) {
  const config::Patch channels_last{{"cuda.channels_last", true}};
  using V = std::vector<int64_t>;
  const int64_t c = 64;
  Graph g;
  const NodeId x = g.add_input(meta(DType::bf16, {2, 3, 32, 32}), "x");
  NodeId h = g.add(OpId::convolution, {x, g.add_input(meta(DType::bf16, {c, 3, 4, 4}), "stem")}, {V{4, 4}, V{0, 0, 0, 0}, V{1, 1}, int64_t{1}});
  for (int block = 0; block < 2; ++block) {
    const std::string b = std::to_string(block);
    const NodeId dw = g.add(OpId::convolution, {h, g.add_input(meta(DType::bf16, {c, 1, 7, 7}), "dw" + b)}, {V{1, 1}, V{3, 3, 3, 3}, V{1, 1}, c});
    const NodeId rows = g.add(OpId::permute, {dw}, {V{0, 2, 3, 1}});
    const NodeId normed = g.add(OpId::layer_norm, {rows, g.add_input(meta(DType::bf16, {c}), "g" + b), g.add_input(meta(DType::bf16, {c}), "b" + b)},
                                {int64_t{1}, 1e-6});
    const NodeId up = g.add(OpId::gelu, {g.add(OpId::linear, {normed, g.add_input(meta(DType::bf16, {4 * c, c}), "w1" + b)})}, {std::string("none")});
    const NodeId down = g.add(OpId::linear, {up, g.add_input(meta(DType::bf16, {c, 4 * c}), "w2" + b)});
    h = g.add(OpId::add, {g.add(OpId::permute, {down}, {V{0, 3, 1, 2}}), h});
  }
  g.set_outputs({g.add(OpId::mean, {h}, {V{2, 3}, false})});
  const plan::KernelPlan p = plan_of(g, llvm_ir());
  int convolutions = 0, norms = 0;
  for (const plan::PlanKernel& k : p.kernels) {
    if (k.convolution) {
      ++convolutions;
      BOOST_TEST(k.convolution->channels_last);
    }
    if (k.kind != "reduction" || !contains(k.source, "rsqrt")) continue;
    ++norms;
    // Each tap of each of a thread's channels loaded once (the first pass), not once per pass:
    // an input vector and a weight vector per tap and group of 4 channels (the weights stored
    // tap-major for the kernel, so they lie side by side along the channels as x's taps do),
    // and no scalar load per tap: fewer than twice 2 * 49 vectors a group.
    const size_t scalars = kiln_test_util::count_of(k.source, "load i16, ptr addrspace(1)");
    const size_t vectors = kiln_test_util::count_of(k.source, "load <4 x i16>, ptr addrspace(1)");
    const int64_t row_threads = k.launch.block / k.launch.items_per_block;
    const int64_t groups = (c + 4 * row_threads - 1) / (4 * row_threads);  // a thread's
    BOOST_TEST_MESSAGE("taps and norm: " << vectors << " vector loads, " << scalars << " scalar, " << groups << " groups a thread");
    BOOST_TEST(scalars < static_cast<size_t>(49), k.source);
    BOOST_TEST(vectors >= static_cast<size_t>(2 * 49 * groups), k.source);
    BOOST_TEST(vectors < static_cast<size_t>(2 * 2 * 49 * groups), k.source);
  }
  BOOST_TEST(convolutions == 0);  // the stem a gemm, the depthwise ones generated
  BOOST_TEST(norms == 2);
}

BOOST_AUTO_TEST_CASE(convolutions_run_channels_last) {
  const config::Patch channels_last{{"cuda.channels_last", true}};
  Graph g;
  const NodeId x = g.add_input(meta(DType::bf16, {8, 16, 14, 14}), "x");
  const NodeId w = g.add_input(meta(DType::bf16, {32, 16, 3, 3}), "w");
  const NodeId b = g.add_input(meta(DType::bf16, {32}), "b");
  const NodeId y = g.add(OpId::convolution, {x, w, b},
                         {std::vector<int64_t>{2, 2}, std::vector<int64_t>{1, 1, 1, 1}, std::vector<int64_t>{1, 1}, int64_t{1}});
  // A strided 1x1 projection whose weight [32, 16, 1, 1] read as [32, 1, 1, 16] keeps its memory:
  // the kernel still gets a buffer of the operand's sizes (a view of the input's was refused).
  const NodeId w1 = g.add_input(meta(DType::bf16, {32, 16, 1, 1}), "w1");
  const NodeId shortcut = g.add(OpId::convolution, {x, w1},
                                {std::vector<int64_t>{2, 2}, std::vector<int64_t>{0, 0, 0, 0}, std::vector<int64_t>{1, 1}, int64_t{1}});
  g.set_outputs({g.add(OpId::relu, {g.add(OpId::add, {y, shortcut})}, {})});
  const plan::KernelPlan p = plan_of(g);
  int convolutions = 0;
  for (const plan::PlanKernel& k : p.kernels) {
    if (k.kind != "convolution") continue;
    ++convolutions;
    BOOST_REQUIRE(k.convolution.has_value());
    BOOST_TEST(k.convolution->channels_last);
    BOOST_TEST(shape_str(k.convolution->x_sizes) == "[8, 14, 14, 16]");
    BOOST_TEST(shape_str(k.convolution->y_sizes()) == "[8, 7, 7, 32]");
  }
  BOOST_TEST(convolutions == 2);
  const std::string text = plan::plan_to_json(p);
  BOOST_TEST(contains(text, "\"channels_last\""));
  BOOST_TEST(plan::plan_to_json(plan::plan_from_json(text, "conv.json")) == text);
  nlohmann::json d = nlohmann::json::parse(text);
  for (nlohmann::json& k : d["kernels"])
    if (k.contains("convolution")) k["convolution"]["channels_last"] = false;
  try {
    plan::plan_from_json(d.dump(), "conv.json");
    BOOST_ERROR("a channels-last convolution read as channels first was accepted");
  } catch (const Error& e) {
    BOOST_TEST_MESSAGE(e.what());
  }
  // A graph whose work is in depthwise and 1x1 convolutions (a MobileNet block after a small
  // stem) stays channels first: cuDNN would run only the stem.
  Graph m;
  const NodeId mx = m.add_input(meta(DType::bf16, {8, 3, 32, 32}), "x");
  const NodeId stem = m.add(OpId::convolution, {mx, m.add_input(meta(DType::bf16, {16, 3, 3, 3}), "w0")},
                            {std::vector<int64_t>{2, 2}, std::vector<int64_t>{1, 1, 1, 1}, std::vector<int64_t>{1, 1}, int64_t{1}});
  const NodeId expand = m.add(OpId::convolution, {stem, m.add_input(meta(DType::bf16, {96, 16, 1, 1}), "w1")},
                              {std::vector<int64_t>{1, 1}, std::vector<int64_t>{0, 0, 0, 0}, std::vector<int64_t>{1, 1}, int64_t{1}});
  const NodeId dw = m.add(OpId::convolution, {m.add(OpId::relu, {expand}, {}), m.add_input(meta(DType::bf16, {96, 1, 3, 3}), "w2")},
                          {std::vector<int64_t>{1, 1}, std::vector<int64_t>{1, 1, 1, 1}, std::vector<int64_t>{1, 1}, int64_t{96}});
  m.set_outputs({m.add(OpId::convolution, {dw, m.add_input(meta(DType::bf16, {24, 96, 1, 1}), "w3")},
                       {std::vector<int64_t>{1, 1}, std::vector<int64_t>{0, 0, 0, 0}, std::vector<int64_t>{1, 1}, int64_t{1}})});
  // The plan's cuDNN convolutions, each checked to run channels first.
  auto channels_first_convolutions = [](const plan::KernelPlan& p) {
    int n = 0;
    for (const plan::PlanKernel& k : p.kernels)
      if (k.convolution) {
        ++n;
        BOOST_TEST(!k.convolution->channels_last);
      }
    return n;
  };
  BOOST_TEST(channels_first_convolutions(plan_of(m)) == 1);  // the stem
  // f32 convolutions run channels last only on tensor cores (TF32): cuDNN's NHWC input gradients
  // with FMA math took 29-36 ms each in ResNet-50's step.
  Graph f;
  const NodeId fx = f.add_input(meta(DType::f32, {8, 16, 14, 14}), "x");
  f.set_outputs({f.add(OpId::convolution, {fx, f.add_input(meta(DType::f32, {32, 16, 3, 3}), "w")},
                       {std::vector<int64_t>{2, 2}, std::vector<int64_t>{1, 1, 1, 1}, std::vector<int64_t>{1, 1}, int64_t{1}})});
  BOOST_TEST(channels_first_convolutions(plan_of(f)) == 1);
  {
    const config::Patch tf32{{"cuda.allow_tf32", true}};
    bool last = false;
    for (const plan::PlanKernel& k : plan_of(f).kernels) last = last || (k.convolution && k.convolution->channels_last);
    BOOST_TEST(last);
  }
  // A graph whose matrix products do most of the work and that has no permutes channels last
  // would cancel (a downsampling convolution, then an MLP over the channels as an output read
  // channels first) stays channels first too: channels last would only move the permutes.
  Graph c;
  const NodeId cx = c.add_input(meta(DType::bf16, {8, 16, 14, 14}), "x");
  const NodeId down = c.add(OpId::convolution, {cx, c.add_input(meta(DType::bf16, {32, 16, 2, 2}), "w0")},
                            {std::vector<int64_t>{2, 2}, std::vector<int64_t>{0, 0, 0, 0}, std::vector<int64_t>{1, 1}, int64_t{1}});
  const NodeId rows = c.add(OpId::permute, {down}, {std::vector<int64_t>{0, 2, 3, 1}});
  const NodeId up = c.add(OpId::relu, {c.add(OpId::linear, {rows, c.add_input(meta(DType::bf16, {128, 32}), "w1")})}, {});
  const NodeId back = c.add(OpId::linear, {up, c.add_input(meta(DType::bf16, {32, 128}), "w2")});
  c.set_outputs({c.add(OpId::permute, {back}, {std::vector<int64_t>{0, 3, 1, 2}})});
  BOOST_TEST(channels_first_convolutions(plan_of(c)) == 1);  // the downsampling
}

// A custom op with a CUDA kernel (kiln/graph/custom_ops.h) is that kernel in the plan, of fixed
// signature: its buffers, then the thread count and every size (symbolic ones evaluated at
// launch), compiled with the module; its JSON form reads back the same. Without one, the op is a
// reference kernel run on the host.
BOOST_AUTO_TEST_CASE(a_custom_ops_cuda_kernel_is_a_kernel_of_fixed_signature) {
  CustomOpDef d;
  d.name = "codegen::scale_rows";
  d.version = "1";
  d.infer = [](std::span<const TensorMeta* const> in, const std::string&, ShapeEnv&) { return *in[0]; };
  d.compute = [](std::span<const TensorData>, const std::string&, const TensorData&) {};
  CustomOpKernel k;
  k.entry = "scale_rows";
  k.source = R"(
extern "C" __global__ void scale_rows(const float* x, float* y, long long n, long long y0, long long y1, long long x0,
                                      long long x1) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * (float)(i / y1 + 1);
}
)";
  k.block = 128;
  d.device_kernels.emplace("cuda", k);
  register_custom_op(d);
  const std::string version = find_custom_op("codegen::scale_rows")->version;
  BOOST_TEST(version.rfind("1 #", 0) == 0, version);
  Graph g;
  const SymInt rows = g.shapes().create_symbol(4, 2, 1 << 20, "rows", false);
  const NodeId x = g.add_input(meta(DType::f32, {rows, 8}), "x");
  const NodeId y = g.add(OpId::custom, {g.add(OpId::exp, {x})}, {std::string("codegen::scale_rows"), version, std::string()});
  g.set_outputs({g.add(OpId::add, {y, x})});
  const plan::KernelPlan p = plan_of(g);
  BOOST_REQUIRE_EQUAL(p.kernels.size(), 3u);
  const plan::PlanKernel& c = p.kernels[1];
  BOOST_TEST(c.kind == "custom");
  BOOST_TEST(c.entry == "scale_rows");
  BOOST_TEST(c.fixed_signature());
  BOOST_TEST(c.arg_buffers.size() == 2u);
  BOOST_REQUIRE_EQUAL(c.arg_values.size(), 5u);
  BOOST_TEST((c.arg_values[0] == rows * 8));  // one thread per element
  BOOST_TEST((c.arg_values[1] == rows));
  BOOST_TEST((c.arg_values[4] == SymInt(8)));
  BOOST_TEST(c.launch.block == 128);
  BOOST_TEST(!c.launch.grid_stride);
  cuda::nvrtc_compile(p.kernel_program(1), "custom", 90, true);
  const plan::KernelPlan back = plan::plan_from_json(plan::plan_to_json(p));
  BOOST_TEST(back.kernels[1].kind == "custom");
  BOOST_TEST(back.kernels[1].source == c.source);
  BOOST_TEST((back.kernels[1].arg_values == c.arg_values));
  // A strided input (a transposed view passed in): the reference kernel, which reads it through
  // its strides.
  Graph t;
  const NodeId tx = t.add_input(TensorMeta{DType::f32, Device::cuda(0), {SymInt(8), SymInt(4)}, {SymInt(1), SymInt(8)}}, "x");
  t.set_outputs({t.add(OpId::custom, {tx}, {std::string("codegen::scale_rows"), version, std::string()})});
  const plan::KernelPlan tp = plan_of(t);
  BOOST_REQUIRE_EQUAL(tp.kernels.size(), 1u);
  BOOST_TEST(tp.kernels[0].kind == "reference");
  // Without a CUDA kernel: a reference kernel.
  d.device_kernels.clear();
  register_custom_op(d);
  Graph h;
  const NodeId hx = h.add_input(meta(DType::f32, {4, 8}), "x");
  h.set_outputs({h.add(OpId::custom, {hx}, {std::string("codegen::scale_rows"), std::string("1"), std::string()})});
  const plan::KernelPlan q = plan_of(h);
  BOOST_REQUIRE_EQUAL(q.kernels.size(), 1u);
  BOOST_TEST(q.kernels[0].kind == "reference");
  unregister_custom_op("codegen::scale_rows");
}

BOOST_AUTO_TEST_SUITE_END()
