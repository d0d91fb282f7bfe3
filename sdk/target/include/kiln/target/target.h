// sdk/target: the one interface every target implements, and the registry that finds them.
//
// A target is one folder (targets/<t>/target) and one registration function. It has two halves:
// - Codegen (portable, also in the browser): its name, what the scheduler may assume about it
//   (capabilities), and a Schedule -> KernelPlan (plus, for max-autotune, alternative plans).
// - Runtime (native): its devices, what a device asks of the codegen (a CodegenRequest), the
//   strings that key cached binaries (device identity, toolchain), loading plans (with the
//   artifacts of a cache entry, or compiling them) into a LoadedPlan that runs them, device
//   moves, synchronisation, eager-mode policy and what benchmarks need.
// Takes: schedules and plans (sdk/schedule, sdk/plan). Gives: plans, and running them. The
// frontends, the CLI and the web ask the registry and hold no per-target code; the build lists
// its targets once (kiln_add_target in each target folder) and a generated translation unit
// defines register_builtin_targets() from that list (sdk/target/CMakeLists.txt).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "kiln/graph/device.h"
#include "kiln/graph/tensor_data.h"
#include "kiln/plan/plan.h"
#include "kiln/plan/profile.h"
#include "kiln/schedule/schedule.h"

namespace kiln::target {

// What a device decides about the code generated for it, in a target-neutral form: keys and
// values as text (cuda: "arch" = "90"; vulkan: the device's caps, one key each). The runtime
// fills it (Runtime::codegen_request), the codegen reads it; an empty request is "any device"
// (what the browser and `kiln show` generate for).
struct CodegenRequest {
  std::map<std::string, std::string> values;
  void set(const std::string& key, std::string value) { values[key] = std::move(value); }
  void set(const std::string& key, int64_t value) { values[key] = std::to_string(value); }
  void set(const std::string& key, bool value) { values[key] = value ? "1" : "0"; }
  bool has(const std::string& key) const { return values.count(key) != 0; }
  std::string text(const std::string& key, const std::string& otherwise = "") const;
  // A kiln::Error naming the key when its value is not an integer (or 0/1).
  int64_t integer(const std::string& key, int64_t otherwise) const;
  bool flag(const std::string& key, bool otherwise) const { return integer(key, otherwise ? 1 : 0) != 0; }
  std::string str() const;  // "arch=90 gpu=1", keys in order
};

// What a codegen gives for a schedule: the plan, and for max-autotune other plans of the same
// schedule with other launch configurations, which the runtime times (targets whose variants
// live inside the plan's kernels, like the CPU's, give none).
struct Generated {
  plan::KernelPlan plan;
  std::vector<plan::KernelPlan> alternatives;
};

class Codegen {
 public:
  virtual ~Codegen() = default;
  virtual std::string name() const = 0;  // "cpu", "cuda", "vulkan": KernelPlan::target
  // The file extension of the plan's module source (debug_dir dumps kernels.<ext>).
  virtual std::string source_extension() const { return "txt"; }
  // What the scheduler is told about the target for this request.
  virtual schedule::Target capabilities(const CodegenRequest& request) const = 0;
  // The plan of a schedule made with capabilities(request); options not in the request come
  // from sdk/config (max_autotune asks for alternatives or variants).
  virtual Generated generate(const schedule::Schedule& s, const CodegenRequest& request) const = 0;
};

// Named blobs of a cache entry beside its plan (cpu objects and the host identity, cuda program
// images, vulkan SPIR-V and pipeline cache). Their names are the target's.
using Artifacts = std::vector<std::pair<std::string, std::string>>;

// A plan loaded on a device, ready to run. run() may be called from several threads.
class LoadedPlan {
 public:
  virtual ~LoadedPlan() = default;
  // Inputs on the host or on the plan's device; outputs where the target keeps them (the device).
  virtual std::vector<TensorData> run(std::span<const TensorData* const> inputs) const = 0;
  virtual const plan::KernelPlan& plan() const = 0;
  // What a cache entry keeps so that another process loads this plan without compiling.
  virtual Artifacts artifacts() const = 0;
  // One line for KILN_LOGS=cache: what loading compiled and how long it took.
  virtual std::string compile_report() const = 0;
  // A longer account of the compile, lines ending in newlines (the CPU: each module's share).
  virtual std::string compile_details() const { return ""; }
  // Seconds the native compile took (0 when nothing was compiled).
  virtual double compile_seconds() const { return 0; }
  // What max-autotune chose, one line per kernel ("" before the first run or without it).
  virtual std::string tuning_report() const { return ""; }
  // GPU time of each kernel in the last run, ms (empty where the device has no timers).
  virtual std::vector<double> last_kernel_ms() const { return {}; }
  // Per-kernel times over calls, without the log: while profiling is on (set_profiling(true), or
  // KILN_LOGS=profile, which also prints the report), each call runs its kernels one after
  // another and times each (cuda: launches between timeline marks, no CUDA graph replay).
  // profile(): a copy of the times so far; nullopt before the first timed call, or where the
  // target times no kernels (the base: a target without timers).
  virtual void set_profiling(bool on) { (void)on; }
  virtual std::optional<plan::KernelProfile> profile() const { return std::nullopt; }
};

// Where max-autotune's choices outlive the process (the frontend plugs in sdk/cache's autotune
// cache): values are the target's own text (JSON); `signature` names a kernel's candidates,
// `problem` the sizes they were timed at.
struct AutotuneStore {
  std::function<std::optional<std::string>(const std::string& signature, const std::string& problem)> recall;
  std::function<void(const std::string& signature, const std::string& problem, const std::string& value,
                     const std::string& description)>
      remember;
  explicit operator bool() const { return recall && remember; }
};

struct LoadOptions {
  Device device;
  // A single-op kernel of eager mode: the runtime's default options (no keep_buffers, no
  // autotune, no CUDA graphs' warm-up).
  bool eager = false;
  AutotuneStore autotune;  // empty: choices are not kept
};

// How eager mode uses the target for ops on its tensors (the frontend's driver does the work).
struct EagerPolicy {
  bool enabled = true;  // false: eager ops on this device are a kiln::Error
  // Ops with fewer elements (output and every input) run on the reference interpreter; -1: never
  // compile (every op on the reference).
  int64_t min_elements = 0;
  // Single-op kernels made for a shape pattern (sizes other than 1 become symbols, so a new batch
  // size reuses the kernel) from contiguous copies of the inputs; false: for the inputs' exact
  // sizes and strides.
  bool symbolic_sizes = false;
};

struct Bandwidth {
  double gbps = 0;
  std::string how;
};

// The token a Runtime::start_device_setup returns for work on `threads`: the last copy's
// release joins them (an empty vector gives nullptr).
std::shared_ptr<void> join_when_released(std::vector<std::thread> threads);

class Runtime {
 public:
  virtual ~Runtime() = default;
  virtual std::string name() const = 0;  // the codegen's name
  virtual DeviceType device_type() const = 0;
  // Whether a device can be used here; `why` gets the reason when not.
  virtual bool available(std::string* why) const = 0;
  // One line per device (`kiln list-devices`), or one saying why there is none.
  virtual std::vector<std::string> device_lines() const = 0;
  // Called once before the first trace of a process: one-time set-up started in the background.
  virtual void prepare() {}
  // A compile of `g` (as imported or traced, before the passes) for `d` is about to begin: the
  // set-up that loading its plan would start may start now, in the background, beside what the
  // caller does first (an ONNX import reading its weights). The CUDA target loads cuBLASLt and,
  // for a graph with convolutions, cuDNN. The work belongs to the returned token, whose
  // destruction waits for it: a caller that fails and exits never leaves a thread inside a
  // library that the exit tears down. nullptr when there is nothing to start.
  virtual std::shared_ptr<void> start_device_setup(Device d, const Graph& g) {
    (void)d;
    (void)g;
    return nullptr;
  }
  // A cache lookup missed: the plan is about to be generated and compiled (the CPU starts its
  // compile set-up, which overlaps the codegen).
  virtual void before_compile() {}
  virtual CodegenRequest codegen_request(Device d) const = 0;
  // What a cache key says about the device and the tools that make its binaries.
  virtual std::string device_identity(Device d) const = 0;
  virtual std::string toolchain(Device d) const = 0;
  // The plan (and its alternatives) loaded on options.device. `cached`: a cache entry's
  // artifacts for the same plan, so nothing is compiled; artifacts made for another device are
  // refused: then load returns nullptr with `*refused` saying why, and the caller compiles
  // (load without artifacts) and keeps that entry. Corrupt artifacts are a kiln::Error.
  virtual std::shared_ptr<LoadedPlan> load(Generated plans, const Artifacts* cached, const LoadOptions& options,
                                           std::string* refused) = 0;
  // `t` on `to` (a device of this target or the host; t itself when it is there already).
  virtual TensorData move(const TensorData& t, Device to) = 0;
  // A move() made of a device target's two copies: `to_host` and `to_device(host, index)` (from
  // one of its devices to another through the host), after available() (its reason on failure).
  TensorData move_through(const TensorData& t, Device to, const std::function<TensorData(const TensorData&)>& to_host,
                          const std::function<TensorData(const TensorData&, int)>& to_device) const;
  virtual void synchronize(Device) {}
  virtual EagerPolicy eager_policy() const { return {}; }
  // Benchmarks: the device time of `call` (which runs plans on d), ms: the median of at least
  // `reps` calls after a warm-up; nullopt where the target has no device timers (time on the host).
  virtual std::optional<double> median_device_ms(Device, const std::function<void()>& call, int reps) {
    (void)call, (void)reps;
    return std::nullopt;
  }
  // Device-to-device copy bandwidth (bytes read plus written per second, and how it was
  // copied: "cuMemcpyDtoD"); nullopt: not measured.
  virtual std::optional<Bandwidth> copy_gbps(Device) { return std::nullopt; }
  // Forget compiled programs kept per process, so that the next load compiles (cold compiles).
  virtual void forget_compiled() {}
};

// The registry. A second registration of a name replaces the first.
void register_codegen(std::shared_ptr<const Codegen> c);
void register_runtime(std::shared_ptr<Runtime> r);
// nullptr when absent.
const Codegen* find_codegen(std::string_view name);
Runtime* find_runtime(std::string_view name);
Runtime* find_runtime(DeviceType type);
// A kiln::Error naming the known ones when absent.
const Codegen& codegen(std::string_view name);
Runtime& runtime(std::string_view name);
std::vector<std::string> codegen_names();  // sorted
std::vector<std::string> runtime_names();  // sorted

// Defined by the generated builtin_targets.cpp of the library that links the targets
// (kiln_link_builtin_targets): registers each of them. Callers call it before their first
// lookup (ensure_builtin_targets does so once). A later step may load a target missing here
// from libkiln_<name>.so at first use, calling the same kiln_register_<name>_target().
void register_builtin_targets();
inline void ensure_builtin_targets() {
  static const bool done = (register_builtin_targets(), true);
  (void)done;
}

// The schedule and plan of an optimised graph for `codegen` under `request` (KILN_LOGS schedule
// and output_code show them).
struct Compiled {
  schedule::Schedule schedule;
  Generated generated;
};
Compiled compile_graph(const Codegen& codegen, const Graph& g, const CodegenRequest& request);

// ---- plans written to files: what made them (docs/plan-trust.md) ------------------------------
// The origin of a plan that compile_graph made of a graph under `request` on this thread:
// `scheduled_graph_json` is that graph as kiln.graph JSON (the caller serialises it: the graph
// format is a frontend's), with the request, every codegen option's effective value and this
// Kiln's version.
plan::PlanOrigin plan_origin(std::string scheduled_graph_json, const CodegenRequest& request);
// The plan that `codegen` makes of `scheduled` (the origin's graph, parsed) under the origin's
// request and codegen options (set above every other config layer while it compiles), with
// that origin: equal to the plan the origin was taken from when both came from this Kiln. A
// runtime given a plan file runs it only then (plan::plan_difference names what differs).
plan::KernelPlan regenerate(const Codegen& codegen, const Graph& scheduled, const plan::PlanOrigin& origin);

}  // namespace kiln::target
