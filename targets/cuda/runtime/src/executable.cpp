// PlanExecutable for CUDA: load (NVRTC, module, entries, constants) and run (bind, check inputs,
// copy host inputs over, allocate, launch, gemm, reference kernels). See executable.h.
#include "kiln/cuda/executable.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <sstream>
#include <thread>

#include "kiln/cuda/codegen.h"
#include "kiln/cuda/device.h"
#include "kiln/cuda/convolution.h"
#include "kiln/cuda/gemm.h"
#include "kiln/cuda/llvm_ptx.h"
#include "kiln/cuda/nvrtc.h"
#include "kiln/config/log.h"
#include "kiln/graph/error.h"
#include "kiln/graph/memory_budget.h"
#include "kiln/plan/bind.h"
#include "kiln/plan/profile.h"
#include "kiln/eval/interpreter.h"
#include "background.h"
#include "driver_api.h"
#include "prebuilt.h"

namespace kiln::cuda {

namespace {

std::vector<int64_t> eval(const SymShape& s, const std::vector<int64_t>& syms) {
  std::vector<int64_t> v;
  for (const SymInt& x : s) v.push_back(x.evaluate(syms));
  return v;
}

}  // namespace

namespace {
std::mutex& module_mu() {
  static std::mutex mu;
  return mu;
}
std::map<std::pair<int, std::string>, CompiledModule>& module_cache() {
  static std::map<std::pair<int, std::string>, CompiledModule> cache;
  return cache;
}
}  // namespace

void remember_module(const std::string& source, int device_arch, const CompiledModule& m) {
  KILN_CHECK(!m.image.empty(), "cuda runtime: an empty image for a program of ", source.size(), " characters");
  CompiledModule c = m;
  c.seconds = 0;
  std::lock_guard<std::mutex> lock(module_mu());
  module_cache()[{device_arch, source}] = std::move(c);
}

void forget_modules() {
  std::lock_guard<std::mutex> lock(module_mu());
  module_cache().clear();
}

CompiledModule compile_module(const std::string& source, int arch, const std::string& name) {
  std::mutex& mu = module_mu();
  auto& cache = module_cache();
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find({arch, source});
    if (it != cache.end()) {
      CompiledModule c = it->second;
      c.seconds = 0;
      return c;
    }
  }
  CompiledModule c;
  // A program built with the library (prebuilt.h): loaded as it is, unless extra NVRTC options
  // are asked for (their images would differ).
  if (nvrtc_env_options().empty())
    if (const detail::PrebuiltImage* p = detail::find_prebuilt(source, arch)) {
      c.arch = p->arch;
      c.cubin = true;
      c.image.assign(p->image);
      c.prebuilt = true;
      return c;
    }
  static const std::vector<int> supported = nvrtc_supported_archs();
  const bool cubin_arch = std::find(supported.begin(), supported.end(), arch) != supported.end();
  if (is_nvptx_program(source)) {
    // LLVM IR (the codegen's pointwise kernels): LLVM's NVPTX backend writes PTX (for sm_90 at
    // most, which newer GPUs take), nvJitLink makes the device's cubin, or the driver JITs the
    // PTX when this toolkit does not know the device.
    const auto start = std::chrono::steady_clock::now();
    const PtxOutput ptx = ptx_from_llvm_ir(nvptx_modules(source), std::min(arch, kLlvmNewestArch), name);
    c.arch = arch;
    c.cubin = cubin_arch;
    c.image = cubin_arch ? cubin_from_ptx(ptx.ptx, arch, name) : ptx.ptx;
    c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::lock_guard<std::mutex> lock(mu);
    cache.emplace(std::make_pair(arch, source), c);
    return c;
  }
  if (cubin_arch) {
    c.arch = arch;
    c.cubin = true;
  } else {  // a device newer than this NVRTC: PTX of the newest architecture below it, JIT-compiled by the driver
    int best = 0;
    for (int a : supported)
      if (a <= arch) best = std::max(best, a);
    KILN_CHECK(best > 0, "cuda runtime: NVRTC ", nvrtc_version(), " cannot compile for sm_", arch);
    c.arch = best;
    c.cubin = false;
  }
  // One NVRTC compile at a time (compile_threads says why); LLVM programs go on meanwhile.
  static std::mutex nvrtc_lock;
  std::unique_lock<std::mutex> one_nvrtc(nvrtc_lock);
  const NvrtcOutput out = nvrtc_compile(source, name, c.arch, c.cubin);
  one_nvrtc.unlock();
  c.image = out.image;
  c.seconds = out.seconds;
  std::lock_guard<std::mutex> lock(mu);
  cache.emplace(std::make_pair(arch, source), c);
  return c;
}

