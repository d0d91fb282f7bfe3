// PlanExecutable: load (JIT the plan's module, resolve entries) and run (bind symbols, check
// inputs, allocate, launch kernels over the thread pool).
#include "kiln/cpu/executable.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string_view>
#include <unordered_set>

#include <sys/mman.h>
#include <unistd.h>

#include "kiln/cpu/jit.h"
#include "kiln/cpu/thread_pool.h"
#include "kiln/graph/error.h"
#include "kiln/config/log.h"
#include "kiln/plan/bind.h"
#include "kiln/plan/profile.h"
#include "kiln/eval/interpreter.h"
#include "sgemm.h"

namespace kiln::cpu {

namespace {

// Freed blocks by rounded size; reused when a request of the same rounded size comes, the most
// recently freed first: it is the one still in cache. (Oldest-first reuse cycled a compiled
// rmsnorm's output through every 32 MiB block that earlier eager ops had freed: 2.6 ms a call
// instead of 1.6.)
class HostPool {
 public:
  static HostPool& get() {
    static HostPool* p = new HostPool;  // never destroyed: storages may outlive statics
    return *p;
  }
  void* take(size_t bytes) {
    {
      std::lock_guard lock(mu_);
      auto it = free_.find(bytes);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_ -= bytes;
        return p;
      }
    }
    void* p = std::aligned_alloc(64, bytes);
    if (!p) fail("cpu runtime: out of host memory: could not allocate ", bytes, " bytes");
    return p;
  }
  void give(void* p, size_t bytes) {
    {
      std::lock_guard lock(mu_);
      if (cached_ + bytes <= kLimit) {
        free_[bytes].push_back(p);
        cached_ += bytes;
        return;
      }
    }
    std::free(p);
  }

 private:
  static constexpr size_t kLimit = size_t{2} << 30;
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // by size, most recently freed last
  size_t cached_ = 0;
};

size_t round_bytes(size_t n) {
  if (n <= 4096) return std::max<size_t>(64, (n + 63) / 64 * 64);
  return (n + 4095) / 4096 * 4096;
}

using KernelFn = void(char**, const int64_t*, int64_t, int64_t);

std::vector<int64_t> eval(const SymShape& s, const std::vector<int64_t>& syms) {
  std::vector<int64_t> v;
  v.reserve(s.size());
  for (const SymInt& x : s) v.push_back(x.evaluate(syms));
  return v;
}

}  // namespace

namespace {

// KILN_CPU_GUARD_PAGES=1: each buffer in a mapping of its own whose last byte is just before an
// inaccessible page, never recycled, so a kernel that reads or writes past its end faults at
// once (generated kernels are not instrumented: a sanitizer does not see what they touch). The
// start is then only as aligned as the size is (a multiple of the element size: what kernels
// assume). A debugging aid; the plan fuzzer (tests/fuzz/fuzz_plan_json) sets it.
bool guard_pages() {
  static const bool on = [] {
    const char* e = std::getenv("KILN_CPU_GUARD_PAGES");
    return e && *e && *e != '0';
  }();
  return on;
}

std::shared_ptr<Storage> allocate_guarded(size_t nbytes) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t body = (nbytes + page - 1) / page * page;
  const size_t total = body + 2 * page;  // a guard page on each side
  void* m = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) fail("cpu runtime: out of host memory: could not map ", total, " bytes");
  char* base = static_cast<char*>(m);
  ::mprotect(base, page, PROT_NONE);
  ::mprotect(base + page + body, page, PROT_NONE);
  char* p = base + page + body - nbytes;
  std::memset(base + page, 0xFF, body);  // NaN bytes, as KILN_CPU_POISON
  return std::make_shared<Storage>(Device::cpu(), p, nbytes, [base, total](void*) { ::munmap(base, total); });
}

}  // namespace

