// The CUDA target in the C++ frontend: device moves, eager ops on CUDA tensors, and the "kiln"
// backend's CUDA path (schedule the optimised graph, generate CUDA C, compile it with NVRTC for
// the device, run it with targets/cuda/runtime).
#include "cuda_backend.h"
#include "backend_cache.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <mutex>
#include <optional>

#include <nlohmann/json.hpp>

#include "kiln/cache/cache.h"
#include "kiln/config/config.h"
#include "kiln/config/log.h"
#include "kiln/format/graph_json.h"
#include "kiln/plan/plan_json.h"
#include "kiln/graph/error.h"
#include "kiln/reference/reference.h"
#include "kiln/tensor.h"

#if KILN_HAVE_CUDA_TARGET
#include "kiln/cuda/codegen.h"
#include "kiln/cuda/device.h"
#include "kiln/cuda/executable.h"
#include "kiln/cuda/nvrtc.h"
#include "kiln/schedule/schedule.h"
#endif

namespace kiln::detail {

bool cuda_target_available() { return KILN_HAVE_CUDA_TARGET != 0; }

#if KILN_HAVE_CUDA_TARGET

TensorData cuda_move(const TensorData& t, Device to) {
  const Device from = t.device();
  if (from == to) return t;
  std::string why;
  if (!cuda::available(&why)) fail("to(", to.str(), "): ", why);
  if (to.type == DeviceType::cpu) {
    KILN_CHECK(from.type == DeviceType::cuda, "to(cpu): cannot move a tensor from ", from.str());
    return cuda::to_host(t);
  }
  KILN_CHECK(to.type == DeviceType::cuda, "to(", to.str(), "): the CUDA target cannot move a tensor there");
  if (from.type == DeviceType::cuda) return cuda::to_device(cuda::to_host(t), to.index);
  KILN_CHECK(from.type == DeviceType::cpu, "to(", to.str(), "): cannot move a tensor from ", from.str());
  return cuda::to_device(t, to.index);
}

bool cuda_target_applies(const Graph& g) {
  int device = -1;
  for (NodeId id : g.inputs()) {
    const Device d = g.node(id).meta.device;
    if (d.type != DeviceType::cuda) return false;
    if (device >= 0 && d.index != device) return false;
    device = d.index;
  }
  if (device < 0) return false;
  for (const Node& n : g.nodes()) {
    if (n.meta.device.type == DeviceType::vulkan) return false;
    for (const SymInt& s : n.meta.sizes)
      if (s == 0) return false;
  }
  return true;
}

namespace {

int device_of(const Graph& g) {
  for (NodeId id : g.inputs()) return g.node(id).meta.device.index;
  return 0;
}

// max-autotune: the same schedule generated with other launch configurations (threads per
// block and elements per thread of pointwise kernels, rows kept in registers or re-read); the
// runtime compiles them all and times each kernel's distinct versions on the first call.
std::vector<plan::KernelPlan> autotune_alternatives(const schedule::Schedule& s, const cuda::CodegenOptions& base) {
  std::vector<plan::KernelPlan> alts;
  for (int64_t block : {128, 256, 512, 1024})
    for (int64_t items : {1, 4, 8})
      for (bool rows : {true, false}) {
        cuda::CodegenOptions o = base;
        o.pointwise_block = block;
        o.pointwise_items_per_thread = items;
        o.cache_rows = rows;
        if (block == base.pointwise_block && items == base.pointwise_items_per_thread && rows == base.cache_rows) continue;
        alts.push_back(cuda::generate(s, o));
      }
  // Attention kernels: blocks of the other number of query rows (64 or 128) and, on sm_90, the
  // mma.sync kernel beside the wgmma one.
  for (const schedule::Kernel& k : s.kernels) {
    if (!k.attention) continue;
    cuda::CodegenOptions o = base;
    o.attention_warp_tiles = k.attention->d <= 64 && k.attention->dv <= 64 ? 1 : 2;
    o.attention_sm90 = false;
    alts.push_back(cuda::generate(s, o));
    if (base.arch == 90 && base.attention_sm90) {
      o.attention_warp_tiles = base.attention_warp_tiles;
      alts.push_back(cuda::generate(s, o));
    }
    break;
  }
  return alts;
}

std::string cuda_device_string(int device) {
  const cuda::DeviceInfo& d = cuda::Context::get(device).info();
  return d.name + " sm_" + std::to_string(d.arch());
}

// The runtime options a graph's executable loads with (device, modes, autotune's cache hooks).
cuda::ExecutableOptions executable_options(const Graph& g, bool autotune) {
  cuda::ExecutableOptions o;
  o.device = device_of(g);
  o.keep_buffers = config::get<bool>("cpu.keep_buffers");  // mode reduce-overhead sets it
  o.allow_tf32 = config::get<bool>("cuda.allow_tf32");
  o.cuda_graph = config::get<bool>("cudagraphs");  // reduce-overhead, max-autotune, backend cudagraphs
  o.autotune_trials = static_cast<int>(config::get<int64_t>("autotune.num_trials"));
  o.autotune_gemm = config::get<bool>("max_autotune_gemm");
  // Long tuning says what it is doing (torch.compile's max-autotune prints its progress too).
  o.progress = [](const std::string& line) { std::fprintf(stderr, "[kiln] %s\n", line.c_str()); };
  if ((autotune || o.autotune_gemm) && config::get<bool>("autotune.cache")) {
    const std::string device = cuda_device_string(o.device);
    o.recall = [device](const std::string& signature, const std::string& problem) -> std::optional<int> {
      const std::optional<std::string> v = cache::autotune_lookup("cuda", device, signature, problem);
      if (!v) return std::nullopt;
      const nlohmann::json j = nlohmann::json::parse(*v, nullptr, false);
      if (j.is_discarded() || !j.is_object() || !j.contains("version") || !j["version"].is_number_integer()) {
        KILN_LOG(cache, "autotune cache: ignoring a cuda choice that is not {\"version\": integer}: ", *v);
        return std::nullopt;
      }
      return j["version"].get<int>();
    };
    o.remember = [device](const std::string& signature, const std::string& problem, int choice, const std::string& what) {
      cache::autotune_store("cuda", device, signature, problem, nlohmann::json{{"version", choice}}.dump(), "cuda " + what);
    };
  }
  return o;
}

bool autotune_on() { return config::get<bool>("max_autotune") && config::get<bool>("max_autotune_pointwise"); }

std::shared_ptr<cuda::PlanExecutable> compile_plan(const Graph& g) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const schedule::Schedule s = schedule::schedule_graph(g, cuda::schedule_target());
  KILN_LOG(schedule, "schedule (", s.kernels.size(), " kernel", s.kernels.size() == 1 ? "" : "s", "):\n", s.str());
  const double schedule_ms = ms_since(t0);
  const auto t1 = Clock::now();
  cuda::CodegenOptions co = cuda::CodegenOptions::from_config();
  co.arch = cuda::Context::get(device_of(g)).info().arch();  // kernels for this device (sm_90: wgmma attention)
  plan::KernelPlan p = cuda::generate(s, co);
  KILN_LOG(output_code, "kernel plan:\n", p.str(), "module:\n", p.module_source());
  const bool autotune = autotune_on();
  std::vector<plan::KernelPlan> alternatives;
  if (autotune) alternatives = autotune_alternatives(s, co);
  const double codegen_ms = ms_since(t1);
  const cuda::ExecutableOptions o = executable_options(g, autotune);
  const auto t2 = Clock::now();
  auto exe = alternatives.empty() ? cuda::PlanExecutable::load(std::move(p), o)
                                  : cuda::PlanExecutable::load(std::move(p), std::move(alternatives), o);
  KILN_LOG(cache, "cuda plan of ", g.op_count(), " ops: schedule ", schedule_ms, " ms, codegen ", codegen_ms,
           " ms, NVRTC and module load ", ms_since(t2), " ms (", exe->compile_log(), ")");
  return exe;
}

// The plan cache (sdk/cache: the process's artifacts, the disk, the remote store) keeps the
// kernel plan and the NVRTC images of its programs: on a hit the images go into the runtime's
// process cache and the stored plan is loaded, so nothing is scheduled, generated or compiled.
// max-autotune's alternative plans are not stored: with it on, a hit schedules and generates
// them again (milliseconds) and only NVRTC is skipped.
std::shared_ptr<cuda::PlanExecutable> cached_plan(const Graph& g) {
  const cache::Enabled on = cache::enabled_layers();
  if (!on.memory && !on.disk && !on.remote) {
    check_may_compile(g, "cuda", "");
    return compile_plan(g);
  }
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const Graph canonical = g.canonical();
  const int device = device_of(g);
  const int arch = cuda::Context::get(device).info().arch();
  const cache::KeyInputs in = cache::graph_key_inputs(canonical, format::to_json(canonical, -1), "cuda", "cuda",
                                                      cuda_device_string(device), "nvrtc " + cuda::nvrtc_version() + " " + cuda::nvrtc_env_options());
  const std::string key = cache::make_key(in).hex;
  const std::vector<cache::Guard> guards = cache::guards_for(in);
  cache::CacheStats counts;
  std::optional<cache::Entry> e = cache::lookup(key, guards, &counts);
  note_cache_stats(counts);
  if (e) {
    try {
      std::optional<plan::KernelPlan> p;
      if (!e->plan.empty()) p = take_plan(*e);
      // Blobs in threes: programN.cu or .ll (CUDA C or LLVM IR source), programN.bin (image), programN.txt ("<arch> cubin|ptx").
      KILN_CHECK(e->blobs.size() % 3 == 0, "cache entry ", key, ": ", e->blobs.size(), " blobs, not source/image/arch triples");
      for (size_t i = 0; i < e->blobs.size(); i += 3) {
        cuda::CompiledModule m;
        m.image = e->blobs[i + 1].second;
        const std::string& meta = e->blobs[i + 2].second;
        KILN_CHECK(std::sscanf(meta.c_str(), "%d", &m.arch) == 1, "cache entry ", key, ": bad program description '", meta, "'");
        m.cubin = meta.find("cubin") != std::string::npos;
        cuda::remember_module(e->blobs[i].second, arch, m);
      }
      std::shared_ptr<cuda::PlanExecutable> exe;
      if (p && !autotune_on())
        exe = cuda::PlanExecutable::load(std::move(*p), executable_options(g, false));
      else
        exe = compile_plan(g);
      KILN_LOG(cache, "cuda plan ", key, ": cache hit in ", ms_since(t0),
               " ms (", e->description, ")");
      return exe;
    } catch (const Error& err) {
      cache::discard(key, std::string("cannot load it: ") + err.what() + "; compiling again");
    }
  }
  check_may_compile(g, "cuda", key);
  const auto t_compile = Clock::now();
  auto exe = compile_plan(g);
  cache::Entry entry;
  entry.key = key;
  entry.guards = guards;
  entry.created_unix = static_cast<int64_t>(std::time(nullptr));
  put_plan(entry, exe->plan());
  int n = 0;
  for (const cuda::ProgramImage& p : exe->programs()) {
    const std::string stem = "program" + std::to_string(n++);
    entry.blobs.emplace_back(stem + (cuda::is_nvptx_program(p.source) ? ".ll" : ".cu"), p.source);
    entry.blobs.emplace_back(stem + ".bin", p.module.image);
    entry.blobs.emplace_back(stem + ".txt", std::to_string(p.module.arch) + (p.module.cubin ? " cubin" : " ptx"));
  }
  entry.description = "cuda: " + std::to_string(canonical.op_count()) + " ops, " + std::to_string(exe->plan().kernels.size()) +
                      " kernels, " + std::to_string(n) + " programs for sm_" + std::to_string(arch);
  KILN_LOG(cache, "cuda plan ", key, ": compiled in ",
           ms_since(t_compile), " ms (", entry.description, ")");
  cache::store(entry);
  return exe;
}

}  // namespace

