// kiln bench-model MODEL.onnx: a real model through kiln::onnx::compile, as a user runs it.
// For each mode: the first call (import, compile or cache load, run, device synchronised) and
// the median wall time per call after warm-up, each call synchronised. Writes the outputs of
// each mode (for comparison with the framework that exported the model) and one JSON line per
// mode. The kernel count comes from a separate compile with the schedule log captured, after
// the timed runs, so it does not slow them. tools/models/bench_models.py drives it beside torch.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "commands.h"
#include "kiln/config/config.h"
#include "kiln/config/log.h"
#include "kiln/graph/error.h"
#include "kiln/npy/npy.h"
#include "kiln/eval/interpreter.h"
#include "kiln/kiln.h"
#if KILN_HAVE_ONNX
#include "kiln/onnx/onnx.h"
#endif

namespace kiln::cli {

namespace {

using Clock = std::chrono::steady_clock;

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
      continue;
    }
    out += c;
  }
  return out + "\"";
}

template <class Map>
std::string json_counts(const Map& m) {
  std::string out = "{";
  for (const auto& [k, v] : m) out += (out.size() > 1 ? ", " : "") + json_string(k) + ": " + std::to_string(v);
  return out + "}";
}

// What the schedule log of one compile says: kernels by kind, and the ops of reference kernels
// (ops that run on the host interpreter).
struct KernelCounts {
  int64_t kernels = 0;
  std::map<std::string, int64_t> kinds;
  std::map<std::string, int64_t> reference_ops;
};

// Sends the schedule log (only) into a string while it lives; the log's usual settings after.
struct ScheduleLogCapture {
  explicit ScheduleLogCapture(std::string& into) {
    logs::set_sink_for_testing([&into](std::string_view text) { into += text; });
    logs::set_categories_for_testing("schedule");
  }
  ~ScheduleLogCapture() {
    logs::set_sink_for_testing({});
    logs::reset_for_testing();
  }
  ScheduleLogCapture(const ScheduleLogCapture&) = delete;
  ScheduleLogCapture& operator=(const ScheduleLogCapture&) = delete;
};

KernelCounts count_kernels(const std::string& schedule_log) {
  KernelCounts c;
  std::istringstream in(schedule_log);
  for (std::string line; std::getline(in, line);) {
    const std::string prefix = "[kiln:schedule] ";
    if (line.rfind(prefix, 0) != 0) continue;
    line = line.substr(prefix.size());
    if (line.rfind("kernel ", 0) == 0) {
      ++c.kernels;
      const size_t open = line.find(" ("), close = line.find(')', open);
      if (open != std::string::npos && close != std::string::npos) ++c.kinds[line.substr(open + 2, close - open - 2)];
    } else if (line.rfind("  reference ", 0) == 0) {
      const std::string rest = line.substr(12);
      ++c.reference_ops[rest.substr(0, rest.find('('))];
    }
  }
  return c;
}

}  // namespace

const CommandSpec& bench_model_spec() {
  static const CommandSpec spec{
      "bench-model",
      "MODEL.onnx",
      "Times a model file through kiln::onnx::compile on a device: first call and median per call, per mode.",
      "Each mode compiles the model in this process (with KILN_FORCE_DISABLE_CACHES=1 each mode's first\n"
      "call is a cold compile; otherwise it may load what an earlier mode or the cache directory holds,\n"
      "which in a fresh process with a filled KILN_CACHE_DIR is a warm first call), then times --reps calls\n"
      "after 3 warm-ups, each call followed by synchronising the device: wall time, median and minimum.\n"
      "Inputs are .npy files in the model's input order (an f32 file for a bf16 input is rounded to bf16).\n"
      "After the timed runs, one more compile (caches off)\n"
      "with the schedule log captured counts the kernels by kind and the ops left to reference kernels.\n"
      "--json appends one line per mode: model, device, mode, load_s (model_s: kiln::onnx::compile, which reads no\n"
      "weights; inputs_s: the inputs to the device, the first making its context), first_call_s (load_s and the\n"
      "first call), median_ms, min_ms, reps,\n"
      "kernels, kernel_kinds, reference_ops, outputs (the files --out wrote: DIR/<mode>_out<k>.npy).",
      {{"--device", "DEVICE", "cpu (default), cuda, cuda:1, vulkan"},
       {"--inputs", "A.npy,B.npy", "the inputs, comma separated, in the model's input order"},
       {"--modes", "M1,M2", "compile modes (default: default): default, reduce-overhead, max-autotune, ..."},
       {"--reps", "N", "timed calls per mode after 3 warm-ups (default 30; 0 times only the first call)"},
       {"--out", "DIR", "write each mode's outputs to DIR/<mode>_out<k>.npy"},
       {"--json", "FILE", "append one JSON line per mode to FILE"},
       {"--no-kernel-count", "", "skip the extra compile that counts kernels"}},
  };
  return spec;
}

