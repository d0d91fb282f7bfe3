// The target test_cuda_target tests: passes -> schedule -> CUDA C (targets/cuda/codegen) ->
// NVRTC (targets/cuda/runtime). Without a CUDA device (CI), each plan's module is compiled for
// sm_80 and sm_90 (identical modules, as the case reducer makes, once per process) and nothing
// runs. With one, the plan is compiled for the device, run by cuda::PlanExecutable (host inputs
// copied over, outputs copied back) and compared with the reference like the cpu target.
// KILN_CUDA_TEST_COMPILE_ONLY=1 forces the compile-only mode.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <future>
#include <mutex>
#include <unordered_set>

#include "harness.h"
#include "kiln/cuda/codegen.h"
#include "kiln/cuda/device.h"
#include "kiln/cuda/executable.h"
#include "kiln/cuda/llvm_ptx.h"
#include "kiln/cuda/nvrtc.h"
#include "kiln/schedule/schedule.h"

namespace cpu_test {
namespace {

constexpr int kArchs[] = {80, 90};

struct NvrtcStats {
  std::atomic<int64_t> modules{0}, compiles{0}, cached{0}, seen{0}, llvm_modules{0};
};
NvrtcStats& nvrtc_stats() {
  static NvrtcStats s;
  return s;
}

// Compiles the module of the plan for any device (`p`) for sm_80 and that of the plan for sm_90
// devices (`p90`: Hopper's attention kernel) for sm_90; a kiln::Error (with NVRTC's log and the
// numbered source) when one does not compile.
void nvrtc_check(const plan::KernelPlan& p, const plan::KernelPlan& p90, const std::string& name) {
  bool any = false, any_llvm = false;
  std::string llvm, llvm90;  // the kernels that are LLVM IR modules (PlanKernel::language)
  for (const plan::PlanKernel& k : p.kernels) any = any || (!k.source.empty() && !k.own_module());
  llvm = p.own_modules();
  llvm90 = p90.own_modules();
  any_llvm = !llvm.empty();
  if (!any && !any_llvm) return;
  const std::string src = any ? p.module_source() : "", src90 = any ? p90.module_source() : "";
  static std::mutex mu;
  static std::unordered_set<size_t> done;
  const size_t h = std::hash<std::string>{}(src + llvm) ^ (std::hash<std::string>{}(src90 + llvm90) * 31);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (done.count(h)) {
      ++nvrtc_stats().cached;
      return;
    }
  }
  // KILN_CUDA_TEST_NVRTC_EVERY=N: only every Nth new module goes through NVRTC (the sanitizer
  // build sets 4: NVRTC is not instrumented, the codegen still runs for every case).
  static const int64_t every = [] {
    const char* e = std::getenv("KILN_CUDA_TEST_NVRTC_EVERY");
    return e && *e ? std::max<int64_t>(1, std::strtoll(e, nullptr, 10)) : int64_t{1};
  }();
  if (nvrtc_stats().seen++ % every != 0) return;
  if (any_llvm) {
    // LLVM's NVPTX backend for sm_80 and sm_90, and the sm_90 PTX to a cubin by nvJitLink.
    for (const auto& [ir, arch] : {std::pair{&llvm, kArchs[0]}, std::pair{&llvm90, kArchs[1]}}) {
      const cuda::PtxOutput ptx = cuda::ptx_from_llvm_ir(cuda::nvptx_modules(*ir), arch, name);
      compile_stats().jit_seconds += ptx.seconds;
      if (arch == kArchs[1]) {
        double seconds = 0;
        cuda::cubin_from_ptx(ptx.ptx, arch, name, &seconds);
        compile_stats().jit_seconds += seconds;
      }
    }
    ++nvrtc_stats().llvm_modules;
  }
  if (!any) {
    std::lock_guard<std::mutex> lock(mu);
    done.insert(h);
    return;
  }
  ++nvrtc_stats().modules;
  // sm_90 to a cubin (NVRTC's front end, NVVM and ptxas) and, at the same time on another
  // thread, sm_80 to PTX (front end and NVVM for that architecture; ptxas is skipped to keep the
  // suite within CI's time: KILN_CUDA_TEST_CUBIN_ALL=1 makes cubins for both).
  static const bool cubin_all = [] {
    const char* e = std::getenv("KILN_CUDA_TEST_CUBIN_ALL");
    return e && *e && std::string(e) != "0";
  }();
  auto other = std::async(std::launch::async, [&] { return cuda::nvrtc_compile(src, name, kArchs[0], cubin_all); });
  cuda::NvrtcOutput main_out;
  try {
    main_out = cuda::nvrtc_compile(src90, name, kArchs[1], true);
  } catch (...) {
    other.wait();
    throw;
  }
  const cuda::NvrtcOutput other_out = other.get();
  nvrtc_stats().compiles += 2;
  compile_stats().jit_seconds += main_out.seconds + other_out.seconds;
  std::lock_guard<std::mutex> lock(mu);
  done.insert(h);
}

// Whether plans run here, decided once (and said once, at the start of the run).
bool device_mode() {
  static const bool on = [] {
    const char* e = std::getenv("KILN_CUDA_TEST_COMPILE_ONLY");
    std::string why;
    if (e && *e && std::string(e) != "0") {
      std::fprintf(stderr, "cuda target: KILN_CUDA_TEST_COMPILE_ONLY is set: kernels are compiled with NVRTC for sm_80 and sm_90, not run\n");
      return false;
    }
    if (!cuda::available(&why)) {
      std::fprintf(stderr, "cuda target: %s; kernels are compiled with NVRTC for sm_80 and sm_90 and NOT run (no comparison with the reference)\n",
                   why.c_str());
      return false;
    }
    std::fprintf(stderr, "cuda target: running on cuda:0, %s\n", cuda::Context::get(0).info().str().c_str());
    return true;
  }();
  return on;
}

struct CudaRunner final : Runner {
  std::shared_ptr<cuda::PlanExecutable> exe;
  std::vector<TensorData> run(std::span<const TensorData> inputs) override { return exe->run_host(inputs); }
};

void compile_for_cuda(Compiled& c, const CompileOptions& o) {
  cuda::CodegenOptions co = cuda::CodegenOptions::from_config();
  co.emulate_precision_casts = co.emulate_precision_casts || o.emulate_precision_casts;
  // Large f16/bf16 products of unaligned rows are padded here whatever cuda.pad_matmuls says, so
  // the op cases check the padded gemms against the reference.
  schedule::Target t = cuda::schedule_target();
  t.gemm_row_alignment = 16;
  const schedule::Schedule s = schedule::schedule_graph(c.optimized, t);
  if (!device_mode()) {
    c.plan = cuda::generate(s, co);
    cuda::CodegenOptions hopper = co;
    hopper.arch = 90;
    nvrtc_check(c.plan, cuda::generate(s, hopper), "kiln_test");
    return;
  }
  co.arch = cuda::Context::get(0).info().arch();  // as the C++ frontend generates plans for a device
  c.plan = cuda::generate(s, co);
  cuda::ExecutableOptions eo;
  eo.keep_buffers = o.keep_buffers;
  auto r = std::make_shared<CudaRunner>();
  r->exe = cuda::PlanExecutable::load(c.plan, eo);
  compile_stats().jit_seconds += r->exe->compile_seconds();
  c.exe = std::move(r);
}

struct SetTarget {
  SetTarget() { target() = Target{"cuda", compile_for_cuda}; }
} const set_target;

// Prints the NVRTC totals at the end of the run.
struct Report {
  ~Report() {
    const NvrtcStats& s = nvrtc_stats();
    if (device_mode()) {
      std::fprintf(stderr, "cuda target: plans compiled for and run on the device (%.1f s in NVRTC and module loads)\n",
                   compile_stats().jit_seconds);
      return;
    }
    std::fprintf(stderr, "cuda target: %lld modules compiled with NVRTC %s for sm_90 (cubin) and sm_80 (PTX%s) (%lld compiles), "
                 "%lld plans' LLVM IR kernels with LLVM's NVPTX backend for sm_90 (cubin, nvJitLink) and sm_80 (PTX); %lld repeats skipped, %.1f s in all\n",
                 static_cast<long long>(s.modules.load()), cuda::nvrtc_version().c_str(),
                 std::getenv("KILN_CUDA_TEST_CUBIN_ALL") ? " and cubin" : "",
                 static_cast<long long>(s.compiles.load()), static_cast<long long>(s.llvm_modules.load()),
                 static_cast<long long>(s.cached.load()), compile_stats().jit_seconds);
  }
};
BOOST_TEST_GLOBAL_FIXTURE(Report);

}  // namespace
}  // namespace cpu_test