Executable cuda_executable(const Graph& g) {
  struct Cached {
    Graph graph;
    uint64_t config = 0;
    std::shared_ptr<cuda::PlanExecutable> exe;
  };
  static std::mutex mu;
  static std::map<uint64_t, std::vector<Cached>> cache;
  std::shared_ptr<cuda::PlanExecutable> exe;
  const bool use_cache = !config::get<bool>("force_disable_caches");
  const Graph canonical = g.canonical();
  const uint64_t key = canonical.structural_hash(), config_hash = config::codegen_hash();
  if (use_cache) {
    std::lock_guard lock(mu);
    for (const Cached& c : cache[key])
      if (c.config == config_hash && c.graph == canonical) exe = c.exe;
  }
  if (!exe) {
    exe = cached_plan(g);
    if (use_cache) {
      std::lock_guard lock(mu);
      cache[key].push_back(Cached{canonical, config_hash, exe});
    }
  }
  return [exe](std::span<const TensorData* const> inputs) { return exe->run(inputs); };
}

Executable cuda_graphs_executable(const Graph& g) {
  // Each op its own kernel (what eager mode launches), recorded once as a CUDA graph and replayed.
  config::Patch eager_kernels({{"fusion.max_fusion_size", int64_t{1}},
                               {"fusion.epilogue_fusion", false},
                               {"fusion.horizontal", false},
                               {"cudagraphs", true},
                               {"cpu.keep_buffers", true}});
  return cuda_executable(g);
}