namespace {

// Threads that compile one plan's programs: KILN_CUDA_COMPILE_THREADS, default the host's
// hardware threads (at most 8). LLVM programs compile in parallel; NVRTC ones one at a time
// (nvrtc_lock): measured on the H100 machine (16 cores, NVRTC 13.0), NVRTC programs compiled on
// parallel threads took about as long together as one after the other (sum_all's two: 72 and
// 94 ms in parallel, 92 ms in sequence), and NVRTC stayed several times slower on every thread
// after that (col_sum 97 ms against 13, small_chain 100 against 26).
size_t compile_threads() {
  static const size_t n = [] {
    if (const char* e = std::getenv("KILN_CUDA_COMPILE_THREADS"); e && *e) return static_cast<size_t>(std::max(1, std::atoi(e)));
    return static_cast<size_t>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  }();
  return n;
}
// KILN_CUDA_COMPILE_THREADS > 1 set explicitly: every generated kernel a program of its own.
bool program_per_kernel() {
  const char* e = std::getenv("KILN_CUDA_COMPILE_THREADS");
  return e && *e && std::atoi(e) > 1;
}

// Compiles each source (on parallel threads when there are several: a plan's programs are
// independent) through the process cache; the longest first, so that the last to start is short.
std::vector<CompiledModule> compile_all(const std::vector<std::string>& sources, int arch, const std::string& name) {
  std::vector<CompiledModule> out(sources.size());
  if (sources.size() == 1 || compile_threads() == 1) {
    for (size_t i = 0; i < sources.size(); ++i) out[i] = compile_module(sources[i], arch, name + "_" + std::to_string(i));
    return out;
  }
  std::vector<size_t> order(sources.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sources[a].size() > sources[b].size(); });
  std::vector<std::string> errors(sources.size());
  std::vector<std::thread> threads;
  const size_t width = std::min(sources.size(), compile_threads());
  std::atomic<size_t> next{0};
  for (size_t t = 0; t < width; ++t)
    threads.emplace_back([&] {
      for (size_t k; (k = next++) < sources.size();) {
        const size_t i = order[k];
        try {
          out[i] = compile_module(sources[i], arch, name + "_" + std::to_string(i));
        } catch (const std::exception& e) {
          errors[i] = e.what();
        }
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors)
    if (!e.empty()) fail(e);
  return out;
}

// The own-module kernels' distinct sources (PlanKernel::own_module: LLVM IR) in groups of about
// equal size, at most kLlvmPrograms, each one program: LLVM's NVPTX backend compiles them on
// parallel threads (convnext_tiny's 101 kernels as one program: 894 ms on the H200). The groups
// depend only on the plan, so that a cache hit names the programs its entry holds.
constexpr size_t kLlvmPrograms = 4;
std::vector<std::string> own_module_groups(const plan::KernelPlan& pl, std::map<std::string_view, size_t>& group_of) {
  std::vector<std::string_view> distinct;
  size_t total = 0;
  for (const plan::PlanKernel& k : pl.kernels)
    if (k.own_module() && group_of.emplace(k.source, 0).second) {
      distinct.push_back(k.source);
      total += k.source.size();
    }
  const size_t groups = std::min(kLlvmPrograms, distinct.size());
  std::vector<std::string> out(groups);
  size_t g = 0, filled = 0;
  for (size_t i = 0; i < distinct.size(); ++i) {
    // Move on once this group holds its share, keeping one source at least for each group left.
    if (g + 1 < groups && !out[g].empty() &&
        (filled >= total * (g + 1) / groups || distinct.size() - i <= groups - 1 - g))
      ++g;
    out[g] += distinct[i];
    filled += distinct[i].size();
    group_of[distinct[i]] = g;
  }
  return out;
}

// Same buffers, symbols and kernels (names, kinds, entries, reads and writes): the versions of
// one kernel in `b` may stand in for those of `a`.
bool interchangeable(const plan::KernelPlan& a, const plan::KernelPlan& b) {
  if (a.buffers.size() != b.buffers.size() || a.slots != b.slots || a.kernels.size() != b.kernels.size() ||
      a.symbols.size() != b.symbols.size() || a.outputs != b.outputs)
    return false;
  for (size_t i = 0; i < a.kernels.size(); ++i) {
    const plan::PlanKernel &x = a.kernels[i], &y = b.kernels[i];
    // Entries are named by content (lower::name_by_content): versions of one kernel differ in
    // name; each is looked up in its own plan's program.
    if (x.name != y.name || x.kind != y.kind || x.entry.empty() != y.entry.empty() || x.reads != y.reads ||
        x.writes != y.writes || x.gemm != y.gemm || x.convolution != y.convolution || !(x.parallel_extent == y.parallel_extent) ||
        x.arg_buffers != y.arg_buffers || x.arg_values != y.arg_values)
      return false;
  }
  return true;
}

}  // namespace

// One version of a generated kernel: its function and launch shape.
struct KernelVersion {
  void* fn = nullptr;
  plan::PlanLaunch launch;
  const std::string* source = nullptr;
};

// The arguments of one launch of a kernel version.
struct LaunchArgs {
  void* fn = nullptr;
  int64_t grid = 0, block = 0, shared = 0;
  std::vector<DevicePtr> bufs;
  std::vector<long long> syms;
  std::vector<void*> argv;
  void bind() {
    argv.clear();
    for (DevicePtr& p : bufs) argv.push_back(&p);
    for (long long& s : syms) argv.push_back(&s);
  }
};

// One call's bindings: symbol values, each buffer's device address, and the memory behind them.
struct Bound {
  std::shared_ptr<const plan::BoundSizes> at;  // the plan's sizes at this call's symbols
  const std::vector<int64_t>& syms() const { return at->symbols; }
  const std::vector<int64_t>& extents() const { return at->extents; }  // per kernel
  std::vector<DevicePtr> ptrs;
  std::vector<TensorData> held;  // device copies of host inputs
  std::vector<std::shared_ptr<Storage>> slot_mem, out_mem;
  // keep_buffers: held while this call uses the kept slots (binding to enqueueing its last
  // launch; later calls on the same stream run after it), so two calls at once never share them.
  std::unique_lock<std::mutex> kept_lock;
};

// The recorded CUDA graph of one set of sizes (reduce-overhead).
struct GraphState {
  std::vector<int64_t> syms;  // the sizes the graph (or the warm-up) was made for
  bool warmed = false;        // a direct run of these sizes happened (lazy loading done)
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  CUstream capture = nullptr;  // private stream library calls (gemms, convolutions) are captured on
  struct Node {
    size_t kernel = 0;
    bool library = false;  // a gemm or a convolution, captured as a child graph
    CUgraphNode node = nullptr;
    std::vector<DevicePtr> bound;  // the addresses the node was last given
  };
  std::vector<Node> nodes;
  void drop() {
    const detail::DriverApi& a = detail::driver();
    if (exec) a.cuGraphExecDestroy(exec);
    if (graph) a.cuGraphDestroy(graph);
    exec = nullptr;
    graph = nullptr;
    nodes.clear();
  }
  ~GraphState() {
    if (!available()) return;
    drop();
    if (capture) detail::driver().cuStreamDestroy(capture);
  }
};

struct PlanExecutable::Impl {
  plan::KernelPlan plan;
  ExecutableOptions options;
  Context* ctx = nullptr;
  // The libraries' start-ups (start_gemm: cuBLASLt; start_convolution: cuDNN), begun by load for
  // a plan that calls them so that they overlap the kernels' compiles and whatever the caller
  // does next; joined by the first bind, or by the destructor.
  std::vector<std::thread> library_starts;
  std::atomic<bool> library_starts_pending{false};  // not joined yet (bind's fast check)
  std::mutex library_starts_mu;
  void join_library_starts() {
    if (!library_starts_pending.load(std::memory_order_acquire)) return;
    std::lock_guard<std::mutex> lock(library_starts_mu);
    for (std::thread& t : library_starts)
      if (t.joinable()) t.join();
    library_starts_pending.store(false, std::memory_order_release);
  }
  ~Impl() { join_library_starts(); }
  std::vector<std::shared_ptr<Context::Module>> modules;
  std::vector<std::string> sources;                  // of every kernel version (stable addresses)
  std::vector<std::vector<KernelVersion>> versions;  // per kernel: [0] the plan's own, then alternatives
  std::vector<int> chosen;                           // per kernel: the version in use
  std::vector<int> library_algorithm;  // per kernel: cuBLASLt's or cuDNN's algorithm in use (0: its first)
  std::atomic<bool> tuned{true};
  std::atomic<bool> called{false};  // a call has begun (the first call's log)
  std::mutex tune_mu;
  std::string tuning_report;
  std::vector<std::vector<int32_t>> params;  // per kernel: the buffers it takes, in id order
  std::vector<std::shared_ptr<Storage>> constants;  // by buffer id
  std::vector<int32_t> input_buffer;  // buffer of graph input k
  bool graphable = true;  // no reference kernels
  double compile_seconds = 0;
  std::string compile_log;  // programs and their NVRTC times
  std::vector<ProgramImage> programs;
  int arch = 0;
  std::unique_ptr<plan::Binder> binder;  // of `plan`
  mutable std::mutex kept_mu;
  mutable std::vector<int64_t> kept_syms;
  mutable std::vector<std::shared_ptr<Storage>> kept_slots;
  mutable std::mutex graph_mu;
  mutable std::unique_ptr<GraphState> graph;
  mutable std::atomic<int64_t> graphs_recorded{0}, replays{0}, node_updates{0}, direct_runs{0};
  // KILN_LOGS=profile or set_profiling: each call launched kernel by kernel between timeline marks.
  std::atomic<bool> profiling{false};
  mutable std::mutex profile_mu;
  std::unique_ptr<Context::Timeline> timeline;
  std::unique_ptr<plan::KernelProfile> profile;
  void profiled_run(const Bound& b);

