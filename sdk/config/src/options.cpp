// The declarations of every Kiln option and compile mode. Adding an option is one entry here
// plus a row in docs/config.md; nothing else enumerates options.
#include "registry.h"

#include <cctype>
#include <cstdio>

namespace kiln::config::internal {
namespace {

std::string at_least_1(const ConfigValue& v) {
  return v.as<int64_t>() >= 1 ? "" : "must be at least 1";
}
std::string at_least_0(const ConfigValue& v) {
  return v.as<int64_t>() >= 0 ? "" : "must be 0 or more";
}
std::string at_least_minus_1(const ConfigValue& v) {
  return v.as<int64_t>() >= -1 ? "" : "must be -1 (never) or more";
}
std::string vector_width(const ConfigValue& v) {
  const int64_t n = v.as<int64_t>();
  return n == 0 || n == 128 || n == 256 || n == 512 ? "" : "must be 0 (the host's), 128, 256 or 512";
}
std::string opt_level(const ConfigValue& v) {
  const int64_t n = v.as<int64_t>();
  return n >= 0 && n <= 3 ? "" : "must be between 0 and 3";
}
std::string loads_ahead(const ConfigValue& v) {
  int64_t n = v.as<int64_t>();
  return n >= 1 && n <= 8 ? "" : "must be between 1 and 8";
}
std::string tcp_port(const ConfigValue& v) {
  int64_t n = v.as<int64_t>();
  return n >= 1 && n <= 65535 ? "" : "must be between 1 and 65535";
}
std::string matmul_backend(const ConfigValue& v) {
  const std::string& s = v.as<std::string>();
  return s == "auto" || s == "blas" || s == "generated" ? "" : "must be auto, blas or generated";
}
std::string blas_library(const ConfigValue& v) {
  const std::string& s = v.as<std::string>();
  return s == "auto" || s == "onednn" || s == "openblas" ? "" : "must be auto, onednn or openblas";
}
std::string cuda_compiler(const ConfigValue& v) {
  const std::string& s = v.as<std::string>();
  return s == "llvm" || s == "nvrtc" ? "" : "must be llvm or nvrtc";
}
// "auto" or the form BMxBN/TMxTN/BK of positive numbers; which blockings the gemm shader can run
// is the vulkan codegen's check, when it plans.
std::string gemm_blocking(const ConfigValue& v) {
  const std::string& s = v.as<std::string>();
  if (s == "auto") return "";
  int bm = 0, bn = 0, tm = 0, tn = 0, bk = 0, end = 0;
  const bool parsed = std::sscanf(s.c_str(), "%dx%d/%dx%d/%d%n", &bm, &bn, &tm, &tn, &bk, &end) == 5 &&
                      end == static_cast<int>(s.size());
  return parsed && bm > 0 && bn > 0 && tm > 0 && tn > 0 && bk > 0
             ? ""
             : "must be auto or BMxBN/TMxTN/BK (a BM x BN tile of C per workgroup, TM x TN of it per "
               "invocation, K in steps of BK; e.g. 128x64/8x8/8)";
}
std::string not_empty(const ConfigValue& v) {
  return v.as<std::string>().empty() ? "must not be empty" : "";
}

struct Decl {
  const char* name;
  OptionType type;
  ConfigValue default_value;
  bool affects_codegen;
  bool used;
  const char* doc;
  Validator check = nullptr;
};

constexpr bool kCodegen = true, kNoCodegen = false;
constexpr bool kUsed = true, kLater = false;
using T = OptionType;

std::vector<OptionDef> build_options() {
  // clang-format off
  const Decl decls[] = {
    // --- read by sdk/capture now ---
    {"recompile_limit", T::Int, 8, kNoCodegen, kUsed,
     "Most compiled variants kept for one compiled function; past it the function runs eagerly "
     "(or fails, see fail_on_recompile_limit_hit).", at_least_1},
    {"accumulated_recompile_limit", T::Int, 256, kNoCodegen, kUsed,
     "Most compilations in the whole process, all compiled functions together (kiln::reset() "
     "starts the count again); past it, calls that would recompile run eagerly.", at_least_1},
    {"fail_on_recompile_limit_hit", T::Bool, false, kNoCodegen, kUsed,
     "Throw kiln::Error instead of falling back to eager when a recompile limit is hit."},
    {"automatic_dynamic_shapes", T::Bool, true, kNoCodegen, kUsed,
     "When a size change causes a recompile, recompile with that dimension as a symbol instead "
     "of another static specialization."},
    {"assume_static_by_default", T::Bool, true, kNoCodegen, kUsed,
     "Compile the first call with every size static; false: sizes start out symbolic."},
    {"specialize_scalars", T::Bool, true, kNoCodegen, kLater,
     "Scalar arguments are guarded by value. Not yet used: C++ scalar arguments are always "
     "specialised (pass a 0-d tensor for a scalar that varies); symbolic scalars will read it."},
    {"force_disable_caches", T::Bool, false, kNoCodegen, kUsed,
     "Turn every compile cache off, whatever else is set: the in-memory executables of the cpu "
     "target, the process's cache artifacts and the on-disk cache (docs/cache.md)."},
    {"assert_no_compile", T::Bool, false, kNoCodegen, kUsed,
     "Make any compile a kiln::Error naming the graph: every plan must come from a cache (to "
     "check that a warm run compiles nothing)."},
    {"cache_dir", T::String, "", kNoCodegen, kUsed,
     "Root of the on-disk caches; empty = $XDG_CACHE_HOME/kiln, or ~/.cache/kiln."},
    {"module_dir", T::String, "", kNoCodegen, kUsed,
     "Folder of Kiln's loadable modules (libkiln_cpu_llvm.so, libkiln_cuda_llvm.so), looked in "
     "first; empty = beside the executable, ../lib/kiln from it, then this build's and its install "
     "folder (docs/target.md)."},
    {"job_id", T::String, "", kNoCodegen, kUsed,
     "Names a workload across runs: profile state (which sizes turned out dynamic) is reused "
     "only between runs with the same non-empty job_id (kept in the compile caches)."},
    {"debug_dir", T::String, "", kNoCodegen, kUsed,
     "Directory for debug dumps (captured graphs, explain reports); empty = no dumps."},
    {"verbose", T::Bool, false, kNoCodegen, kUsed,
     "Recompile reasons list the failing guard of every cached entry, not only the newest."},
    {"suppress_errors", T::Bool, false, kNoCodegen, kUsed,
     "When a backend compile fails, warn and run the function eagerly instead of throwing."},
    {"capture_scalar_outputs", T::Bool, false, kNoCodegen, kLater,
     "Trace item() as a symbolic scalar instead of breaking the graph. Not yet used "
     "(a later sdk/capture milestone will read it)."},

    // --- declared for later stages ---
    {"fusion.max_fusion_size", T::Int, 64, kCodegen, kUsed,
     "Most realized nodes (stored values, reductions, matmuls) fused into one kernel.", at_least_1},
    {"fusion.epilogue_fusion", T::Bool, true, kCodegen, kUsed,
     "Fuse pointwise consumers into the kernels of reductions and matmuls (softmax's divide, "
     "layer_norm's scale, a matmul's bias and activation)."},
    {"fusion.aggressive_fusion", T::Bool, false, kCodegen, kUsed,
     "Recompute values used several times inside each consumer up to 16 ops (instead of 4) "
     "rather than storing them."},
    {"fusion.horizontal", T::Bool, true, kCodegen, kUsed,
     "Fuse independent kernels over the same iteration domain that read a common input."},
    {"max_autotune", T::Bool, false, kCodegen, kUsed,
     "Benchmark candidate kernel configurations and keep the fastest (cpu: on the first call, "
     "each kernel's variants and launch chunk sizes, timed on the real inputs)."},
    {"max_autotune_pointwise", T::Bool, false, kCodegen, kUsed,
     "Autotune pointwise and reduction kernels (cpu: also generate them for 256- and 512-bit "
     "vectors, and column reductions with other block sizes, as candidates)."},
    {"max_autotune_gemm", T::Bool, false, kCodegen, kUsed,
     "Autotune matmul kernels (cpu: the BLAS call and the generated tiled kernel are both "
     "candidates, timed on the first call)."},
    {"autotune.cache", T::Bool, true, kNoCodegen, kUsed,
     "Keep max-autotune's choices in the local caches (memory and cache_dir; docs/cache.md)."},
    {"autotune.remote_cache", T::Bool, false, kNoCodegen, kUsed,
     "Share max-autotune's choices through the Redis remote cache even when cache.remote is off "
     "(with cache.remote on they are shared anyway)."},
    {"autotune.num_trials", T::Int, 30, kNoCodegen, kUsed,
     "Timed runs per candidate when autotuning (cuda: the median of this many event-timed runs of "
     "each kernel version).",
     at_least_1},
    {"early_library_start", T::Bool, true, kNoCodegen, kUsed,
     "Start loading the libraries a graph's plan will call, in the background, as soon as its "
     "compile begins (beside an ONNX import, the passes after a trace, or kiln run's cache "
     "lookup) rather than when the plan loads: on CUDA cuBLASLt, and cuDNN for a graph with "
     "convolutions that cuDNN runs (the CPU and Vulkan targets start nothing). false: they load "
     "with the first plan that uses them."},
    {"cudagraphs", T::Bool, false, kCodegen, kUsed,
     "Record kernel launches as CUDA graphs and replay them to cut launch overhead (cuda: from the "
     "second call of a set of sizes; changed addresses update the graph's nodes in place)."},
    {"cudagraph_trees", T::Bool, true, kCodegen, kLater,
     "Share one memory pool across the CUDA graphs of related compiled functions. Not yet used "
     "(targets/cuda will read it)."},
    {"cuda.allow_tf32", T::Bool, false, kCodegen, kUsed,
     "Let float32 matmuls use TF32 tensor cores (faster, ~10 mantissa bits; cuBLASLt's "
     "CUBLAS_COMPUTE_32F_FAST_TF32)."},
    {"cuda.cudnn", T::Bool, true, kCodegen, kUsed,
     "Run convolutions on CUDA through cuDNN (libcudnn.so.9, loaded when a plan first convolves; "
     "implicit-GEMM and other algorithms, no im2col copy). false: as on the other targets, the "
     "windows of the input (an im2col copy) times the weights in a cuBLASLt gemm."},
    {"cuda.channels_last", T::Bool, true, kCodegen, kUsed,
     "With cuda.cudnn, run a graph's convolutions channels last (NHWC, cuDNN's fastest kernels on "
     "tensor cores), with the ops between them: the convolutions become "
     "convolution_channels_last and the permutes around them cancel, as torch.compile's layout "
     "optimisation makes a conv net channels_last; only where the convolutions cuDNN runs on "
     "tensor cores (f16, bf16, f32 with cuda.allow_tf32) do most of the graph's multiply-adds "
     "(convolutions and matrix products). false: every convolution in NCHW."},
    {"cuda.pad_matmuls", T::Bool, true, kCodegen, kUsed,
     "Pad large f16/bf16 matrix products by a 2-D weight whose K or N leaves rows that are not "
     "16-byte aligned (GPT-2's vocabulary of 50257) with zeros to aligned sizes and slice the "
     "result back, as torch inductor's pad_mm does: cuBLASLt's tensor-core kernels read aligned "
     "rows (gpt2 and bart_decoder bf16 23-24% faster on an H200, docs/cuda.md)."},
    {"cuda.precise_math", T::Bool, false, kCodegen, kUsed,
     "Compute float32 exp, division and 1/sqrt on CUDA with libdevice's expf, IEEE division and "
     "sqrt (nvcc's defaults) instead of the fast forms torch.compile's Triton kernels use "
     "(ex2.approx of x * log2(e), div.full.f32, rsqrt.approx: within a few ulp; they also compile "
     "faster)."},
    {"cuda.compiler", T::String, "llvm", kCodegen, kUsed,
     "How generated CUDA kernels are compiled: 'llvm' (pointwise kernels as LLVM IR, through "
     "LLVM's NVPTX backend and nvJitLink: a few times sooner than NVRTC; other kernels through "
     "NVRTC) or 'nvrtc' (every kernel as CUDA C through NVRTC).", cuda_compiler},
    {"cuda.column_loads_ahead", T::Int, 4, kCodegen, kUsed,
     "Elements of its column a thread of a column reduction (a sum over rows: a bias's or a norm "
     "weight's gradient) loads before it uses the first, 1 to 8: the loads of the next rows in "
     "flight while it computes and stores this one's.", loads_ahead},
    {"vulkan.fuse_gemm_epilogue", T::Bool, true, kCodegen, kUsed,
     "Compute a matmul's pointwise epilogue (bias, activation, residual add) in the Vulkan gemm "
     "shader, per element of C an invocation holds, where the epilogue reads C in C's order; "
     "false: the epilogue is a pointwise kernel of its own that reads C back."},
    {"vulkan.gemm_blocking", T::String, "auto", kCodegen, kUsed,
     "The blocking of every Vulkan gemm shader, as BMxBN/TMxTN/BK: a BM x BN tile of C per "
     "workgroup, a TM x TN block of it per invocation (multiples of 4), K in steps of BK through "
     "shared memory. 'auto': Kiln's rule per product (docs/vulkan.md). For measuring tiles; a "
     "blocking the device cannot run (more invocations than its workgroups hold) keeps the rule's.",
     gemm_blocking},
    {"memory_budget_mb", T::Int, 0, kNoCodegen, kUsed,
     "Host memory Kiln may hold for one run, in MiB (0 = the host's physical memory): a tensor, a "
     "reference-interpreter run or a cpu plan's call that would need more is an error naming what "
     "it would allocate, checked before allocating.", at_least_0},
    {"keep_buffers", T::Bool, false, kNoCodegen, kUsed,
     "Keep a compiled plan's intermediate buffers allocated between calls, on every target "
     "(mode reduce-overhead)."},
    {"cpu.keep_buffers", T::Bool, false, kNoCodegen, kUsed,
     "Keep a CPU plan's intermediate buffers allocated between calls (as keep_buffers does on "
     "every target)."},
    {"cpu.eager_compile_threshold", T::Int, 4096, kNoCodegen, kUsed,
     "Eager ops on the CPU run as compiled single-op kernels (cached by op, attributes, dtypes "
     "and shape pattern) when their output or an input has at least this many elements; smaller "
     "ones run on "
     "the reference interpreter, where a JIT compile would not pay for itself. -1: never compile.",
     at_least_minus_1},
    {"cpu.matmul", T::String, "auto", kCodegen, kUsed,
     "How CPU matmul kernels multiply: 'blas' (OpenBLAS), 'generated' (Kiln's register-tiled "
     "kernel; it needs a unit column stride in the right operand, else the BLAS is used), or "
     "'auto' (the BLAS call; with max_autotune_gemm both are timed on the first call and the "
     "faster kept).", matmul_backend},
    {"cpu.blas", T::String, "auto", kNoCodegen, kUsed,
     "The library the BLAS call of f32 CPU matmul kernels goes to, chosen once per process when "
     "its first CPU plan loads: 'onednn' (oneDNN's sgemm, libdnnl.so.2 or .so.3, loaded then; an error "
     "where it cannot be), 'openblas' (linked in), or 'auto' (oneDNN where it loads, else "
     "OpenBLAS). f64 matmuls always use OpenBLAS.", blas_library},
    {"cpu.threads", T::Int, 0, kCodegen, kUsed,
     "Threads the CPU kernels run on; 0 = every hardware thread the process may use.",
     at_least_0},
    {"cpu.vector_width", T::Int, 0, kCodegen, kUsed,
     "SIMD width in bits the CPU kernels prefer: 128, 256 or 512; 0 = Kiln's choice for the host "
     "(its preferred width, 512 bits for reductions and generated gemm tiles where the host has "
     "them).", vector_width},
    {"cpu.opt_level", T::Int, 3, kCodegen, kUsed,
     "LLVM optimisation level of the CPU kernels' machine code, 0 to 3: lower levels compile "
     "several times faster and run slower (CI's sanitizer pass runs at 0, where the JIT's time "
     "would dominate; every figure Kiln quotes is at 3).", opt_level},
    {"cache.plan_cache", T::Bool, true, kNoCodegen, kUsed,
     "Keep kernel plans and their compiled object code in the on-disk cache (cache_dir)."},
    {"cache.remote", T::Bool, false, kNoCodegen, kUsed,
     "Also read and write the Redis remote cache (builds with KILN_WITH_REDIS; docs/cache.md)."},
    {"cache.redis_host", T::String, "localhost", kNoCodegen, kUsed,
     "Host of the Redis remote cache.", not_empty},
    {"cache.redis_port", T::Int, 6379, kNoCodegen, kUsed,
     "Port of the Redis remote cache.", tcp_port},
    {"cache.redis_password", T::String, "", kNoCodegen, kUsed,
     "Password the remote cache sends with AUTH; empty = none."},
    {"cache.redis_timeout_ms", T::Int, 200, kNoCodegen, kUsed,
     "Connect and command timeout of the remote cache in ms; after a failure the remote cache is "
     "skipped for 10 s.", at_least_1},
    {"cache.size_limit_mb", T::Int, 1024, kNoCodegen, kUsed,
     "Size cap of the on-disk cache in MiB; the least recently used entries go first.", at_least_1},
    {"cache_key_tag", T::String, "", kCodegen, kUsed,
     "Free text mixed into every cache key, to keep otherwise-identical configurations apart."},
    {"emulate_precision_casts", T::Bool, false, kCodegen, kUsed,
     "Round f16/bf16 intermediates after every op the way the reference interpreter does "
     "(by default fused kernels keep them in f32 and round where stored or cast)."},
    {"fallback_random", T::Bool, false, kCodegen, kLater,
     "Generate random numbers with the reference interpreter's generator so results match it "
     "(slower). Not yet used (targets/<t>/codegen will read it)."},
  };
  // clang-format on
  std::vector<OptionDef> defs;
  for (const Decl& d : decls) {
    defs.push_back(OptionDef{
        OptionInfo{d.name, d.type, d.default_value, d.doc, env_var_name(d.name),
                   d.affects_codegen, d.used},
        d.check});
  }
  return defs;
}

std::vector<ModeDef> build_modes() {
  return {
      {"default", {}},
      {"reduce-overhead", {{"cudagraphs", true}, {"keep_buffers", true}}},
      {"max-autotune",
       {{"max_autotune", true},
        {"max_autotune_pointwise", true},
        {"max_autotune_gemm", true},
        {"cudagraphs", true},
        {"keep_buffers", true}}},
      {"max-autotune-no-cudagraphs",
       {{"max_autotune", true}, {"max_autotune_pointwise", true}, {"max_autotune_gemm", true}}},
  };
}

}  // namespace

std::string env_var_name(std::string_view option_name) {
  // The remote cache's variables are named as issue 6 (and torch.compile's TORCHINDUCTOR_REDIS_*)
  // spell them, not after the option: KILN_REMOTE_CACHE=1, KILN_REDIS_HOST, ...
  static const std::pair<std::string_view, std::string_view> kRenamed[] = {
      {"cache.remote", "KILN_REMOTE_CACHE"},
      {"cache.redis_host", "KILN_REDIS_HOST"},
      {"cache.redis_port", "KILN_REDIS_PORT"},
      {"cache.redis_password", "KILN_REDIS_PASSWORD"},
      {"cache.redis_timeout_ms", "KILN_REDIS_TIMEOUT_MS"},
  };
  for (const auto& [option, env] : kRenamed)
    if (option_name == option) return std::string(env);
  std::string out = "KILN_";
  for (char c : option_name)
    out += c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

const std::vector<OptionDef>& option_defs() {
  static const std::vector<OptionDef> defs = build_options();
  return defs;
}

const std::vector<ModeDef>& mode_defs() {
  static const std::vector<ModeDef> modes = build_modes();
  return modes;
}

}  // namespace kiln::config::internal