TensorData cuda_eager(OpId op, std::span<const TensorData> inputs, const Attrs& attrs) {
  Device dev = Device::cpu();
  for (const TensorData& t : inputs) {
    const Device d = t.device();
    if (d.type == DeviceType::cpu && t.rank() == 0) continue;  // 0-d host scalars are fine
    KILN_CHECK(d.type == DeviceType::cuda && (dev.type == DeviceType::cpu || d == dev), op_name(op),
               ": the inputs are on different devices (", dev.str(), " and ", d.str(), ")");
    dev = d;
  }
  // Empty tensors and host scalars: through the host and the reference interpreter.
  bool small = false;
  for (const TensorData& t : inputs) small = small || t.numel() == 0;
  if (small || op_def(op).category == OpCategory::source) {
    std::vector<TensorData> host;
    for (const TensorData& t : inputs) host.push_back(t.device().type == DeviceType::cpu ? t : cuda::to_host(t));
    return cuda::to_device(reference::eval_op(op, host, attrs), dev.index);
  }
  if (op_def(op).decompose) {  // a composite: its decomposition, op by op
    Graph g;
    std::vector<NodeId> ids;
    for (const TensorData& t : inputs) ids.push_back(g.add_input(t.meta()));
    const NodeId result = op_def(op).decompose(g, ids, attrs);
    std::vector<TensorData> values(g.size());
    for (size_t i = 0; i < inputs.size(); ++i) values[static_cast<size_t>(ids[i])] = inputs[i];
    for (NodeId id = 0; id <= result; ++id) {
      const Node& n = g.node(id);
      if (n.op == OpId::input) continue;
      std::vector<TensorData> args;
      for (NodeId i : n.inputs) args.push_back(values[static_cast<size_t>(i)]);
      values[static_cast<size_t>(id)] = cuda_eager(n.op, args, n.attrs);
    }
    return values[static_cast<size_t>(result)];
  }
  // A single-op graph over the inputs as they are (static sizes, the inputs' strides), compiled
  // once per op, attributes, dtypes, sizes and strides.
  std::string key = std::to_string(static_cast<int>(op)) + "|" + std::to_string(attrs.hash()) + "|" + dev.str();
  Graph g;
  std::vector<NodeId> ids;
  std::vector<TensorData> in;
  for (const TensorData& t0 : inputs) {
    TensorData t = t0.device().type == DeviceType::cpu ? cuda::to_device(t0, dev.index) : t0;
    TensorMeta m = t.meta();
    key += "|" + m.str();
    ids.push_back(g.add_input(m));
    in.push_back(std::move(t));
  }
  g.set_outputs({g.add(op, ids, attrs)});
  struct Entry {
    Attrs attrs;
    std::shared_ptr<cuda::PlanExecutable> exe;
  };
  static std::mutex mu;
  static std::map<std::string, std::vector<Entry>> cache;
  std::shared_ptr<cuda::PlanExecutable> exe;
  {
    std::lock_guard lock(mu);
    for (const Entry& e : cache[key])
      if (e.attrs == attrs) exe = e.exe;
  }
  if (!exe) {
    exe = compile_plan(g);
    std::lock_guard lock(mu);
    cache[key].push_back(Entry{attrs, exe});
  }
  return std::move(exe->run(std::span<const TensorData>(in))[0]);
}

