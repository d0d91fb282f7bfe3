// PlanExecutable: a KernelPlan for the cpu target, compiled and ready to run.
//
// Takes: a plan (targets/cpu/codegen makes them; kiln::plan::plan_from_json reads them back).
// load() JIT-compiles the plan's module once (see jit.h). run() binds the size symbols from
// the inputs, checks the inputs against the plan (dtype, rank, sizes, strides: a mismatch is a
// kiln::Error naming the input), allocates outputs and intermediate slots from a caching host
// allocator (no page faults on warm calls), runs the kernels in order over the thread pool
// (reference kernels on the reference interpreter), and returns the outputs. run() may be called
// from several threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/graph/tensor_data.h"
#include "kiln/plan/plan.h"
#include "kiln/plan/profile.h"

namespace kiln::cpu {

struct ExecutableOptions {
  // Keep the intermediate slots allocated between calls (mode reduce-overhead).
  bool keep_buffers = false;
  // LLVM's level for the IR pipeline and the code generator, 0..3 (config cpu.opt_level).
  int opt_level = 3;
  // Threads the kernels run on (config cpu.threads): 0 = every hardware thread.
  int threads = 0;
  // Mode max-autotune: on the first call, time each generated kernel's variants and launch
  // configurations (chunk sizes, one thread or all) on the real inputs and keep the fastest.
  bool autotune = false;
  // Where autotune choices outlive the process (the frontend plugs in sdk/cache's autotune
  // cache): `recall` gets a kernel's signature (its generated code, entry and variants, and the
  // size symbols' values) and returns a choice made before, `remember` keeps a new one. A
  // recalled choice naming no candidate of the kernel is ignored (the kernel is timed).
  struct TuneChoice {
    std::string function;  // the entry or one of its variants
    int64_t chunk = 0;     // elements of the parallel extent per task
  };
  std::function<std::optional<TuneChoice>(const std::string& signature)> recall;
  std::function<void(const std::string& signature, const std::string& kernel, const TuneChoice& choice)> remember;
};

class PlanExecutable {
 public:
  static std::shared_ptr<PlanExecutable> load(plan::KernelPlan plan, const ExecutableOptions& options = {});
  // The same plan from the object code of its modules (objects() of an executable loaded from
  // the same plan, on a host with the same CPU and features: the caller's cache key says so):
  // the objects are only linked, nothing is parsed, optimised or compiled. A kernel entry (or
  // variant) that no object defines, or bytes that are not an object, give a kiln::Error.
  static std::shared_ptr<PlanExecutable> load_compiled(plan::KernelPlan plan, std::span<const std::string> objects,
                                                       const ExecutableOptions& options = {});
  // The object code of each module, in module order (what load_compiled takes).
  std::vector<std::string> objects() const;
  ~PlanExecutable();

  std::vector<TensorData> run(std::span<const TensorData* const> inputs) const;
  std::vector<TensorData> run(std::span<const TensorData> inputs) const;

  const plan::KernelPlan& plan() const;
  double compile_seconds() const;  // the JIT compile of the modules (compiled side by side)
  // Each module's share of that: kernels, source bytes, parse/optimise/codegen/link ms.
  std::string compile_report() const;
  // What autotuning chose, one line per kernel ("" before the first call or without autotune).
  std::string tuning_report() const;
  // Per-kernel times (plan::KernelProfile): with profiling on (set_profiling(true), or
  // KILN_LOGS=profile) each call times every kernel. profile(): a copy of it, nullopt before a
  // timed call.
  void set_profiling(bool on);
  std::optional<plan::KernelProfile> profile() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Host memory for kernel buffers: 64-byte aligned, not zeroed, recycled by size after release
// (up to a bound), so a warm call allocates without touching new pages. With
// KILN_CPU_GUARD_PAGES=1 in the environment (a debugging aid), each buffer ends just before an
// inaccessible page instead, so that a kernel reading or writing past its end faults.
std::shared_ptr<Storage> allocate_host_buffer(size_t nbytes);

// What f32 matmul kernels' gemm calls run (cpu.blas chooses, once per process): "oneDNN 2.6.3
// sgemm", "OpenBLAS 0.3.21 (SkylakeX kernels)" (the kernels it chose for this CPU), or Kiln's own
// loop nest in a build without OpenBLAS.
std::string matmul_library();

}  // namespace kiln::cpu