int cmd_bench_model(std::span<char* const> args) {
  const ParsedArgs a = parse_args(bench_model_spec(), args);
  if (a.help) {
    std::cout << command_help(bench_model_spec());
    return 0;
  }
#if !KILN_HAVE_ONNX
  fail("kiln bench-model needs the ONNX frontend, and this build of kiln has none (KILN_WITH_ONNX=OFF)");
#else
  const std::string path = a.positional[0];
  const Device device = a.has("--device") ? parse_device(a.get("--device")) : Device::cpu();
  const std::vector<std::string> modes = a.has("--modes") ? split_list(a.get("--modes")) : std::vector<std::string>{"default"};
  const int reps = a.has("--reps") ? std::max(0, std::stoi(a.get("--reps"))) : 30;
  KILN_CHECK(!modes.empty(), "kiln bench-model: --modes names no mode");
  KILN_CHECK(a.has("--inputs"), "kiln bench-model: give the model's inputs with --inputs A.npy,...");

  const std::vector<std::string> files = split_list(a.get("--inputs"));
  const std::vector<std::string> names = onnx::input_names(path);
  KILN_CHECK(files.size() == names.size(), "kiln bench-model: '", path, "' takes ", names.size(), " inputs, --inputs names ",
             files.size());
  std::vector<TensorData> host;
  for (const std::string& f : files) host.push_back(npy::load_npy(f));

  std::ofstream json;
  if (a.has("--json")) {
    json.open(a.get("--json"), std::ios::app);
    KILN_CHECK(json.good(), "kiln bench-model: cannot open ", a.get("--json"), " for appending");
  }
  if (a.has("--out")) std::filesystem::create_directories(a.get("--out"));

  // The inputs on the device, in the dtypes the model takes (numpy has no bf16: an f32 file
  // for a bf16 input is rounded).
  auto device_inputs = [&](const onnx::CompiledModel& m) {
    std::vector<Tensor> in;
    const Graph& g = m.model().graph;
    for (size_t k = 0; k < host.size(); ++k) {
      TensorData t = host[k];
      const DType want = g.node(g.inputs()[k]).meta.dtype;
      if (t.dtype != want && want == DType::bf16 && t.dtype == DType::f32) t = eval::convert(t, DType::bf16);
      in.push_back(Tensor::from_data(std::move(t)).to(device));
    }
    synchronize(device);
    return in;
  };

  std::optional<KernelCounts> counts;
  for (const std::string& mode : modes) {
    CompileOptions options;
    options.mode = mode;
    const auto t0 = Clock::now();
    const onnx::CompiledModel model = onnx::compile(path, options);
    const auto t_model = Clock::now();
    const std::vector<Tensor> in = device_inputs(model);  // the first makes the device's context
    const auto t1 = Clock::now();
    std::vector<Tensor> out = model(in);
    synchronize(device);
    const double load_s = std::chrono::duration<double>(t1 - t0).count();
    const double model_s = std::chrono::duration<double>(t_model - t0).count();
    const double first_s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::vector<double> ms;
    if (reps > 0) {
      for (int i = 0; i < 3; ++i) out = model(in);
      synchronize(device);
      for (int i = 0; i < reps; ++i) {
        const auto s = Clock::now();
        out = model(in);
        synchronize(device);
        ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
      }
      std::sort(ms.begin(), ms.end());
    }
    std::vector<std::string> written;
    if (a.has("--out")) {
      for (size_t k = 0; k < out.size(); ++k) {
        const std::string file = (std::filesystem::path(a.get("--out")) / (mode + "_out" + std::to_string(k) + ".npy")).string();
        npy::save_npy(out[k].to(Device::cpu()).data(), file);
        written.push_back(file);
      }
    }
    if (!counts && !a.has("--no-kernel-count")) {
      std::string log;
      {
        const ScheduleLogCapture capture(log);
        const config::Patch no_caches({{"force_disable_caches", true}});
        (void)onnx::compile(path, options)(in);
        synchronize(device);
      }
      counts = count_kernels(log);
    }
    std::cout << path << " on " << device.str() << ", mode " << mode << ": first call " << first_s << " s (loading " << load_s << " s)";
    if (!ms.empty()) std::cout << "; median " << ms[ms.size() / 2] << " ms, min " << ms.front() << " ms over " << reps << " calls";
    if (counts) std::cout << "; " << counts->kernels << " kernels";
    std::cout << "\n";
    if (json.is_open()) {
      json << "{\"model\": " << json_string(path) << ", \"device\": " << json_string(device.str())
           << ", \"mode\": " << json_string(mode) << ", \"load_s\": " << load_s << ", \"model_s\": " << model_s
           << ", \"inputs_s\": " << load_s - model_s << ", \"first_call_s\": " << first_s << ", \"reps\": " << reps;
      if (!ms.empty()) json << ", \"median_ms\": " << ms[ms.size() / 2] << ", \"min_ms\": " << ms.front();
      if (counts)
        json << ", \"kernels\": " << counts->kernels << ", \"kernel_kinds\": " << json_counts(counts->kinds)
             << ", \"reference_ops\": " << json_counts(counts->reference_ops);
      json << ", \"outputs\": [";
      for (size_t k = 0; k < written.size(); ++k) json << (k ? ", " : "") << json_string(written[k]);
      json << "]}\n";
      json.flush();
    }
  }
  return 0;
#endif
}

}  // namespace kiln::cli