#else

TensorData cuda_move(const TensorData&, Device to) {
  fail("to(", to.str(), "): no CUDA device: this build of Kiln has no CUDA target (KILN_WITH_CUDA=OFF)");
}
bool cuda_target_applies(const Graph&) { return false; }
Executable cuda_executable(const Graph&) { fail("this build of Kiln has no CUDA target (KILN_WITH_CUDA=OFF)"); }
Executable cuda_graphs_executable(const Graph&) {
  fail("backend 'cudagraphs' needs a CUDA device, and this build of Kiln has no CUDA runtime (KILN_WITH_CUDA=OFF)");
}
TensorData cuda_eager(OpId op, std::span<const TensorData>, const Attrs&) {
  fail(op_name(op), ": no CUDA device: this build of Kiln has no CUDA target (KILN_WITH_CUDA=OFF)");
}

#endif

}  // namespace kiln::detail

namespace kiln {

void synchronize(Device device) {
  if (device.type != DeviceType::cuda) return;
#if KILN_HAVE_CUDA_TARGET
  std::string why;
  if (!cuda::available(&why)) fail("synchronize(", device.str(), "): ", why);
  cuda::Context::get(device.index).synchronize();
#else
  fail("synchronize(", device.str(), "): no CUDA device: this build of Kiln has no CUDA target (KILN_WITH_CUDA=OFF)");
#endif
}

}  // namespace kiln
