// The CUDA target's native half: targets/cuda/runtime behind target::Runtime. Cache entries keep
// each program's source, image and "<arch> cubin|ptx" (blobs programN.cu or .ll, .bin, .txt): a
// hit puts the images into the runtime's process cache, so loading the plan compiles nothing.
#include <algorithm>
#include <cstdio>
#include <vector>
#include <thread>

#include <nlohmann/json.hpp>

#include "kiln/config/config.h"
#include "kiln/config/log.h"
#include "kiln/cuda/codegen.h"
#include "kiln/cuda/convolution.h"
#include "kiln/cuda/device.h"
#include "kiln/cuda/executable.h"
#include "kiln/cuda/gemm.h"
#include "kiln/cuda/nvrtc.h"
#include "kiln/graph/error.h"
#include "kiln/graph/graph.h"
#include "kiln/graph/ops.h"
#include "kiln/target/target.h"

void kiln_register_cuda_codegen();

namespace kiln::cuda {
namespace {

// Problems the early start-up sets up besides the library and its handle, one of each dtype (and
// layout) the graph's products or convolutions have, before the plan's own problems are known: a
// library's first heuristic of a process costs the most, and the plan's first run waited for it
// (on an H100 cuBLASLt's first took 69-71 ms; vit_b_16 fp32's 74 problems after it took 6.6 ms
// against 75 ms without the sample, and its warm first run waited 0.05 ms against 24).
std::vector<plan::PlanGemm> sample_gemms(const std::vector<DType>& dtypes) {
  std::vector<plan::PlanGemm> out;
  for (DType t : dtypes) {
    plan::PlanGemm g;
    g.a = 0, g.b = 1, g.c = 2;
    g.dtype = t;
    g.m = g.n = g.k = 256;
    g.a_row_stride = g.b_row_stride = 256;
    g.a_col_stride = g.b_col_stride = 1;
    out.push_back(g);
  }
  return out;
}
std::vector<plan::PlanConvolution> sample_convolutions(const std::vector<DType>& dtypes) {
  std::vector<plan::PlanConvolution> out;
  for (DType t : dtypes)
    for (bool channels_last : {false, true}) {
      plan::PlanConvolution c;
      c.x = 0, c.w = 1, c.y = 2;
      c.dtype = t;
      c.channels_last = channels_last;
      c.x_sizes = channels_last ? SymShape{8, 28, 28, 64} : SymShape{8, 64, 28, 28};
      c.w_sizes = channels_last ? std::vector<int64_t>{64, 3, 3, 64} : std::vector<int64_t>{64, 64, 3, 3};
      c.strides = {1, 1};
      c.pads = {1, 1, 1, 1};
      c.dilations = {1, 1};
      out.push_back(c);
    }
  return out;
}

class CudaLoaded final : public target::LoadedPlan {
 public:
  explicit CudaLoaded(std::shared_ptr<PlanExecutable> exe) : exe_(std::move(exe)) {}
  std::vector<TensorData> run(std::span<const TensorData* const> inputs) const override { return exe_->run(inputs); }
  const plan::KernelPlan& plan() const override { return exe_->plan(); }
  target::Artifacts artifacts() const override {
    target::Artifacts a;
    int n = 0;
    for (const ProgramImage& p : exe_->programs()) {
      const std::string stem = "program" + std::to_string(n++);
      a.emplace_back(stem + (is_nvptx_program(p.source) ? ".ll" : ".cu"), p.source);
      a.emplace_back(stem + ".bin", p.module.image);
      a.emplace_back(stem + ".txt", std::to_string(p.module.arch) + (p.module.cubin ? " cubin" : " ptx"));
    }
    return a;
  }
  std::string compile_report() const override {
    return std::to_string(exe_->programs().size()) + " programs for sm_" + std::to_string(exe_->arch()) + ", " +
           exe_->compile_log();
  }
  double compile_seconds() const override { return exe_->compile_seconds(); }
  void set_profiling(bool on) override { exe_->set_profiling(on); }
  std::optional<plan::KernelProfile> profile() const override { return exe_->profile(); }
  std::string tuning_report() const override { return exe_->tuning_report(); }