std::shared_ptr<Storage> allocate_host_buffer(size_t nbytes) {
  if (guard_pages()) return allocate_guarded(nbytes);
  const size_t rounded = round_bytes(nbytes);
  void* p = HostPool::get().take(rounded);
  // KILN_CPU_POISON=1 fills new buffers with NaN bytes, so a kernel that reads what nothing
  // wrote shows up as NaN instead of as a stale value (a debugging aid).
  static const bool poison = [] {
    const char* e = std::getenv("KILN_CPU_POISON");
    return e && *e && *e != '0';
  }();
  if (poison) std::memset(p, 0xFF, rounded);
  return std::make_shared<Storage>(Device::cpu(), p, nbytes, [rounded](void* q) { HostPool::get().give(q, rounded); });
}

struct PlanExecutable::Impl {
  plan::KernelPlan plan;
  std::unique_ptr<plan::Binder> binder;  // of `plan`
  ExecutableOptions options;
  std::vector<std::unique_ptr<JitModule>> modules;
  double compile_seconds = 0;
  std::vector<KernelFn*> fns;  // per kernel (null for reference kernels)
  std::vector<int64_t> grains;  // per kernel: the launch chunk (autotune may change it)
  // autotune: per kernel, the candidate functions (entry first, then the variants)
  std::vector<std::vector<std::pair<std::string, KernelFn*>>> candidates;
  std::mutex tune_mu;
  std::atomic<bool> tuned{false};
  std::string report;