  Bound bind(std::span<const TensorData* const> inputs);
  LaunchArgs args(size_t ki, int version, const Bound& b) const;
  // Queues the kernels before `end` (every kernel by default) as chosen; with marks, marks the
  // timeline before each kernel and after the last.
  void launch_all(const Bound& b, void* stream, Context::Timeline* marks = nullptr, size_t end = SIZE_MAX);
  // Queues generated kernel ki as `version` on stream (null: the context's), after its library
  // call if it has one.
  void launch_one(const Bound& b, size_t ki, int version, void* stream);
  // Runs kernel ki alone as `version` (its library call too) on the default stream; its time in ms.
  double time_kernel(const Bound& b, size_t ki, int version, Context::Timer& timer);
  void tune(const Bound& b);
  template <class Progress>
  void tune_libraries(const Bound& b, const std::string& problem, Context::Timer& timer, std::ostringstream& report,
                      Progress& progress);
  // The recorded graph of b's sizes, updated and launched; false when it cannot be used yet (the
  // warm-up call of new sizes), and the caller launches directly.
  bool replay(const Bound& b);
  void record(GraphState& g, const Bound& b);
  CUgraph capture_library(GraphState& g, size_t ki, const Bound& b);
  // Kernel ki's gemm or convolution, with its library's algorithm `algorithm`.
  void run_library(size_t ki, const Bound& b, void* stream, int algorithm);
  std::vector<DevicePtr> node_addresses(const GraphState::Node& n, const Bound& b) const;
};

PlanExecutable::PlanExecutable() = default;
PlanExecutable::~PlanExecutable() = default;

std::shared_ptr<PlanExecutable> PlanExecutable::load(plan::KernelPlan p, const ExecutableOptions& options) {
  return load(std::move(p), {}, options);
}

std::shared_ptr<PlanExecutable> PlanExecutable::load(plan::KernelPlan p, std::vector<plan::KernelPlan> alternatives,
                                                     const ExecutableOptions& options) {
  KILN_CHECK(p.target == "cuda", "cuda runtime: the plan is for target '", p.target, "', not cuda");
  plan::validate(p, "cuda runtime");
  auto exe = std::shared_ptr<PlanExecutable>(new PlanExecutable);
  exe->impl_ = std::make_unique<Impl>();
  Impl& im = *exe->impl_;
  im.plan = std::move(p);
  im.options = options;
  im.ctx = &Context::get(options.device);
  // A plan generated for one architecture may use its own instructions (sm_90a's wgmma).
  const int device_arch = im.ctx->info().arch();
  KILN_CHECK(im.plan.arch == 0 || im.plan.arch == device_arch, "cuda runtime: the plan was generated for sm_", im.plan.arch,
             " and cuda:", options.device, " is sm_", device_arch, "; generate it for this device (CodegenOptions::arch) or for any (0)");
  std::erase_if(alternatives, [&](const plan::KernelPlan& a) { return a.arch != 0 && a.arch != device_arch; });
  // A call needing more than the device has fails before it allocates, naming what is largest.
  const plan::MemoryLimit device_memory{im.ctx->info().total_memory,
                                        "the " + bytes_str(im.ctx->info().total_memory) + " of memory of cuda:" +
                                            std::to_string(options.device) + " (" + im.ctx->info().name + ")"};
  im.binder = std::make_unique<plan::Binder>(im.plan, "cuda runtime", [device_memory] { return device_memory; });
  im.input_buffer = im.binder->input_buffers();
  std::erase_if(alternatives, [&](const plan::KernelPlan& a) { return a.target != "cuda" || !interchangeable(im.plan, a); });
  for (const plan::KernelPlan& a : alternatives) plan::validate(a, "cuda runtime: an alternative plan");
  const auto t0 = std::chrono::steady_clock::now();
  // The libraries' problems, set up while the plan compiles (their tables find repeats).
  std::vector<plan::PlanGemm> gemms;
  std::vector<plan::PlanConvolution> convolutions;
  for (const plan::PlanKernel& k : im.plan.kernels) {
    if (k.gemm) gemms.push_back(*k.gemm);
    if (k.convolution) convolutions.push_back(*k.convolution);
  }
  im.library_starts.push_back(start_gemm(*im.ctx, std::move(gemms), options.allow_tf32));
  im.library_starts.push_back(start_convolution(*im.ctx, std::move(convolutions), options.allow_tf32));
  im.library_starts_pending = std::any_of(im.library_starts.begin(), im.library_starts.end(), [](const std::thread& t) { return t.joinable(); });
  im.arch = im.ctx->info().arch();
  // The programs: per plan (the plan's, then each alternative's that differs) its CUDA C module
  // and its LLVM modules in a few groups, or, with several generated kernels and
  // KILN_CUDA_COMPILE_THREADS > 1, one per kernel version; compiled on parallel threads.
  std::vector<const plan::KernelPlan*> plans = {&im.plan};
  for (const plan::KernelPlan& a : alternatives) plans.push_back(&a);
  size_t generated = 0;
  for (const plan::PlanKernel& k : im.plan.kernels) generated += k.source.empty() ? 0 : 1;
  const bool split = generated > 1 && program_per_kernel();
  std::vector<std::string> program_sources;
  // program_of[pi][ki]: the program holding kernel ki of plan pi (-1: none)
  std::vector<std::vector<int>> program_of(plans.size(), std::vector<int>(im.plan.kernels.size(), -1));
  auto program = [&](std::string src) {
    auto it = std::find(program_sources.begin(), program_sources.end(), src);
    if (it == program_sources.end()) it = program_sources.insert(program_sources.end(), std::move(src));
    return static_cast<int>(it - program_sources.begin());
  };
  // Kernels of a fixed signature (flash attention) are programs of their own, whose images may
  // be built into this library (prebuilt_image) and are shared by every plan that has them.
  for (size_t pi = 0; pi < plans.size() && generated > 0; ++pi) {
    const plan::KernelPlan& pl = *plans[pi];
    const bool rest = std::any_of(pl.kernels.begin(), pl.kernels.end(), [](const plan::PlanKernel& k) {
      return !k.entry.empty() && !k.fixed_signature() && !k.own_module();
    });
    const int whole = split || !rest ? -1 : program(pl.module_source(false));
    // Kernels that are LLVM modules of their own (PlanKernel::language) make a few programs
    // together (own_module_groups): each one PTX, one cubin.
    std::map<std::string_view, size_t> group_of;
    std::vector<int> llvm;
    if (!split)
      for (std::string& group : own_module_groups(pl, group_of)) llvm.push_back(program(std::move(group)));
    for (size_t ki = 0; ki < im.plan.kernels.size(); ++ki) {
      const plan::PlanKernel& k = pl.kernels[ki];
      if (k.entry.empty()) continue;
      if (k.own_module()) program_of[pi][ki] = split ? program(k.source) : llvm[group_of.at(k.source)];
      else program_of[pi][ki] = split || k.fixed_signature() ? program(pl.kernel_program(ki)) : whole;
    }
  }
  bool fresh = false;
  if (!program_sources.empty()) {
    const std::vector<CompiledModule> cms = compile_all(program_sources, im.arch, "kiln_plan");
    const auto t_load = std::chrono::steady_clock::now();
    for (size_t m = 0; m < cms.size(); ++m) {
      im.programs.push_back(ProgramImage{program_sources[m], cms[m]});
      im.modules.push_back(im.ctx->load_module(cms[m].image, "kiln_plan" + (m ? "_" + std::to_string(m) : "")));
      fresh = fresh || cms[m].seconds > 0;
      im.compile_log += (m ? ", " : "") + (cms[m].prebuilt ? std::string("prebuilt") : std::to_string(cms[m].seconds * 1e3).substr(0, 6));
    }
    im.compile_log += "; module loads " +
                      std::to_string(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_load).count()).substr(0, 6);
    im.arch = cms[0].arch;
  }
  if (fresh) im.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  size_t nvptx = 0;
  for (const std::string& s : program_sources) nvptx += is_nvptx_program(s) ? 1 : 0;
  im.compile_log = std::to_string(program_sources.size() - nvptx) + " NVRTC, " + std::to_string(nvptx) + " LLVM program" +
                   (program_sources.size() == 1 ? "" : "s") + " (ms: " + im.compile_log + ")";
  im.sources.reserve(plans.size() * im.plan.kernels.size());
  im.versions.resize(im.plan.kernels.size());
  im.chosen.assign(im.plan.kernels.size(), 0);
  bool tunable = false;
  for (size_t ki = 0; ki < im.plan.kernels.size(); ++ki) {
    const plan::PlanKernel& k = im.plan.kernels[ki];
    if (k.kind == "reference") im.graphable = false;
    for (size_t pi = 0; pi < plans.size(); ++pi) {
      const plan::PlanKernel& v = plans[pi]->kernels[ki];
      if (v.entry.empty()) {
        if (pi == 0) im.versions[ki].push_back(KernelVersion{nullptr, v.launch, nullptr});
        continue;
      }
      bool seen = false;
      for (const KernelVersion& e : im.versions[ki]) seen = seen || (e.source && *e.source == v.source && e.launch == v.launch);
      if (seen) continue;
      im.sources.push_back(v.source);
      im.versions[ki].push_back(KernelVersion{
          im.ctx->function(*im.modules[static_cast<size_t>(program_of[pi][ki])], v.entry, v.launch.shared_bytes), v.launch,
          &im.sources.back()});
    }
    tunable = tunable || im.versions[ki].size() > 1 || (options.autotune_gemm && (k.gemm || k.convolution));
    im.params.push_back(k.fixed_signature() ? k.arg_buffers : plan::kernel_bindings(k));
  }
  im.tuned = !tunable;
  im.library_algorithm.assign(im.plan.kernels.size(), 0);
  im.constants.resize(im.plan.buffers.size());
  for (const plan::PlanBuffer& b : im.plan.buffers) {
    if (b.kind != "constant") continue;
    const size_t n = b.data->bytes.size();
    im.constants[static_cast<size_t>(b.id)] = im.ctx->allocate(n);
    if (n) im.ctx->copy_to_device(reinterpret_cast<DevicePtr>(im.constants[static_cast<size_t>(b.id)]->data()),
                                  b.data->bytes.data(), n);
  }
  return exe;
}

