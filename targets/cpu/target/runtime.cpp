// The CPU target's native half: targets/cpu/runtime (LLVM's JIT, the thread pool) behind
// target::Runtime. Cache entries keep the plan's object code and the identity of the host that
// made it (blobs module<i>.o and host.identity); a hit on another host with the same fingerprint
// is refused, so the driver compiles its own code.
#include <exception>
#include <mutex>

#include <nlohmann/json.hpp>

#include "kiln/cache/cache.h"
#include "kiln/config/config.h"
#include "kiln/config/log.h"
#include "kiln/cpu/executable.h"
#include "kiln/cpu/jit.h"
#include "kiln/cpu/thread_pool.h"
#include "kiln/graph/error.h"
#include "kiln/target/target.h"

void kiln_register_cpu_codegen();

namespace kiln::cpu {
namespace {

constexpr const char* kIdentityBlob = "host.identity";
const std::string& host_identity_text() {
  static const std::string text = identity_text(host_identity());
  return text;
}

class CpuLoaded final : public target::LoadedPlan {
 public:
  explicit CpuLoaded(std::shared_ptr<PlanExecutable> exe) : exe_(std::move(exe)) {}
  std::vector<TensorData> run(std::span<const TensorData* const> inputs) const override { return exe_->run(inputs); }
  const plan::KernelPlan& plan() const override { return exe_->plan(); }
  target::Artifacts artifacts() const override {
    target::Artifacts a;
    const std::vector<std::string> objects = exe_->objects();
    for (size_t i = 0; i < objects.size(); ++i) a.emplace_back("module" + std::to_string(i) + ".o", objects[i]);
    a.emplace_back(kIdentityBlob, host_identity_text());
    return a;
  }
  std::string compile_report() const override {
    return "JIT " + std::to_string(exe_->compile_seconds() * 1e3) + " ms";
  }
  std::string compile_details() const override { return exe_->compile_report(); }
  double compile_seconds() const override { return exe_->compile_seconds(); }
  void set_profiling(bool on) override { exe_->set_profiling(on); }
  std::optional<plan::KernelProfile> profile() const override { return exe_->profile(); }
  std::string tuning_report() const override { return exe_->tuning_report(); }
  const PlanExecutable& executable() const { return *exe_; }