 private:
  std::shared_ptr<PlanExecutable> exe_;
};

// Device-event timing of `call` on the context's stream (the one Kiln queues every kernel on).
double timed_median(Context& ctx, const std::function<void()>& call, int reps) {
  for (int i = 0; i < 3; ++i) call();
  ctx.synchronize();
  auto timer = ctx.timer();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    timer->start();
    call();
    ms.push_back(timer->stop_ms());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

class CudaRuntime final : public target::Runtime {
 public:
  std::string name() const override { return "cuda"; }
  DeviceType device_type() const override { return DeviceType::cuda; }
  bool available(std::string* why) const override { return cuda::available(why); }
  std::vector<std::string> device_lines() const override {
    std::string why;
    if (!cuda::available(&why)) return {"cuda: " + why};
    std::vector<std::string> lines;
    for (int i = 0; i < device_count(); ++i)
      lines.push_back("cuda:" + std::to_string(i) + " " + Context::get(i).info().str());
    return lines;
  }
  // cuBLASLt for a graph with products (matmuls, linear layers, unfused attention, convolutions that
  // decompose into a gemm), cuDNN for one with convolutions it runs, as the scheduler decides
  // (schedule::Target::runs_convolution): loading each and making its handle takes tens of ms in
  // a fresh process, and a warm first call otherwise waits for them after its import.
  std::shared_ptr<void> start_device_setup(Device d, const Graph& g) override {
    const schedule::Target target = schedule_target();
    // The dtypes of the products and library convolutions (a gemm or cuDNN runs only floats).
    std::vector<DType> product_dtypes, convolution_dtypes;
    auto note = [](std::vector<DType>& dtypes, DType t) {
      if ((t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16) &&
          std::find(dtypes.begin(), dtypes.end(), t) == dtypes.end())
        dtypes.push_back(t);
    };
    for (const Node& n : g.nodes()) {
      const bool convolves = n.op == OpId::convolution || n.op == OpId::convolution_channels_last ||
                             n.op == OpId::convolution_input_grad || n.op == OpId::convolution_weight_grad;
      const bool library = convolves && target.runs_convolution(g, n);
      // Depthwise convolutions (as traced or imported) fold their taps into a kernel of ours.
      const bool folds = n.op == OpId::convolution && convolution_folds_taps(g.node(n.inputs[1]).meta.sizes);
      const bool product = op_def(n.op).category == OpCategory::matmul || n.op == OpId::linear ||
                           (n.op == OpId::scaled_dot_product_attention && !target.fuses_attention(g, n)) ||
                           (convolves && !library && !folds);
      if (product) note(product_dtypes, n.meta.dtype);
      if (library) note(convolution_dtypes, n.meta.dtype);
    }
    if (product_dtypes.empty() && convolution_dtypes.empty()) return nullptr;
    Context& ctx = Context::get(d.index);
    const bool allow_tf32 = config::get<bool>("cuda.allow_tf32");
    // Each an empty thread (dropped by join_when_released) when it has no samples.
    std::vector<std::thread> started;
    started.push_back(start_gemm(ctx, sample_gemms(product_dtypes), allow_tf32, /*ahead_of_plan=*/true));
    started.push_back(start_convolution(ctx, sample_convolutions(convolution_dtypes), allow_tf32, /*ahead_of_plan=*/true));
    return target::join_when_released(std::move(started));
  }
  target::CodegenRequest codegen_request(Device d) const override {
    target::CodegenRequest r;
    r.set("arch", int64_t{Context::get(d.index).info().arch()});
    return r;
  }
  std::string device_identity(Device d) const override {
    const DeviceInfo& info = Context::get(d.index).info();
    return info.name + " sm_" + std::to_string(info.arch());
  }
  std::string toolchain(Device) const override { return "nvrtc " + nvrtc_version() + " " + nvrtc_env_options(); }
  std::shared_ptr<target::LoadedPlan> load(target::Generated plans, const target::Artifacts* cached,
                                           const target::LoadOptions& lo, std::string*) override {
    if (cached) {
      // Blobs in threes: programN.cu or .ll (source), programN.bin (image), programN.txt ("<arch> cubin|ptx").
      const int arch = Context::get(lo.device.index).info().arch();
      KILN_CHECK(cached->size() % 3 == 0, "cuda cache entry: ", cached->size(), " blobs, not source/image/arch triples");
      for (size_t i = 0; i < cached->size(); i += 3) {
        CompiledModule m;
        m.image = (*cached)[i + 1].second;
        const std::string& meta = (*cached)[i + 2].second;
        KILN_CHECK(std::sscanf(meta.c_str(), "%d", &m.arch) == 1, "cuda cache entry: bad program description '", meta, "'");
        m.cubin = meta.find("cubin") != std::string::npos;
        remember_module((*cached)[i].second, arch, m);
      }
    }
    const ExecutableOptions o = options(lo);
    auto exe = plans.alternatives.empty() ? PlanExecutable::load(std::move(plans.plan), o)
                                          : PlanExecutable::load(std::move(plans.plan), std::move(plans.alternatives), o);
    return std::make_shared<CudaLoaded>(std::move(exe));
  }
  TensorData move(const TensorData& t, Device to) override {
    return move_through(t, to, [](const TensorData& h) { return to_host(h); },
                        [](const TensorData& h, int index) { return to_device(h, index); });
  }
  void synchronize(Device d) override {
    std::string why;
    if (!cuda::available(&why)) fail("synchronize(", d.str(), "): ", why);
    Context::get(d.index).synchronize();
  }
  std::optional<double> median_device_ms(Device d, const std::function<void()>& call, int reps) override {
    return timed_median(Context::get(d.index), call, std::max(reps, 1));
  }
  // Device-to-device copy bandwidth (bytes read plus written per second), median of 30 copies of
  // 1 GiB: the ceiling of every memory-bound workload.
  std::optional<target::Bandwidth> copy_gbps(Device d) override {
    Context& ctx = Context::get(d.index);
    const size_t n = size_t{1} << 30;
    const DevicePtr a = ctx.alloc(n), b = ctx.alloc(n);
    ctx.memset(a, 1, n);
    const double ms = timed_median(ctx, [&] { ctx.copy_device(b, a, n); }, 30);
    ctx.free(a, n);
    ctx.free(b, n);
    return target::Bandwidth{2.0 * static_cast<double>(n) / (ms * 1e-3) / 1e9, "cuMemcpyDtoD"};
  }
  void forget_compiled() override { forget_modules(); }

 private:
  // The runtime options a plan loads with (device, modes, autotune's cache hooks).
  static ExecutableOptions options(const target::LoadOptions& lo) {
    ExecutableOptions o;
    o.device = lo.device.index;
    o.keep_buffers = config::get<bool>("keep_buffers");  // mode reduce-overhead sets it
    o.allow_tf32 = config::get<bool>("cuda.allow_tf32");
    o.cuda_graph = config::get<bool>("cudagraphs");  // reduce-overhead, max-autotune, backend cudagraphs
    o.autotune_trials = static_cast<int>(config::get<int64_t>("autotune.num_trials"));
    o.autotune_gemm = config::get<bool>("max_autotune_gemm");
    // Long tuning says what it is doing (torch.compile's max-autotune prints its progress too).
    o.progress = [](const std::string& line) { std::fprintf(stderr, "[kiln] %s\n", line.c_str()); };
    const bool autotune = config::get<bool>("max_autotune") && config::get<bool>("max_autotune_pointwise");
    if ((autotune || o.autotune_gemm) && config::get<bool>("autotune.cache") && lo.autotune) {
      o.recall = [store = lo.autotune](const std::string& signature, const std::string& problem) -> std::optional<int> {
        const std::optional<std::string> v = store.recall(signature, problem);
        if (!v) return std::nullopt;
        const nlohmann::json j = nlohmann::json::parse(*v, nullptr, false);
        if (j.is_discarded() || !j.is_object() || !j.contains("version") || !j["version"].is_number_integer()) {
          KILN_LOG(cache, "autotune cache: ignoring a cuda choice that is not {\"version\": integer}: ", *v);
          return std::nullopt;
        }
        return j["version"].get<int>();
      };
      o.remember = [store = lo.autotune](const std::string& signature, const std::string& problem, int choice,
                                         const std::string& what) {
        store.remember(signature, problem, nlohmann::json{{"version", choice}}.dump(), "cuda " + what);
      };
    }
    return o;
  }
};

}  // namespace
}  // namespace kiln::cuda

void kiln_register_cuda_target() {
  kiln_register_cuda_codegen();
  kiln::target::register_runtime(std::make_shared<kiln::cuda::CudaRuntime>());
}