const plan::KernelPlan& PlanExecutable::plan() const { return impl_->plan; }
double PlanExecutable::compile_seconds() const { return impl_->compile_seconds; }
int PlanExecutable::arch() const { return impl_->arch; }
std::string PlanExecutable::compile_log() const { return impl_->compile_log; }
const std::vector<ProgramImage>& PlanExecutable::programs() const { return impl_->programs; }

std::vector<TensorData> PlanExecutable::run_host(std::span<const TensorData> inputs) const {
  std::vector<TensorData> outs = run(inputs);
  for (TensorData& t : outs)
    if (t.device().type == DeviceType::cuda) t = to_host(t);
  return outs;
}

std::vector<TensorData> PlanExecutable::run(std::span<const TensorData> inputs) const {
  std::vector<const TensorData*> p;
  p.reserve(inputs.size());
  for (const TensorData& t : inputs) p.push_back(&t);
  return run(std::span<const TensorData* const>(p));
}

Bound PlanExecutable::Impl::bind(std::span<const TensorData* const> inputs) {
  join_library_starts();
  Context& ctx = *this->ctx;
  const plan::KernelPlan& pl = plan;
  // Sizes, checked inputs, slots and extents (bind.h); what is left is memory, copies, launches.
  const plan::Binding sizes = binder->bind(inputs);
  Bound bound;
  bound.at = sizes.at;
  std::vector<DevicePtr>& ptrs = bound.ptrs;
  ptrs.assign(pl.buffers.size(), 0);
  std::vector<TensorData>& held = bound.held;  // device copies of host inputs, alive until the run is queued
  held.reserve(inputs.size());
  const int dev = ctx.info().ordinal;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const plan::PlanBuffer& b = pl.buffers[static_cast<size_t>(input_buffer[k])];
    const TensorData& t = *inputs[k];
    const Device where = t.device();
    KILN_CHECK(where.type == DeviceType::cpu || (where.type == DeviceType::cuda && where.index == dev), "cuda runtime: input ",
               k, " is on ", where.str(), "; the plan runs on cuda:", dev);
    const bool strides_ok = !sizes.copy_input[k];
    const int64_t es = dtype_size(t.dtype);
    if (where.type == DeviceType::cuda && strides_ok) {
      const DevicePtr at = reinterpret_cast<DevicePtr>(t.storage->data()) + static_cast<DevicePtr>(t.offset * es);
      if (at % kBufferAlignment == 0) {
        ptrs[static_cast<size_t>(b.id)] = at;
        continue;
      }
    }
    if (!strides_ok || t.numel() == 0) {  // the plan wants it contiguous: a contiguous device copy
      held.push_back(to_device(where.type == DeviceType::cuda ? to_host(t) : t, dev));
      ptrs[static_cast<size_t>(b.id)] = reinterpret_cast<DevicePtr>(held.back().storage->data());
      continue;
    }
    // A host view with the plan's strides, or a device one at an address the kernels cannot take
    // (kBufferAlignment): its storage span copied as it is to a new allocation.
    int64_t lo = 0, hi = 0;
    for (size_t d = 0; d < t.sizes.size(); ++d) {
      const int64_t ext = (t.sizes[d] - 1) * t.strides[d];
      (ext < 0 ? lo : hi) += ext;
    }
    const size_t bytes = static_cast<size_t>((hi - lo + 1) * es);
    TensorData d;
    d.dtype = t.dtype;
    d.storage = ctx.allocate(bytes);
    if (where.type == DeviceType::cuda)
      ctx.copy_device(reinterpret_cast<DevicePtr>(d.storage->data()),
                      reinterpret_cast<DevicePtr>(t.data()) + static_cast<DevicePtr>(lo * es), bytes);
    else
      ctx.copy_to_device(reinterpret_cast<DevicePtr>(d.storage->data()), static_cast<const char*>(t.data()) + lo * es, bytes);
    ptrs[static_cast<size_t>(b.id)] = reinterpret_cast<DevicePtr>(d.storage->data()) + static_cast<DevicePtr>(-lo * es);
    held.push_back(std::move(d));
  }
  // Slots, outputs, constants.
  std::vector<std::shared_ptr<Storage>>& slot_mem = bound.slot_mem;
  std::unique_lock<std::mutex>& kept_lock = bound.kept_lock;
  kept_lock = std::unique_lock<std::mutex>(kept_mu, std::defer_lock);
  const bool keep = options.keep_buffers && kept_lock.try_lock();
  const std::vector<int64_t>& syms = bound.syms();
  if (keep && kept_syms == syms && kept_slots.size() == pl.slots.size()) {
    slot_mem = kept_slots;
  } else {
    for (int64_t bytes : sizes.slot_bytes()) slot_mem.push_back(ctx.allocate(static_cast<size_t>(bytes)));
    if (keep) {
      kept_syms = syms;
      kept_slots = slot_mem;
    }
  }
  std::vector<std::shared_ptr<Storage>>& out_mem = bound.out_mem;
  out_mem.resize(pl.buffers.size());
  for (const plan::PlanBuffer& b : pl.buffers) {
    const size_t id = static_cast<size_t>(b.id);
    if (b.kind == "constant") {
      ptrs[id] = reinterpret_cast<DevicePtr>(constants[id]->data());
    } else if (b.kind == "output") {
      out_mem[id] = ctx.allocate(static_cast<size_t>(sizes.buffer_bytes()[id]));
      ptrs[id] = reinterpret_cast<DevicePtr>(out_mem[id]->data());
    } else if (b.kind == "intermediate") {
      ptrs[id] = reinterpret_cast<DevicePtr>(slot_mem[static_cast<size_t>(b.slot)]->data());
    }
  }
  return bound;
}

