// PlanExecutable for CUDA: load (NVRTC, module, entries, constants) and run (bind, check inputs,
// copy host inputs over, allocate, launch, gemm, reference kernels). See executable.h.
#include "kiln/cuda/executable.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>

#include "kiln/cuda/device.h"
#include "kiln/cuda/gemm.h"
#include "kiln/cuda/nvrtc.h"
#include "kiln/graph/error.h"
#include "kiln/reference/reference.h"

namespace kiln::cuda {

namespace {

std::vector<int64_t> eval(const SymShape& s, const std::vector<int64_t>& syms) {
  std::vector<int64_t> v;
  for (const SymInt& x : s) v.push_back(x.evaluate(syms));
  return v;
}

std::string sizes_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

CompiledModule compile_module(const std::string& source, int arch, const std::string& name) {
  static std::mutex mu;
  static std::map<std::pair<int, std::string>, CompiledModule> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find({arch, source});
    if (it != cache.end()) {
      CompiledModule c = it->second;
      c.seconds = 0;
      return c;
    }
  }
  static const std::vector<int> supported = nvrtc_supported_archs();
  CompiledModule c;
  if (std::find(supported.begin(), supported.end(), arch) != supported.end()) {
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
  const NvrtcOutput out = nvrtc_compile(source, name, c.arch, c.cubin);
  c.image = out.image;
  c.seconds = out.seconds;
  std::lock_guard<std::mutex> lock(mu);
  cache.emplace(std::make_pair(arch, source), c);
  return c;
}

struct PlanExecutable::Impl {
  plan::KernelPlan plan;
  ExecutableOptions options;
  Context* ctx = nullptr;
  std::shared_ptr<Context::Module> module;
  std::vector<void*> fns;  // per kernel: CUfunction or null
  std::vector<std::vector<int32_t>> params;  // per kernel: the buffers it takes, in id order
  std::vector<std::shared_ptr<Storage>> constants;  // by buffer id
  size_t num_inputs = 0;
  std::vector<int32_t> input_buffer;
  double compile_seconds = 0;
  int arch = 0;
  mutable std::mutex kept_mu;
  mutable std::vector<int64_t> kept_syms;
  mutable std::vector<std::shared_ptr<Storage>> kept_slots;
};

PlanExecutable::PlanExecutable() = default;
PlanExecutable::~PlanExecutable() = default;

std::shared_ptr<PlanExecutable> PlanExecutable::load(plan::KernelPlan p, const ExecutableOptions& options) {
  KILN_CHECK(p.target == "cuda", "cuda runtime: the plan is for target '", p.target, "', not cuda");
  auto exe = std::shared_ptr<PlanExecutable>(new PlanExecutable);
  exe->impl_ = std::make_unique<Impl>();
  Impl& im = *exe->impl_;
  im.plan = std::move(p);
  im.options = options;
  im.ctx = &Context::get(options.device);
  for (const plan::PlanBuffer& b : im.plan.buffers)
    if (b.kind == "input") im.num_inputs = std::max(im.num_inputs, static_cast<size_t>(b.index + 1));
  im.input_buffer.assign(im.num_inputs, -1);
  for (const plan::PlanBuffer& b : im.plan.buffers)
    if (b.kind == "input") im.input_buffer[static_cast<size_t>(b.index)] = b.id;
  bool any = false;
  for (const plan::PlanKernel& k : im.plan.kernels) any = any || !k.source.empty();
  const auto t0 = std::chrono::steady_clock::now();
  im.arch = im.ctx->info().arch();
  if (any) {
    const CompiledModule cm = compile_module(im.plan.module_source(), im.arch, "kiln_plan");
    im.module = im.ctx->load_module(cm.image, "kiln_plan");
    im.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (cm.seconds == 0) im.compile_seconds = 0;
    im.arch = cm.arch;
  }
  for (const plan::PlanKernel& k : im.plan.kernels) {
    im.fns.push_back(k.entry.empty() ? nullptr : im.ctx->function(*im.module, k.entry));
    std::vector<int32_t> bufs = k.reads;
    bufs.insert(bufs.end(), k.writes.begin(), k.writes.end());
    std::sort(bufs.begin(), bufs.end());
    bufs.erase(std::unique(bufs.begin(), bufs.end()), bufs.end());
    im.params.push_back(std::move(bufs));
  }
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

std::vector<TensorData> PlanExecutable::run_host(std::span<const TensorData> inputs) const {
  std::vector<TensorData> outs = run(inputs);
  for (TensorData& t : outs)
    if (t.device().type == DeviceType::cuda) t = to_host(t);
  return outs;
}

std::vector<TensorData> PlanExecutable::run(std::span<const TensorData* const> inputs) const {
  std::vector<TensorData> v;
  v.reserve(inputs.size());
  for (const TensorData* t : inputs) v.push_back(*t);
  return run(std::span<const TensorData>(v));
}

std::vector<TensorData> PlanExecutable::run(std::span<const TensorData> inputs) const {
  Impl& im = *impl_;
  Context& ctx = *im.ctx;
  ctx.make_current();
  const plan::KernelPlan& pl = im.plan;
  KILN_CHECK(inputs.size() == im.num_inputs, "cuda runtime: the plan takes ", im.num_inputs, " inputs, got ", inputs.size());
  std::vector<int64_t> syms(pl.symbols.size(), 0);
  for (const plan::SymbolBinding& b : pl.bindings) {
    const TensorData& t = inputs[static_cast<size_t>(b.input)];
    KILN_CHECK(b.dim < t.rank(), "cuda runtime: input ", b.input, " has rank ", t.rank(), ", but the plan reads dim ", b.dim,
               " of it");
    syms[b.symbol] = t.sizes[static_cast<size_t>(b.dim)];
  }
  for (const SymbolInfo& s : pl.symbols)
    KILN_CHECK(syms[s.id] >= s.min && syms[s.id] <= s.max, "cuda runtime: size s", s.id, " = ", syms[s.id], " (", s.source,
               ") is outside the plan's range [", s.min, ", ", s.max, "]");
  std::vector<DevicePtr> ptrs(pl.buffers.size(), 0);
  std::vector<TensorData> held;  // device copies of host inputs, alive until the run is queued
  held.reserve(inputs.size());
  const int dev = ctx.info().ordinal;
  for (size_t k = 0; k < im.num_inputs; ++k) {
    const plan::PlanBuffer& b = pl.buffers[static_cast<size_t>(im.input_buffer[k])];
    const TensorData& t = inputs[k];
    KILN_CHECK(t.dtype == b.dtype, "cuda runtime: input ", k, " has dtype ", dtype_name(t.dtype), ", the plan expects ",
               dtype_name(b.dtype));
    KILN_CHECK(t.rank() == static_cast<int64_t>(b.sizes.size()), "cuda runtime: input ", k, " has rank ", t.rank(),
               ", the plan expects ", b.sizes.size());
    for (size_t d = 0; d < b.sizes.size(); ++d) {
      const int64_t want = b.sizes[d].evaluate(syms);
      KILN_CHECK(t.sizes[d] == want, "cuda runtime: input ", k, " has sizes ", sizes_str(t.sizes), ", but the plan needs ", want,
                 " at dim ", d, " (", b.sizes[d].str(), ")");
    }
    const Device where = t.device();
    KILN_CHECK(where.type == DeviceType::cpu || (where.type == DeviceType::cuda && where.index == dev), "cuda runtime: input ",
               k, " is on ", where.str(), "; the plan runs on cuda:", dev);
    bool strides_ok = true;
    for (size_t d = 0; d < b.strides.size() && strides_ok; ++d)
      strides_ok = t.sizes[d] == 1 || t.strides[d] == b.strides[d].evaluate(syms);
    if (!strides_ok)
      KILN_CHECK(b.strides == contiguous_strides(b.sizes), "cuda runtime: input ", k, " has strides ", sizes_str(t.strides),
                 ", the plan was made for other strides");
    const int64_t es = dtype_size(t.dtype);
    if (where.type == DeviceType::cuda && strides_ok) {
      ptrs[static_cast<size_t>(b.id)] = reinterpret_cast<DevicePtr>(t.storage->data()) + static_cast<DevicePtr>(t.offset * es);
      continue;
    }
    if (!strides_ok || t.numel() == 0) {  // the plan wants it contiguous: a contiguous device copy
      held.push_back(to_device(where.type == DeviceType::cuda ? to_host(t) : t, dev));
      ptrs[static_cast<size_t>(b.id)] = reinterpret_cast<DevicePtr>(held.back().storage->data());
      continue;
    }
    // A host view with the plan's strides: its storage span copied as it is.
    int64_t lo = 0, hi = 0;
    for (size_t d = 0; d < t.sizes.size(); ++d) {
      const int64_t ext = (t.sizes[d] - 1) * t.strides[d];
      (ext < 0 ? lo : hi) += ext;
    }
    const size_t bytes = static_cast<size_t>((hi - lo + 1) * es);
    TensorData d;
    d.dtype = t.dtype;
    d.storage = ctx.allocate(bytes);
    ctx.copy_to_device(reinterpret_cast<DevicePtr>(d.storage->data()), static_cast<const char*>(t.data()) + lo * es, bytes);
    ptrs[static_cast<size_t>(b.id)] = reinterpret_cast<DevicePtr>(d.storage->data()) + static_cast<DevicePtr>(-lo * es);
    held.push_back(std::move(d));
  }
  // Slots, outputs, constants.
  std::vector<std::shared_ptr<Storage>> slot_mem;
  std::unique_lock<std::mutex> kept_lock(im.kept_mu, std::defer_lock);
  const bool keep = im.options.keep_buffers && kept_lock.try_lock();
  if (keep && im.kept_syms == syms && im.kept_slots.size() == pl.slots.size()) {
    slot_mem = im.kept_slots;
  } else {
    for (const SymInt& s : pl.slots) slot_mem.push_back(ctx.allocate(static_cast<size_t>(s.evaluate(syms))));
    if (keep) {
      im.kept_syms = syms;
      im.kept_slots = slot_mem;
    }
  }
  std::vector<std::shared_ptr<Storage>> out_mem(pl.buffers.size());
  for (const plan::PlanBuffer& b : pl.buffers) {
    const size_t id = static_cast<size_t>(b.id);
    if (b.kind == "constant") {
      ptrs[id] = reinterpret_cast<DevicePtr>(im.constants[id]->data());
    } else if (b.kind == "output") {
      size_t n = static_cast<size_t>(dtype_size(b.dtype));
      for (const SymInt& s : b.sizes) n *= static_cast<size_t>(s.evaluate(syms));
      out_mem[id] = ctx.allocate(n);
      ptrs[id] = reinterpret_cast<DevicePtr>(out_mem[id]->data());
    } else if (b.kind == "intermediate") {
      ptrs[id] = reinterpret_cast<DevicePtr>(slot_mem[static_cast<size_t>(b.slot)]->data());
    }
  }
  auto device_view = [&](int32_t id) {
    const plan::PlanBuffer& b = pl.buffers[static_cast<size_t>(id)];
    TensorData t;
    t.dtype = b.dtype;
    t.sizes = eval(b.sizes, syms);
    t.strides = eval(b.strides, syms);
    int64_t span = 1;
    for (size_t d = 0; d < t.sizes.size(); ++d) span += (t.sizes[d] - 1) * t.strides[d];
    t.storage = std::make_shared<Storage>(Device::cuda(dev), reinterpret_cast<void*>(ptrs[static_cast<size_t>(id)]),
                                          static_cast<size_t>(std::max<int64_t>(span, 0) * dtype_size(b.dtype)), nullptr);
    return t;
  };
  // Kernels, in order, on the stream.
  std::vector<long long> sym_args(syms.begin(), syms.end());
  for (size_t ki = 0; ki < pl.kernels.size(); ++ki) {
    const plan::PlanKernel& k = pl.kernels[ki];
    if (k.kind == "reference") {
      std::vector<TensorData> args;
      for (int32_t b : k.inputs) args.push_back(to_host(device_view(b)));
      const plan::PlanBuffer& ob = pl.buffers[static_cast<size_t>(k.output)];
      const TensorData r = reference::run_op(k.op, args, k.attrs, ob.dtype, eval(ob.sizes, syms));
      const TensorData rc = r.is_contiguous() ? r : reference::contiguous(r);
      const size_t bytes = static_cast<size_t>(rc.numel() * dtype_size(rc.dtype));
      if (bytes) ctx.copy_to_device(ptrs[static_cast<size_t>(k.output)], rc.data(), bytes);
      continue;
    }
    if (k.gemm) run_gemm(ctx, *k.gemm, ptrs, syms, im.options.allow_tf32, k.name);
    if (!im.fns[ki]) continue;
    const int64_t extent = k.parallel_extent.evaluate(syms);
    if (extent <= 0) continue;
    int64_t grid = (extent + k.launch.items_per_block - 1) / std::max<int64_t>(1, k.launch.items_per_block);
    if (k.launch.max_blocks > 0) grid = std::min(grid, k.launch.max_blocks);
    grid = std::clamp<int64_t>(grid, 1, 0x7fffffff);
    std::vector<DevicePtr> bufs;
    for (int32_t b : im.params[ki]) bufs.push_back(ptrs[static_cast<size_t>(b)]);
    std::vector<void*> args;
    for (DevicePtr& p : bufs) args.push_back(&p);
    for (long long& s : sym_args) args.push_back(&s);
    ctx.launch(im.fns[ki], grid, k.launch.block, k.launch.shared_bytes, args.data(), k.name);
  }
  std::vector<TensorData> outs(pl.outputs.size());
  for (size_t o = 0; o < pl.outputs.size(); ++o) {
    const int32_t id = pl.outputs[o];
    const plan::PlanBuffer& b = pl.buffers[static_cast<size_t>(id)];
    if (b.kind == "input") {
      outs[o] = inputs[static_cast<size_t>(b.index)];
    } else if (b.kind == "constant") {
      TensorData h;
      h.dtype = b.dtype;
      h.sizes = eval(b.sizes, syms);
      h.strides = eval(b.strides, syms);
      h.storage = std::make_shared<Storage>(Device::cpu(), const_cast<std::byte*>(b.data->bytes.data()), b.data->bytes.size(),
                                            nullptr);
      outs[o] = to_device(reference::contiguous(h), dev);
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
  if (!held.empty()) ctx.synchronize();
  return outs;
}

}  // namespace kiln::cuda