  // Times kernel k's candidates x launch chunks (median of 3 after a warm-up) and keeps the
  // fastest. Only kernels that may run twice with the same result: none that reads a buffer it
  // writes (in place), except matmuls, whose gemm rewrites their result first.
  template <class Launch>
  void tune_kernel(size_t k, int64_t extent, std::span<const int64_t> syms, Launch& launch) {
    const plan::PlanKernel& pk = plan.kernels[k];
    // The signature the choice is remembered under: the kernel's code and the sizes it ran on.
    std::string signature;
    if (options.recall || options.remember) {
      signature = pk.source + "\nextent=" + std::to_string(extent) + " grain=" + std::to_string(pk.grain) + " sizes=";
      for (int64_t v : syms) signature += std::to_string(v) + ",";
    }
    if (options.recall)
      if (std::optional<ExecutableOptions::TuneChoice> c = options.recall(signature); c && c->chunk >= 1)
        for (const auto& [name, fn] : candidates[k])
          if (name == c->function) {
            fns[k] = fn;
            grains[k] = c->chunk;
            report += pk.name + ": " + name + ", chunks of " + std::to_string(c->chunk) +
                      (c->chunk >= extent ? " (one thread)" : "") + " (from the autotune cache)\n";
            return;
          }
    auto slot_of = [&](int32_t b) {
      const plan::PlanBuffer& pb = plan.buffers[static_cast<size_t>(b)];
      return pb.kind == "intermediate" ? "s" + std::to_string(pb.slot) : "b" + std::to_string(b);
    };
    if (pk.kind != "matmul")
      for (int32_t r : pk.reads)
        for (int32_t w : pk.writes)
          if (slot_of(r) == slot_of(w)) {
            report += pk.name + ": not tuned (updates a buffer in place)\n";
            return;
          }
    const int64_t g = grains[k];
    std::vector<int64_t> chunks = {g, std::max<int64_t>(1, g / 4), g * 4, extent};
    std::sort(chunks.begin(), chunks.end());
    chunks.erase(std::unique(chunks.begin(), chunks.end()), chunks.end());
    double best = 1e300;
    std::string best_name;
    for (const auto& [name, fn] : candidates[k])
      for (int64_t c : chunks) {
        launch(fn, c);
        double t[3];
        for (double& x : t) {
          const auto t0 = std::chrono::steady_clock::now();
          launch(fn, c);
          x = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
        std::sort(t, t + 3);
        if (t[1] < best) {
          best = t[1];
          best_name = name;
          fns[k] = fn;
          grains[k] = c;
        }
      }
    if (options.remember && !best_name.empty())
      options.remember(signature, pk.name, ExecutableOptions::TuneChoice{best_name, grains[k]});
    report += pk.name + ": " + best_name + ", chunks of " + std::to_string(grains[k]) +
              (grains[k] >= extent ? " (one thread)" : "") + ", " + std::to_string(best * 1e3) + " ms (" +
              std::to_string(candidates[k].size() * chunks.size()) + " candidates)\n";
  }
  std::string compile_report;
  // Each generated kernel's entry and variants, from whichever module defines them.
  KernelFn* function(const std::string& symbol, const plan::PlanKernel& pk) const {
    for (const auto& m : modules)
      if (void* f = m->find(symbol)) return reinterpret_cast<KernelFn*>(f);
    fail("cpu runtime: kernel ", pk.name, ": no module defines '", symbol, "' (", modules.size(), " modules)");
  }
  void resolve_kernels() {
    for (size_t k = 0; k < plan.kernels.size(); ++k) {
      const plan::PlanKernel& pk = plan.kernels[k];
      bindings.push_back(plan::kernel_bindings(pk));
      fns.push_back(pk.kind == "reference" ? nullptr : function(pk.entry, pk));
      grains.push_back(pk.grain);
      std::vector<std::pair<std::string, KernelFn*>> c;
      if (pk.kind != "reference") {
        c.emplace_back(pk.entry, fns.back());
        for (const std::string& v : pk.variants) c.emplace_back(v, function(v, pk));
      }
      candidates.push_back(std::move(c));
    }
  }
  std::vector<int32_t> input_buffer;  // buffer of graph input k
  std::vector<std::vector<int32_t>> bindings;  // per kernel: plan::kernel_bindings, its `buffers` array
  // KILN_LOGS=profile or set_profiling: each kernel's wall time per call (kernels run one after
  // another anyway)
  std::atomic<bool> profiling{false};
  mutable std::mutex profile_mu;
  std::unique_ptr<plan::KernelProfile> profile;
  // reduce-overhead: slots kept from the last call, for the symbol values they were made for
  mutable std::mutex kept_mu;
  mutable std::vector<int64_t> kept_syms;
  mutable std::vector<std::shared_ptr<Storage>> kept_slots;
};

PlanExecutable::~PlanExecutable() = default;

void PlanExecutable::set_profiling(bool on) { impl_->profiling.store(on, std::memory_order_relaxed); }

std::optional<plan::KernelProfile> PlanExecutable::profile() const {
  std::lock_guard<std::mutex> lock(impl_->profile_mu);
  if (!impl_->profile) return std::nullopt;
  return *impl_->profile;
}

std::shared_ptr<PlanExecutable> PlanExecutable::load(plan::KernelPlan p, const ExecutableOptions& options) {
  KILN_CHECK(p.target == "cpu", "cpu runtime: the plan is for target '", p.target, "', not cpu");
  plan::validate(p, "cpu runtime");
  register_sgemm();
  auto exe = std::shared_ptr<PlanExecutable>(new PlanExecutable);
  exe->impl_ = std::make_unique<Impl>();
  Impl& im = *exe->impl_;
  im.plan = std::move(p);
  im.options = options;
  im.binder = std::make_unique<plan::Binder>(im.plan, "cpu runtime", plan::host_memory_limit);
  im.input_buffer = im.binder->input_buffers();
  // Kernels are split into one module per thread, balanced by source size, and the modules
  // compiled at once (JitModule::compile may run on several threads): a plan of many kernels
  // compiles in about the time of its largest share.
  // Each distinct source once: kernels alike (a model's repeated layers) share one.
  std::vector<size_t> generated;
  std::unordered_set<std::string_view> sources;
  for (size_t k = 0; k < im.plan.kernels.size(); ++k)
    if (!im.plan.kernels[k].source.empty() && sources.insert(im.plan.kernels[k].source).second) generated.push_back(k);
  ThreadPool& pool = ThreadPool::global();
  const size_t parts = std::max<size_t>(1, std::min<size_t>(generated.size(), static_cast<size_t>(pool.size())));
  std::sort(generated.begin(), generated.end(), [&](size_t a, size_t b) {
    return im.plan.kernels[a].source.size() > im.plan.kernels[b].source.size();
  });
  std::vector<std::string> text(parts, im.plan.prelude);
  std::vector<size_t> load(parts, 0), kernels_in(parts, 0);
  std::vector<CompileOptions> compile_options(parts);
  for (size_t k : generated) {
    const size_t p = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    const plan::PlanKernel& pk = im.plan.kernels[k];
    compile_options[p].kernel_entries.push_back(pk.entry);
    compile_options[p].kernel_entries.insert(compile_options[p].kernel_entries.end(), pk.variants.begin(), pk.variants.end());
    text[p] += "\n" + im.plan.kernels[k].source;
    load[p] += im.plan.kernels[k].source.size();
    kernels_in[p] += 1;
  }
  im.modules.resize(generated.empty() ? 0 : parts);
  const auto t0 = std::chrono::steady_clock::now();
  pool.parallel_for(static_cast<int64_t>(im.modules.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p)
      im.modules[static_cast<size_t>(p)] =
          JitModule::compile(text[static_cast<size_t>(p)], "kiln_plan_" + std::to_string(p), options.opt_level,
                             compile_options[static_cast<size_t>(p)]);
  });
  im.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t p = 0; p < im.modules.size(); ++p) {
    const CompileTimings& t = im.modules[p]->timings();
    char line[200];
    std::snprintf(line, sizeof line, "module %zu: %zu kernels, %zu bytes: parse %.1f, optimise %.1f, codegen %.1f, link %.1f ms\n", p,
                  kernels_in[p], text[p].size(), t.parse * 1e3, t.optimise * 1e3, t.codegen * 1e3, t.link * 1e3);
    im.compile_report += line;
  }
  im.resolve_kernels();
  return exe;
}