LaunchArgs PlanExecutable::Impl::args(size_t ki, int version, const Bound& b) const {
  const plan::PlanKernel& k = plan.kernels[ki];
  const KernelVersion& v = versions[ki][static_cast<size_t>(version)];
  LaunchArgs a;
  a.fn = v.fn;
  const int64_t extent = b.extents()[ki];
  if (!v.fn || extent == 0) return a;
  int64_t grid = (extent + v.launch.items_per_block - 1) / std::max<int64_t>(1, v.launch.items_per_block);
  if (v.launch.max_blocks > 0) grid = std::min(grid, v.launch.max_blocks);
  // A kernel without a grid-stride loop needs every block (PlanLaunch::grid_stride).
  KILN_CHECK(v.launch.grid_stride || (v.launch.max_blocks == 0 && grid <= 0x7fffffff), "cuda runtime: kernel ", k.name,
             " has no grid-stride loop and needs ", grid, " blocks, one per ", v.launch.items_per_block,
             " items; a launch caps them at ", v.launch.max_blocks > 0 ? v.launch.max_blocks : int64_t{0x7fffffff});
  a.grid = std::clamp<int64_t>(grid, 1, 0x7fffffff);
  a.block = v.launch.block;
  a.shared = v.launch.shared_bytes;
  for (int32_t id : params[ki]) a.bufs.push_back(b.ptrs[static_cast<size_t>(id)]);
  if (k.fixed_signature())
    for (const SymInt& x : k.arg_values) a.syms.push_back(x.evaluate(b.syms()));
  else
    a.syms.assign(b.syms().begin(), b.syms().end());
  a.bind();
  return a;
}

void PlanExecutable::Impl::launch_all(const Bound& b, void* stream, Context::Timeline* marks, size_t end) {
  Context& c = *ctx;
  const plan::KernelPlan& pl = plan;
  const int dev = c.info().ordinal;
  auto device_view = [&](int32_t id) {
    const plan::PlanBuffer& buf = pl.buffers[static_cast<size_t>(id)];
    TensorData t;
    t.dtype = buf.dtype;
    t.sizes = eval(buf.sizes, b.syms());
    t.strides = eval(buf.strides, b.syms());
    int64_t span = 1;
    for (size_t d = 0; d < t.sizes.size(); ++d) span += (t.sizes[d] - 1) * t.strides[d];
    t.storage = std::make_shared<Storage>(Device::cuda(dev), reinterpret_cast<void*>(b.ptrs[static_cast<size_t>(id)]),
                                          static_cast<size_t>(std::max<int64_t>(span, 0) * dtype_size(buf.dtype)), nullptr);
    return t;
  };
  for (size_t ki = 0; ki < std::min(end, pl.kernels.size()); ++ki) {
    const plan::PlanKernel& k = pl.kernels[ki];
    if (marks) marks->mark();
    if (k.kind == "reference") {
      std::vector<TensorData> args;
      for (int32_t id : k.inputs) args.push_back(to_host(device_view(id)));
      const plan::PlanBuffer& ob = pl.buffers[static_cast<size_t>(k.output)];
      const TensorData r = eval::run_op(k.op, args, k.attrs, ob.dtype, eval(ob.sizes, b.syms()));
      const TensorData rc = r.is_contiguous() ? r : eval::contiguous(r);
      const size_t bytes = static_cast<size_t>(rc.numel() * dtype_size(rc.dtype));
      if (bytes) c.copy_to_device(b.ptrs[static_cast<size_t>(k.output)], rc.data(), bytes);
      continue;
    }
    launch_one(b, ki, chosen[ki], stream);
  }
  if (marks) marks->mark();
}

void PlanExecutable::Impl::launch_one(const Bound& b, size_t ki, int version, void* stream) {
  const plan::PlanKernel& k = plan.kernels[ki];
  if (k.gemm || k.convolution) run_library(ki, b, stream, library_algorithm[ki]);
  LaunchArgs a = args(ki, version, b);
  if (a.fn && a.grid > 0) ctx->launch(a.fn, a.grid, a.block, a.shared, a.argv.data(), k.name, stream);
}

double PlanExecutable::Impl::time_kernel(const Bound& b, size_t ki, int version, Context::Timer& timer) {
  timer.start();
  launch_one(b, ki, version, nullptr);
  return timer.stop_ms();
}