 private:
  std::shared_ptr<PlanExecutable> exe_;
};

class CpuRuntime final : public target::Runtime {
 public:
  std::string name() const override { return "cpu"; }
  DeviceType device_type() const override { return DeviceType::cpu; }
  bool available(std::string*) const override { return true; }
  std::vector<std::string> device_lines() const override {
    return {"cpu: " + host_identity().cpu_name + ", " + std::to_string(ThreadPool::of_size(static_cast<int>(config::get<int64_t>("cpu.threads"))).size()) +
            " threads; matmuls through " + matmul_library()};
  }
  // What a cache hit checks (the host's identity, libmvec), before the first trace, on this
  // thread: about 5 ms, most of it opening LLVM's module. It ran on a thread of its own until
  // the module linked LLVM statically: a process that exited while that thread was inside the
  // module (an error right after the first trace) ran the module's destructors under it and
  // crashed (cli_kiln under load, 4 of 25 runs); joining it at exit came too late, since the
  // module's statics, made after, are destroyed first.
  void prepare() override {
    static std::once_flag once;
    std::call_once(once, [] {
      try {
        prepare_for_cache_hits();
      } catch (const std::exception&) {
        // The compile that needs the target reports the same failure itself.
      }
    });
  }
  target::CodegenRequest codegen_request(Device) const override { return {}; }
  // What a cpu binary depends on beyond the graph and the codegen options (docs/cache.md), as a
  // key holds it: the host's fingerprint (five cpuid leaves), so that a hit's key waits for
  // neither LLVM's identity of the host (~30 cpuid) nor a target machine. Entries carry that
  // identity (host.identity), which load() checks before their code runs.
  std::string device_identity(Device) const override {
    static const std::string d = "cpu " + cache::hash_hex(host_fingerprint());
    return d;
  }
  std::string toolchain(Device) const override {
    static const std::string llvm = "llvm " + llvm_version() + " " + target_triple() + " O3";
    return llvm;
  }
  std::shared_ptr<target::LoadedPlan> load(target::Generated plans, const target::Artifacts* cached,
                                           const target::LoadOptions& lo, std::string* refused) override {
    const ExecutableOptions o = options(lo);
    if (!cached) {
      return std::make_shared<CpuLoaded>(PlanExecutable::load(std::move(plans.plan), o));
    }
    std::vector<std::string> objects;
    std::string made_for;
    for (const auto& [name, bytes] : *cached) {
      if (name == kIdentityBlob) made_for = bytes;
      else objects.push_back(bytes);
    }
    // Every entry this runtime writes records its host; one without is damaged (stripped of its
    // artifacts), not another host's: an error, so that the caller replaces it.
    KILN_CHECK(!made_for.empty(), "cpu runtime: the cache entry has no '", kIdentityBlob, "' artifact (", objects.size(),
               " objects): its artifacts were stripped or damaged");
    // Linked before the identity is checked (linking runs none of the code), so that the set-up
    // thread has time to finish that.
    std::shared_ptr<PlanExecutable> exe;
    std::exception_ptr link_error;
    try {
      exe = PlanExecutable::load_compiled(std::move(plans.plan), objects, o);
    } catch (const Error&) {
      link_error = std::current_exception();
    }
    const std::string& here = host_identity_text();
    if (made_for != here) {
      // Another host with the same fingerprint: its code may use instructions this one lacks.
      if (refused)
        *refused = "made for another CPU (" + (made_for.empty() ? std::string("not recorded") : made_for) +
                   ") than this one (" + here + ")";
      return nullptr;
    }
    if (link_error) std::rethrow_exception(link_error);
    return std::make_shared<CpuLoaded>(std::move(exe));
  }
  TensorData move(const TensorData& t, Device to) override {
    KILN_CHECK(to.type == DeviceType::cpu && t.device().type == DeviceType::cpu, "to(", to.str(),
               "): the CPU target cannot move a tensor from ", t.device().str());
    return t;
  }
  target::EagerPolicy eager_policy() const override {
    target::EagerPolicy p;
    p.min_elements = config::get<int64_t>("cpu.eager_compile_threshold");
    p.symbolic_sizes = true;
    return p;
  }

 private:
  // Compiled graphs: keep_buffers (mode reduce-overhead) or cpu.keep_buffers, cpu.threads and
  // max-autotune with its choices kept in `lo.autotune`. Eager kernels: the defaults; every
  // kernel: cpu.opt_level.
  static ExecutableOptions options(const target::LoadOptions& lo) {
    ExecutableOptions o;
    o.opt_level = static_cast<int>(config::get<int64_t>("cpu.opt_level"));
    if (lo.eager) return o;
    o.keep_buffers = config::get<bool>("keep_buffers") || config::get<bool>("cpu.keep_buffers");
    o.threads = static_cast<int>(config::get<int64_t>("cpu.threads"));
    o.autotune = config::get<bool>("max_autotune");
    if (!o.autotune || !lo.autotune) return o;
    o.recall = [store = lo.autotune](const std::string& signature) -> std::optional<ExecutableOptions::TuneChoice> {
      const std::optional<std::string> v = store.recall(signature, "");
      if (!v) return std::nullopt;
      const nlohmann::json j = nlohmann::json::parse(*v, nullptr, false);
      if (j.is_discarded() || !j.is_object() || !j.contains("function") || !j["function"].is_string() ||
          !j.contains("chunk") || !j["chunk"].is_number_integer()) {
        KILN_LOG(cache, "autotune cache: ignoring a choice that is not {\"function\": string, \"chunk\": integer}: ", *v);
        return std::nullopt;
      }
      return ExecutableOptions::TuneChoice{j["function"].get<std::string>(), j["chunk"].get<int64_t>()};
    };
    o.remember = [store = lo.autotune](const std::string& signature, const std::string& kernel,
                                       const ExecutableOptions::TuneChoice& c) {
      const nlohmann::json j = {{"function", c.function}, {"chunk", c.chunk}};
      store.remember(signature, "", j.dump(), kernel + ": " + c.function + ", chunks of " + std::to_string(c.chunk));
    };
    return o;
  }
};

}  // namespace
}  // namespace kiln::cpu

void kiln_register_cpu_target() {
  kiln_register_cpu_codegen();
  kiln::target::register_runtime(std::make_shared<kiln::cpu::CpuRuntime>());
}