std::shared_ptr<PlanExecutable> PlanExecutable::load_compiled(plan::KernelPlan p, std::span<const std::string> objects,
                                                              const ExecutableOptions& options) {
  KILN_CHECK(p.target == "cpu", "cpu runtime: the plan is for target '", p.target, "', not cpu");
  plan::validate(p, "cpu runtime");
  register_sgemm();
  auto exe = std::shared_ptr<PlanExecutable>(new PlanExecutable);
  exe->impl_ = std::make_unique<Impl>();
  Impl& im = *exe->impl_;
  im.plan = std::move(p);
  im.options = options;
  im.binder = std::make_unique<plan::Binder>(im.plan, "cpu runtime", plan::host_memory_limit);
  im.input_buffer = im.binder->input_buffers();
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < objects.size(); ++i)
    im.modules.push_back(JitModule::load_object(objects[i], "kiln_plan_" + std::to_string(i)));
  im.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t i = 0; i < im.modules.size(); ++i) {
    char line[160];
    std::snprintf(line, sizeof line, "module %zu: %zu object bytes: linked from the cache in %.2f ms\n", i, objects[i].size(),
                  im.modules[i]->timings().link * 1e3);
    im.compile_report += line;
  }
  im.resolve_kernels();
  return exe;
}

std::vector<std::string> PlanExecutable::objects() const {
  std::vector<std::string> out;
  for (const auto& m : impl_->modules) out.push_back(m->object());
  return out;
}

const plan::KernelPlan& PlanExecutable::plan() const { return impl_->plan; }
double PlanExecutable::compile_seconds() const { return impl_->compile_seconds; }
std::string PlanExecutable::tuning_report() const { return impl_->report; }
std::string PlanExecutable::compile_report() const { return impl_->compile_report; }

std::vector<TensorData> PlanExecutable::run(std::span<const TensorData> inputs) const {
  std::vector<const TensorData*> p;
  for (const TensorData& t : inputs) p.push_back(&t);
  return run(std::span<const TensorData* const>(p));
}

