// PlanExecutable for target "cuda" (native): load() compiles the plan's module with NVRTC for the
// device's compute capability (a cubin; PTX for the newest architecture NVRTC knows when the
// device is newer) and loads it; run() binds the size symbols from the inputs, checks each input
// against its buffer, copies host inputs to the device, allocates outputs and intermediate slots
// from the context's caching allocator, and runs the kernels in order on the context's stream:
// generated kernels with the plan's launch shape, gemms through cuBLASLt (gemm.h) before their
// epilogue, reference kernels on the reference interpreter (through host copies).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/graph/tensor_data.h"
#include "kiln/plan/plan.h"

namespace kiln::cuda {

struct ExecutableOptions {
  int device = 0;             // cuda:<device>
  bool keep_buffers = false;  // intermediate slots kept between calls while the sizes stay (reduce-overhead)
  bool allow_tf32 = false;    // f32 gemms on TF32 tensor cores (config cuda.allow_tf32)
};

class PlanExecutable {
 public:
  // Throws kiln::Error: "no CUDA device: ..." without one; NVRTC's log and the source when the
  // module does not compile (a codegen bug).
  static std::shared_ptr<PlanExecutable> load(plan::KernelPlan plan, const ExecutableOptions& options = {});
  ~PlanExecutable();

  // Inputs on the host or on this device; outputs on the device (contiguous). Queued on the
  // context's stream: reading the outputs from the host (to_host) waits for them.
  std::vector<TensorData> run(std::span<const TensorData> inputs) const;
  std::vector<TensorData> run(std::span<const TensorData* const> inputs) const;
  // The same with every output copied back to the host.
  std::vector<TensorData> run_host(std::span<const TensorData> inputs) const;

  const plan::KernelPlan& plan() const;
  double compile_seconds() const;  // NVRTC + module load (0 when the module came from the process cache)
  int arch() const;                // the compute capability compiled for

  struct Impl;

 private:
  PlanExecutable();
  std::unique_ptr<Impl> impl_;
};

// The compiled image for `source` and `arch` from a process-wide cache (NVRTC on a miss):
// a cubin when NVRTC supports `arch`, else PTX for the newest architecture below it.
struct CompiledModule {
  std::string image;
  int arch = 0;
  bool cubin = true;
  double seconds = 0;  // 0 on a cache hit
};
CompiledModule compile_module(const std::string& source, int arch, const std::string& name);

}  // namespace kiln::cuda
