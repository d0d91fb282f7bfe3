// PlanExecutable for target "cuda" (native): load() compiles the plan's module with NVRTC for the
// device's compute capability (a cubin; PTX for the newest architecture NVRTC knows when the
// device is newer) and loads it; run() binds the size symbols from the inputs, checks each input
// against its buffer, copies host inputs to the device, allocates outputs and intermediate slots
// from the context's caching allocator, and runs the kernels in order on the context's stream:
// generated kernels with the plan's launch shape, gemms through cuBLASLt (gemm.h) before their
// epilogue, reference kernels on the reference interpreter (through host copies).
//
// Modes:
// - cuda_graph (reduce-overhead, max-autotune, backend cudagraphs): the first call of a set of
//   sizes runs as above (it loads lazily loaded kernels and cuBLASLt's); the second records the
//   plan's launches as a CUDA graph (kernel nodes; each gemm a child graph captured from cuBLASLt)
//   and every later call replays it with one cuGraphLaunch. Inputs are not copied into fixed
//   buffers: where a call's input, output or slot addresses differ from the last replay's, only
//   the nodes that read them are updated in place (cuGraphExecKernelNodeSetParams, a re-captured
//   gemm through cuGraphExecChildGraphNodeSetParams). New sizes record a new graph. Plans with
//   reference kernels, and calls made while another thread replays the graph, launch directly.
// - alternatives (max-autotune): plans of the same schedule generated with other launch
//   configurations (block size, items per thread, row caching); each kernel's distinct versions
//   are timed with device events on the first call's real inputs (autotune_trials runs each,
//   median) and the fastest is kept for the executable's life (and through recall/remember, in
//   the autotune cache).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/graph/tensor_data.h"
#include "kiln/plan/plan.h"
#include "kiln/plan/profile.h"

namespace kiln::cuda {

struct ExecutableOptions {
  int device = 0;             // cuda:<device>
  bool keep_buffers = false;  // intermediate slots kept between calls while the sizes stay (reduce-overhead)
  bool allow_tf32 = false;    // f32 gemms on TF32 tensor cores (config cuda.allow_tf32)
  bool cuda_graph = false;    // replay the plan's launches as a CUDA graph (see above)
  int autotune_trials = 30;   // timed runs of each candidate (config autotune.num_trials)
  // max-autotune of matmuls and convolutions (config max_autotune_gemm): on the first call each
  // gemm's other cuBLASLt algorithms (its heuristic's next choices) and each convolution's other
  // cuDNN algorithms are timed too and the fastest kept.
  bool autotune_gemm = false;
  // Called with a line per kernel once tuning has taken 2 s (optional).
  std::function<void(const std::string& line)> progress;
  // Autotune cache hooks (optional): recall(signature, problem) gives the alternative a kernel
  // chose before (its index among the kernel's distinct versions), remember stores a new choice
  // with a description. `signature` identifies the kernel's candidates (their sources and
  // launches), `problem` the sizes they were timed at.
  std::function<std::optional<int>(const std::string& signature, const std::string& problem)> recall;
  std::function<void(const std::string& signature, const std::string& problem, int choice, const std::string& description)>
      remember;
};

// A compiled program: a cubin when NVRTC supports the device's architecture, else PTX for the
// newest architecture below it.
struct CompiledModule {
  std::string image;
  int arch = 0;
  bool cubin = true;
  double seconds = 0;  // 0 on a cache hit
  bool prebuilt = false;  // built with the library (its flash attention kernels), not by NVRTC now
};
// Every program a PlanExecutable loaded, with its image (for the plan cache).
struct ProgramImage {
  std::string source;
  CompiledModule module;
};

class PlanExecutable {
 public:
  // Throws kiln::Error: "no CUDA device: ..." without one; NVRTC's log and the source when the
  // module does not compile (a codegen bug).
  static std::shared_ptr<PlanExecutable> load(plan::KernelPlan plan, const ExecutableOptions& options = {});
  // max-autotune: `alternatives` are plans of the same schedule made with other codegen options
  // (the same buffers and kernels; one that differs is ignored). All modules are compiled now;
  // the kernels' versions are timed on the first run.
  static std::shared_ptr<PlanExecutable> load(plan::KernelPlan plan, std::vector<plan::KernelPlan> alternatives,
                                              const ExecutableOptions& options);
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
  std::string compile_log() const;  // "1 NVRTC, 1 LLVM programs (ms: 21.3, 9.8)": what load() compiled
  const std::vector<ProgramImage>& programs() const;  // their sources and images
  // max-autotune: one line per tuned kernel (versions timed, the winner's launch and time);
  // empty before the first run or without alternatives.
  std::string tuning_report() const;
  // CUDA graph statistics of this executable (cuda_graph): graphs recorded, replays, node updates.
  struct GraphStats {
    int64_t recorded = 0, replays = 0, node_updates = 0, direct_runs = 0;
  };
  GraphStats graph_stats() const;
  // Per-kernel times (plan::KernelProfile): with profiling on (set_profiling(true), or
  // KILN_LOGS=profile) each call launches its kernels one by one between timeline marks (no CUDA
  // graph replay). profile(): a copy of it, nullopt before a timed call.
  void set_profiling(bool on);
  std::optional<plan::KernelProfile> profile() const;

  struct Impl;

 private:
  PlanExecutable();
  std::unique_ptr<Impl> impl_;
};

// The compiled image for `source` and the device's `arch` from a process-wide cache (NVRTC on a
// miss).
CompiledModule compile_module(const std::string& source, int arch, const std::string& name);
// Puts an image compiled earlier (kept in sdk/cache's plan cache) into that process cache, so
// that compile_module(source, device_arch, ...) returns it without NVRTC.
void remember_module(const std::string& source, int device_arch, const CompiledModule& m);
// Empties that process cache (executables keep the modules they loaded): the next compile of any
// source runs NVRTC again. For measuring cold compiles in a process that compiled before.
void forget_modules();

}  // namespace kiln::cuda