void PlanExecutable::Impl::profiled_run(const Bound& b) {
  std::lock_guard<std::mutex> lock(profile_mu);
  if (!timeline) timeline = ctx->timeline();
  if (!profile)
    profile = std::make_unique<plan::KernelProfile>(plan.kernels.size(),
                                                    "cuda:" + std::to_string(ctx->info().ordinal) + " (" + ctx->info().name + ")");
  launch_all(b, nullptr, timeline.get());
  profile->add_call(timeline->intervals_ms());
  if (profile->report_due()) KILN_LOG(profile, profile->report(plan));
}

void PlanExecutable::set_profiling(bool on) { impl_->profiling.store(on, std::memory_order_relaxed); }

std::optional<plan::KernelProfile> PlanExecutable::profile() const {
  std::lock_guard<std::mutex> lock(impl_->profile_mu);
  if (!impl_->profile) return std::nullopt;
  return *impl_->profile;
}

namespace {

// Autotuning's measurement: candidates 0..n-1, each run once untimed (lazy loading, caches), then
// `trials` times; `run(c)` runs candidate c once and returns its time in ms. The fastest by
// median, its median, and every median ("0.0133 0.0149 ...") for the report.
struct Timed {
  int best = 0;
  double best_ms = 0;
  std::string medians;
};
template <class Run>
Timed time_candidates(int n, int trials, Run&& run) {
  Timed r;
  for (int c = 0; c < n; ++c) {
    run(c);
    std::vector<double> t;
    for (int i = 0; i < std::max(1, trials); ++i) t.push_back(run(c));
    std::sort(t.begin(), t.end());
    const double med = t[t.size() / 2];
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%.4f", c ? " " : "", med);
    r.medians += buf;
    if (c == 0 || med < r.best_ms) {
      r.best = c;
      r.best_ms = med;
    }
  }
  return r;
}

}  // namespace

void PlanExecutable::Impl::tune(const Bound& b) {
  std::lock_guard<std::mutex> lock(tune_mu);
  if (tuned) return;
  std::string problem;
  for (int64_t s : b.syms()) problem += std::to_string(s) + ",";
  auto timer = ctx->timer();
  std::ostringstream report;
  // Progress for long tuning: once it has run for 2 s, a line per kernel it goes on to.
  const auto started = std::chrono::steady_clock::now();
  auto progress = [&](size_t ki, const std::string& what) {
    if (!options.progress || std::chrono::steady_clock::now() - started < std::chrono::seconds(2)) return;
    options.progress("max-autotune: " + plan.kernels[ki].name + " (kernel " + std::to_string(ki + 1) + " of " +
                     std::to_string(plan.kernels.size()) + "): " + what);
  };
  for (size_t ki = 0; ki < plan.kernels.size(); ++ki) {
    const std::vector<KernelVersion>& vs = versions[ki];
    if (vs.size() < 2) continue;
    progress(ki, "timing " + std::to_string(vs.size()) + " versions");
    std::string signature;
    for (const KernelVersion& v : vs)
      signature += *v.source + "\n// launch " + std::to_string(v.launch.block) + " " + std::to_string(v.launch.items_per_block) +
                   " " + std::to_string(v.launch.max_blocks) + " " + std::to_string(v.launch.shared_bytes) + "\n";
    auto describe = [&](int i) {
      const plan::PlanLaunch& l = vs[static_cast<size_t>(i)].launch;
      return plan.kernels[ki].name + ": version " + std::to_string(i) + " of " + std::to_string(vs.size()) + " (block " +
             std::to_string(l.block) + ", " + std::to_string(l.items_per_block) + " items per block)";
    };
    if (options.recall) {
      if (const std::optional<int> c = options.recall(signature, problem); c && *c >= 0 && *c < static_cast<int>(vs.size())) {
        chosen[ki] = *c;
        report << describe(*c) << " (from the autotune cache)\n";
        continue;
      }
    }
    // The kernels before it, run once from the inputs, leave its operands as a call has them (a
    // slot it reads may since have been reused, and a kernel that updates a buffer in place
    // changes what it reads when run again); then only it runs, once per trial. Running the whole
    // plan per trial made a model's tuning kernels x versions x trials plans long (vit_b_16 fp32
    // on an H100: 149 kernels, up to 12 versions each, over 3 minutes).
    launch_all(b, nullptr, nullptr, ki);
    const Timed t = time_candidates(static_cast<int>(vs.size()), options.autotune_trials,
                                    [&](int v) { return time_kernel(b, ki, v, *timer); });
    const int best = t.best;
    chosen[ki] = best;
    report << describe(best) << ", " << t.best_ms << " ms (medians in ms of the versions: " << t.medians << ")\n";
    if (options.remember) options.remember(signature, problem, best, describe(best));
  }
  if (options.autotune_gemm) tune_libraries(b, problem, *timer, report, progress);
  ctx->synchronize();
  tuning_report = report.str();
  tuned = true;
}

// max-autotune of library calls: each gemm's other cuBLASLt algorithms (its heuristic's next
// choices, up to 8 in all) and each convolution's other cuDNN algorithms (those its heuristic
// proposes that fit the workspace), timed alone on the operands one full run of the plan left,
// median of autotune_trials; the fastest is kept (and remembered in the autotune cache).
template <class Progress>
void PlanExecutable::Impl::tune_libraries(const Bound& b, const std::string& problem, Context::Timer& timer,
                                          std::ostringstream& report, Progress& progress) {
  bool ran = false;
  const std::vector<int64_t>& z = b.syms();
  for (size_t ki = 0; ki < plan.kernels.size(); ++ki) {
    const plan::PlanKernel& k = plan.kernels[ki];
    if (!k.gemm && !k.convolution) continue;
    const int n = k.gemm ? gemm_algorithms(*ctx, *k.gemm, z, options.allow_tf32, k.name)
                         : convolution_algorithms(*ctx, *k.convolution, z, options.allow_tf32, k.name);
    if (n < 2) continue;
    std::ostringstream sig;
    if (k.gemm) {
      const plan::PlanGemm& g = *k.gemm;
      sig << "cuBLASLt gemm " << dtype_name(g.dtype) << (options.allow_tf32 ? " tf32" : "") << " m " << g.m.evaluate(z)
          << " n " << g.n.evaluate(z) << " k " << g.k.evaluate(z) << " a strides " << g.a_row_stride.evaluate(z) << ","
          << g.a_col_stride.evaluate(z) << " b strides " << g.b_row_stride.evaluate(z) << "," << g.b_col_stride.evaluate(z)
          << " batch";
      for (size_t d = 0; d < g.batch.size(); ++d)
        sig << " " << g.batch[d].evaluate(z) << "/" << g.a_batch_strides[d].evaluate(z) << "/" << g.b_batch_strides[d].evaluate(z);
      sig << " epilogue '" << g.epilogue << "' algorithms " << n;
    } else {
      const plan::PlanConvolution& c = *k.convolution;
      sig << "cuDNN convolution " << (c.computes == ConvolutionComputes::y ? "" : "gradient of ")
          << convolution_computes_name(c.computes) << " " << dtype_name(c.dtype) << (options.allow_tf32 ? " tf32" : "") << " x";
      for (const SymInt& e : c.x_sizes) sig << " " << e.evaluate(z);
      sig << " w";
      for (int64_t e : c.w_sizes) sig << " " << e;
      for (const std::vector<int64_t>* v : {&c.strides, &c.pads, &c.dilations}) {
        sig << " |";
        for (int64_t e : *v) sig << " " << e;
      }
      sig << " groups " << c.groups << (c.channels_last ? " channels last" : "") << " algorithms " << n;
    }
    const std::string signature = sig.str();
    auto describe = [&](int a) {
      if (k.convolution)
        return k.name + ": " + convolution_algorithm_name(*ctx, *k.convolution, z, options.allow_tf32, k.name, a) +
               " (algorithm " + std::to_string(a) + " of " + std::to_string(n) + " in heuristic order)";
      return k.name + ": cuBLASLt algorithm " + std::to_string(a) + " of " + std::to_string(n) + " (heuristic order)";
    };
    if (options.recall)
      if (const std::optional<int> c = options.recall(signature, problem); c && *c >= 0 && *c < n) {
        library_algorithm[ki] = *c;
        report << describe(*c) << " (from the autotune cache)\n";
        continue;
      }
    progress(ki, "timing " + std::to_string(n) + (k.gemm ? " cuBLASLt" : " cuDNN") + " algorithms");
    if (!ran) {  // every operand computed once
      launch_all(b, nullptr);
      ran = true;
    }
    const Timed t = time_candidates(n, options.autotune_trials, [&](int a) {
      timer.start();
      run_library(ki, b, nullptr, a);
      return timer.stop_ms();
    });
    const int best = t.best;
    library_algorithm[ki] = best;
    report << describe(best) << ", " << t.best_ms << " ms (medians in ms of the algorithms: " << t.medians << ")\n";
    if (options.remember) options.remember(signature, problem, best, describe(best));
  }
}