std::vector<TensorData> PlanExecutable::run(std::span<const TensorData* const> inputs) const {
  Impl& im = *impl_;
  const plan::KernelPlan& pl = im.plan;
  // Sizes, checked inputs, slots and extents (bind.h); what is left is memory and launches.
  const plan::Binding bound = im.binder->bind(inputs);
  const std::vector<int64_t>& syms = bound.symbols();
  std::vector<TensorData> owned;  // contiguous copies of inputs the plan wants contiguous
  owned.reserve(inputs.size());
  constexpr size_t kSmall = 32;
  char* small_ptrs[kSmall];
  std::vector<char*> many;
  char** ptrs = small_ptrs;
  if (pl.buffers.size() > kSmall) {
    many.resize(pl.buffers.size());
    ptrs = many.data();
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    const TensorData* t = inputs[k];
    KILN_CHECK(t->device().type == DeviceType::cpu, "cpu runtime: input ", k, " is not on the cpu");
    if (bound.copy_input[k]) {  // the plan wants it contiguous
      owned.push_back(eval::contiguous(*t));
      t = &owned.back();
    }
    ptrs[im.input_buffer[k]] = static_cast<char*>(t->data());
  }
  // Outputs, constants and slots.
  std::vector<TensorData> outs(pl.outputs.size());
  std::vector<std::shared_ptr<Storage>> slot_mem;
  std::unique_lock<std::mutex> kept_lock(im.kept_mu, std::defer_lock);
  const bool keep = im.options.keep_buffers && kept_lock.try_lock();
  if (keep && im.kept_syms == syms && im.kept_slots.size() == pl.slots.size()) {
    slot_mem = im.kept_slots;
  } else {
    for (int64_t bytes : bound.slot_bytes()) slot_mem.push_back(allocate_host_buffer(static_cast<size_t>(bytes)));
    if (keep) {
      im.kept_syms = syms;
      im.kept_slots = slot_mem;
    }
  }
  std::vector<std::shared_ptr<Storage>> out_mem(pl.buffers.size());
  for (const plan::PlanBuffer& b : pl.buffers) {
    if (b.kind == "constant") {
      ptrs[b.id] = const_cast<char*>(reinterpret_cast<const char*>(b.data->bytes.data()));
    } else if (b.kind == "output") {
      out_mem[static_cast<size_t>(b.id)] = allocate_host_buffer(static_cast<size_t>(bound.buffer_bytes()[static_cast<size_t>(b.id)]));
      ptrs[b.id] = static_cast<char*>(out_mem[static_cast<size_t>(b.id)]->data());
    } else if (b.kind == "intermediate") {
      ptrs[b.id] = static_cast<char*>(slot_mem[static_cast<size_t>(b.slot)]->data());
    }
  }
  auto view = [&](int32_t id) {
    const plan::PlanBuffer& b = pl.buffers[static_cast<size_t>(id)];
    TensorData t;
    t.dtype = b.dtype;
    t.sizes = eval(b.sizes, syms);
    t.strides = eval(b.strides, syms);
    int64_t span = 1;  // elements from the first to one past the last one
    for (size_t d = 0; d < t.sizes.size(); ++d) span += (t.sizes[d] - 1) * t.strides[d];
    t.storage = std::make_shared<Storage>(Device::cpu(), ptrs[id], static_cast<size_t>(span * dtype_size(b.dtype)),
                                          nullptr);
    return t;
  };
  // Kernels.
  ThreadPool& pool = ThreadPool::of_size(im.options.threads);
  // The first call tunes (others wait for it); later calls just read the choices.
  std::unique_lock<std::mutex> tune_lock(im.tune_mu, std::defer_lock);
  bool tune = false;
  if (im.options.autotune && !im.tuned.load(std::memory_order_acquire)) {
    tune_lock.lock();
    tune = !im.tuned.load(std::memory_order_relaxed);
  }
  // Profiling: a steady clock around each kernel (a parallel_for returns when its chunks are done).
  std::unique_lock<std::mutex> profile_lock(im.profile_mu, std::defer_lock);
  std::vector<double> kernel_ms;
  if (im.profiling.load(std::memory_order_relaxed) || logs::enabled(logs::Category::profile)) {
    profile_lock.lock();
    kernel_ms.assign(pl.kernels.size(), 0.0);
  }
  for (size_t ki = 0; ki < pl.kernels.size(); ++ki) {
    const plan::PlanKernel& k = pl.kernels[ki];
    // Records kernel ki's time however the iteration ends; reads the clock only when profiling.
    struct Timed {
      std::vector<double>& ms;
      size_t k;
      std::chrono::steady_clock::time_point start =
          ms.empty() ? std::chrono::steady_clock::time_point{} : std::chrono::steady_clock::now();
      ~Timed() {
        if (!ms.empty()) ms[k] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      }
    } timed{kernel_ms, ki};
    if (im.fns[ki]) {
      const int64_t extent = bound.extents()[ki];
      if (extent == 0) continue;
      const int64_t* sp = syms.data();
      // The kernel's own buffers array: its bindings' addresses, in binding order.
      const std::vector<int32_t>& bind = im.bindings[ki];
      char* small_args[kSmall];
      std::vector<char*> many_args;
      char** args = small_args;
      if (bind.size() > kSmall) {
        many_args.resize(bind.size());
        args = many_args.data();
      }
      for (size_t i = 0; i < bind.size(); ++i) args[i] = ptrs[bind[i]];
      auto launch = [&](KernelFn* f, int64_t grain) {
        pool.parallel_for(extent, grain, [f, args, sp](int64_t b, int64_t e) { f(args, sp, b, e); });
      };
      if (tune) im.tune_kernel(ki, extent, std::span<const int64_t>(syms), launch);
      launch(im.fns[ki], im.grains[ki]);
    } else {
      std::vector<TensorData> args;
      for (int32_t b : k.inputs) args.push_back(view(b));
      const plan::PlanBuffer& ob = pl.buffers[static_cast<size_t>(k.output)];
      const std::vector<int64_t> osizes = eval(ob.sizes, syms);
      TensorData r = eval::run_op(k.op, args, k.attrs, ob.dtype, osizes);
      std::memcpy(ptrs[k.output], r.data(), static_cast<size_t>(r.numel() * dtype_size(r.dtype)));
    }
  }
  if (tune) im.tuned.store(true, std::memory_order_release);
  if (!kernel_ms.empty()) {
    if (!im.profile)
      im.profile = std::make_unique<plan::KernelProfile>(pl.kernels.size(), "cpu (" + std::to_string(pool.size()) + " threads)");
    im.profile->add_call(kernel_ms);
    if (im.profile->report_due()) KILN_LOG(profile, im.profile->report(pl));
  }
  for (size_t o = 0; o < pl.outputs.size(); ++o) {
    const int32_t id = pl.outputs[o];
    const plan::PlanBuffer& b = pl.buffers[static_cast<size_t>(id)];
    if (b.kind == "input") {
      outs[o] = *inputs[static_cast<size_t>(b.index)];
    } else if (b.kind == "constant") {
      outs[o] = eval::contiguous(view(id));
    } else {
      TensorData t;
      t.dtype = b.dtype;
      t.sizes = eval(b.sizes, syms);
      t.strides = contiguous_strides(std::span<const int64_t>(t.sizes));
      t.storage = out_mem[static_cast<size_t>(id)];
      KILN_CHECK(t.storage != nullptr, "cpu runtime: output ", o, " is buffer b", id, ", which is not an output buffer");
      outs[o] = std::move(t);
    }
  }
  plan::finish_outputs(pl, outs, [](const TensorData& t) { return t; }, "cpu runtime");
  return outs;
}

}  // namespace kiln::cpu