std::vector<DevicePtr> PlanExecutable::Impl::node_addresses(const GraphState::Node& n, const Bound& b) const {
  std::vector<DevicePtr> v;
  const plan::PlanKernel& k = plan.kernels[n.kernel];
  if (n.library && k.gemm) {
    for (int32_t id : {k.gemm->a, k.gemm->b, k.gemm->c, k.gemm->bias})
      if (id >= 0) v.push_back(b.ptrs[static_cast<size_t>(id)]);
  } else if (n.library) {
    for (int32_t id : {k.convolution->x, k.convolution->w, k.convolution->y}) v.push_back(b.ptrs[static_cast<size_t>(id)]);
  } else {
    for (int32_t id : params[n.kernel]) v.push_back(b.ptrs[static_cast<size_t>(id)]);
  }
  return v;
}

void PlanExecutable::Impl::run_library(size_t ki, const Bound& b, void* stream, int algorithm) {
  const plan::PlanKernel& k = plan.kernels[ki];
  if (k.gemm) run_gemm(*ctx, *k.gemm, b.ptrs, b.syms(), options.allow_tf32, k.name, stream, algorithm);
  else run_convolution(*ctx, *k.convolution, b.ptrs, b.syms(), options.allow_tf32, k.name, stream, algorithm);
}

CUgraph PlanExecutable::Impl::capture_library(GraphState& g, size_t ki, const Bound& b) {
  const detail::DriverApi& d = detail::driver();
  const plan::PlanKernel& k = plan.kernels[ki];
  const std::string what = std::string(k.gemm ? "(recording gemm " : "(recording convolution ") + k.name + ")";
  detail::check(d.cuStreamBeginCapture(g.capture, CU_STREAM_CAPTURE_MODE_RELAXED), "cuStreamBeginCapture", what);
  CUgraph child = nullptr;
  try {
    run_library(ki, b, g.capture, library_algorithm[ki]);
  } catch (...) {
    d.cuStreamEndCapture(g.capture, &child);
    if (child) d.cuGraphDestroy(child);
    throw;
  }
  detail::check(d.cuStreamEndCapture(g.capture, &child), "cuStreamEndCapture", what);
  return child;
}

namespace {
CUDA_KERNEL_NODE_PARAMS node_params(LaunchArgs& a) {
  CUDA_KERNEL_NODE_PARAMS p{};
  p.func = static_cast<CUfunction>(a.fn);
  p.gridDimX = static_cast<unsigned>(a.grid);
  p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = static_cast<unsigned>(a.block);
  p.blockDimY = p.blockDimZ = 1;
  p.sharedMemBytes = static_cast<unsigned>(a.shared);
  p.kernelParams = a.argv.data();
  return p;
}
}  // namespace

void PlanExecutable::Impl::record(GraphState& g, const Bound& b) {
  const detail::DriverApi& d = detail::driver();
  g.drop();
  if (!g.capture) detail::check(d.cuStreamCreate(&g.capture, CU_STREAM_NON_BLOCKING), "cuStreamCreate", "(graph capture)");
  detail::check(d.cuGraphCreate(&g.graph, 0), "cuGraphCreate");
  CUgraphNode prev = nullptr;
  for (size_t ki = 0; ki < plan.kernels.size(); ++ki) {
    const plan::PlanKernel& k = plan.kernels[ki];
    if (k.gemm || k.convolution) {
      CUgraph child = capture_library(g, ki, b);
      GraphState::Node n{ki, true, nullptr, {}};
      const CUresult r = d.cuGraphAddChildGraphNode(&n.node, g.graph, prev ? &prev : nullptr, prev ? 1 : 0, child);
      d.cuGraphDestroy(child);
      detail::check(r, "cuGraphAddChildGraphNode", "(library call of kernel " + k.name + ")");
      n.bound = node_addresses(n, b);
      prev = n.node;
      g.nodes.push_back(std::move(n));
    }
    LaunchArgs a = args(ki, chosen[ki], b);
    if (!a.fn || a.grid <= 0) continue;
    const CUDA_KERNEL_NODE_PARAMS p = node_params(a);
    GraphState::Node n{ki, false, nullptr, a.bufs};
    detail::check(d.cuGraphAddKernelNode(&n.node, g.graph, prev ? &prev : nullptr, prev ? 1 : 0, &p), "cuGraphAddKernelNode",
                  "(kernel " + k.name + ")");
    prev = n.node;
    g.nodes.push_back(std::move(n));
  }
  detail::check(d.cuGraphInstantiate(&g.exec, g.graph, 0), "cuGraphInstantiate",
                "(" + std::to_string(g.nodes.size()) + " nodes)");
  g.syms = b.syms();
  ++graphs_recorded;
  KILN_LOG(perf_hints, "cuda runtime: recorded a CUDA graph of ", g.nodes.size(), " nodes (",
           std::count_if(g.nodes.begin(), g.nodes.end(), [](const GraphState::Node& n) { return n.library; }),
           " library calls), graphs recorded so far: ", graphs_recorded.load());
}

bool PlanExecutable::Impl::replay(const Bound& b) {
  const detail::DriverApi& d = detail::driver();
  if (!graph) graph = std::make_unique<GraphState>();
  GraphState& g = *graph;
  if (g.syms != b.syms() || !g.warmed) {
    g.drop();
    g.syms = b.syms();
    g.warmed = true;
    return false;  // the warm-up call of these sizes: direct launches
  }
  if (!g.exec) {
    record(g, b);
  } else {
    std::string recaptured;  // library calls captured again this call (perf_hints)
    for (GraphState::Node& n : g.nodes) {
      std::vector<DevicePtr> now = node_addresses(n, b);
      if (now == n.bound) continue;
      CUresult r;
      if (n.library) {
        CUgraph child = capture_library(g, n.kernel, b);
        r = d.cuGraphExecChildGraphNodeSetParams(g.exec, n.node, child);
        d.cuGraphDestroy(child);
        if (logs::enabled(logs::Category::perf_hints)) recaptured += " " + plan.kernels[n.kernel].name;
      } else {
        LaunchArgs a = args(n.kernel, chosen[n.kernel], b);
        const CUDA_KERNEL_NODE_PARAMS p = node_params(a);
        r = d.cuGraphExecKernelNodeSetParams(g.exec, n.node, &p);
      }
      if (r != CUDA_SUCCESS) {  // an update the driver refuses: record the graph again
        KILN_LOG(perf_hints, "cuda runtime: the driver refused to update the CUDA graph's node of kernel ",
                 plan.kernels[n.kernel].name, " (CUresult ", static_cast<int>(r), "): the whole graph is recorded again");
        record(g, b);
        break;
      }
      n.bound = std::move(now);
      ++node_updates;
    }
    if (!recaptured.empty())
      KILN_LOG(perf_hints, "cuda runtime: CUDA graph replay captured library calls again (their buffers moved):", recaptured);
  }
  detail::check(d.cuGraphLaunch(g.exec, static_cast<CUstream>(ctx->stream())), "cuGraphLaunch",
                "(the plan's graph of " + std::to_string(g.nodes.size()) + " nodes)");
  ++replays;
  return true;
}

std::vector<TensorData> PlanExecutable::run(std::span<const TensorData* const> inputs) const {
  Impl& im = *impl_;
  Context& ctx = *im.ctx;
  ctx.make_current();
  const plan::KernelPlan& pl = im.plan;
  // KILN_LOGS=cache: where the first call's time goes before its kernels finish (a warm first
  // call's share of the process's start).
  // Later calls pay one relaxed load for it.
  using Clock = std::chrono::steady_clock;
  const bool log_first = !im.called.load(std::memory_order_relaxed) && !im.called.exchange(true) &&
                         logs::enabled(logs::Category::cache);
  auto now = [log_first] { return log_first ? Clock::now() : Clock::time_point{}; };
  const Clock::time_point t_start = now();
  if (log_first) im.join_library_starts();
  const Clock::time_point t_joined = now();
  const int64_t setup_ns = log_first ? detail::library_setup_ns().load() : 0;
  const Bound bound = im.bind(inputs);
  const std::vector<int64_t>& syms = bound.syms();
  const std::vector<std::shared_ptr<Storage>>& out_mem = bound.out_mem;
  const int dev = ctx.info().ordinal;
  const Clock::time_point t_bound = now();
  if (!im.tuned.load()) im.tune(bound);
  const Clock::time_point t_tuned = now();
  bool done = false;
  if (im.profiling.load(std::memory_order_relaxed) || logs::enabled(logs::Category::profile)) {
    im.profiled_run(bound);
    done = true;
  }
  if (!done && im.options.cuda_graph && im.graphable) {
    std::unique_lock<std::mutex> lock(im.graph_mu, std::try_to_lock);
    if (lock.owns_lock()) done = im.replay(bound);
  }
  if (!done) {
    im.launch_all(bound, nullptr);
    ++im.direct_runs;
  }
  if (log_first) {
    const Clock::time_point t_queued = Clock::now();
    ctx.synchronize();
    auto ms = [](Clock::time_point a, Clock::time_point b) { return std::to_string(std::chrono::duration<double, std::milli>(b - a).count()); };
    KILN_LOG(cache, "cuda runtime: first call of a plan of ", pl.kernels.size(), " kernels: the libraries' start-ups joined after ",
             ms(t_start, t_joined), " ms, bound in ", ms(t_joined, t_bound), " ms, tuned in ", ms(t_bound, t_tuned), " ms, queued in ",
             ms(t_tuned, t_queued), " ms (of which the libraries set up problems ",
             std::to_string((detail::library_setup_ns().load() - setup_ns) / 1e6), " ms), done on the device ",
             ms(t_queued, Clock::now()), " ms later");
  }
  std::vector<TensorData> outs(pl.outputs.size());
  for (size_t o = 0; o < pl.outputs.size(); ++o) {
    const int32_t id = pl.outputs[o];
    const plan::PlanBuffer& b = pl.buffers[static_cast<size_t>(id)];
    if (b.kind == "input") {
      outs[o] = *inputs[static_cast<size_t>(b.index)];
    } else if (b.kind == "constant") {
      TensorData h;
      h.dtype = b.dtype;
      h.sizes = eval(b.sizes, syms);
      h.strides = eval(b.strides, syms);
      h.storage = std::make_shared<Storage>(Device::cpu(), const_cast<std::byte*>(b.data->bytes.data()), b.data->bytes.size(),
                                            nullptr);
      outs[o] = to_device(eval::contiguous(h), dev);
    } else {
      TensorData t;
      t.dtype = b.dtype;
      t.sizes = eval(b.sizes, syms);
      t.strides = contiguous_strides(std::span<const int64_t>(t.sizes));
      t.storage = out_mem[static_cast<size_t>(id)];
      KILN_CHECK(t.storage != nullptr, "cuda runtime: output ", o, " is buffer b", id, ", which is not an output buffer");
      outs[o] = std::move(t);
    }
  }
  // Host inputs' device copies must outlive the kernels reading them: wait when there are any
  // (their blocks return to the cache, and a later allocation on another thread's call could
  // be written by a host copy before the queued kernels read them).
  if (!bound.held.empty()) ctx.synchronize();
  // The checks' counts: reading them waits for the kernels (only plans with checks do).
  plan::finish_outputs(pl, outs, [](const TensorData& t) { return to_host(t); }, "cuda runtime");
  return outs;
}

std::string PlanExecutable::tuning_report() const {
  std::lock_guard<std::mutex> lock(impl_->tune_mu);
  return impl_->tuning_report;
}

PlanExecutable::GraphStats PlanExecutable::graph_stats() const {
  const Impl& im = *impl_;
  return GraphStats{im.graphs_recorded.load(), im.replays.load(), im.node_updates.load(), im.direct_runs.load()};
}

}  // namespace kiln::cuda
