// kiln run GRAPH.json: load a graph, make or load its inputs, run it on a target, show and
// optionally save the outputs, and with --profile each kernel's time as kiln.profile JSON.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "input_checks.h"
#include "model_files.h"
#include "plan_files.h"
#include "kiln/graph/files.h"
#include "kiln/format/graph_json.h"
#include "kiln/plan/plan_json.h"
#include "kiln/plan/profile.h"
#include "kiln/cache/cache.h"
#include "kiln/caches.h"
#include "kiln/config/log.h"
#include "kiln/graph/error.h"
#include "kiln/npy/npy.h"
#include "kiln/eval/random.h"
#include "kiln/eval/interpreter.h"
#include "kiln/passes/passes.h"
#include "kiln/target/target.h"

namespace kiln::cli {

namespace {

// The targets `kiln run` can use in this build: the reference and every registered runtime.
std::vector<std::string> available_targets() {
  target::ensure_builtin_targets();
  std::vector<std::string> t = {"reference"};
  for (std::string& name : target::runtime_names()) t.push_back(std::move(name));
  return t;
}

// --save-plan FILE: the plan as kiln.plan JSON, before it runs (so a plan that fails is kept too).
void save_plan_if_asked(const ParsedArgs& a, const plan::KernelPlan& p) {
  if (a.has("--save-plan")) write_plan_file(a.get("--save-plan"), p, "kiln run --save-plan");
}

double element(const TensorData& t, int64_t flat);  // below

// --profile without --repeat: the calls timed after the first (which the medians leave out).
constexpr int kProfileRepeat = 20;

// --repeat N (a positive integer), or the default with --profile; 0 when neither is given.
int repeat_count(const ParsedArgs& a) {
  if (!a.has("--repeat")) return a.has("--profile") ? kProfileRepeat : 0;
  const std::string& s = a.get("--repeat");
  int n = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || ptr != s.data() + s.size() || n < 1)
    throw UsageError("kiln run: --repeat takes a positive integer, got '" + s + "'");
  return n;
}

// --profile on the reference target: it interprets the graph op by op and has no kernels.
void check_profile_target(const ParsedArgs& a, const std::string& target_name) {
  if (a.has("--profile") && target_name == "reference")
    throw UsageError("kiln run --profile: the reference target runs no kernels to time; give --target cpu, cuda or vulkan");
}

// Before anything runs: --profile's file must be writable where it is named (its folder exists).
void check_profile_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path parent = fs::path(path).parent_path();
  KILN_CHECK(parent.empty() || fs::is_directory(parent, ec), "kiln run --profile: cannot write '", path,
             "': its folder '", parent.string(), "' does not exist");
  KILN_CHECK(!fs::is_directory(path, ec), "kiln run --profile: cannot write '", path, "': it is a folder");
}

// --profile OUT.json: the executable's per-kernel times as kiln.profile JSON, and one line saying so.
void write_profile(const target::LoadedPlan& exe, const std::string& target_name, const std::string& path) {
  const plan::KernelPlan& p = exe.plan();
  KILN_CHECK(!p.kernels.empty(), "kiln run --profile: the plan for ", target_name,
             " has no kernels to time (its outputs are inputs or constants)");
  const std::optional<plan::KernelProfile> prof = exe.profile();
  KILN_CHECK(prof.has_value(), "kiln run --profile: target ", target_name,
             " timed no kernels on this device (it has no kernel timers)");
  const std::string text = prof->to_json(p);
  std::ofstream f(path, std::ios::binary);
  f << text;
  f.close();
  KILN_CHECK(f.good(), "kiln run --profile: cannot write '", path, "'");
  const nlohmann::json j = nlohmann::json::parse(text);
  std::cout << "profile: " << p.kernels.size() << " kernels on " << prof->device() << ", " << j["total_ms"].get<double>()
            << " ms in all (sum of per-kernel medians over calls " << (j["first_call_left_out"].get<bool>() ? 2 : 1) << "-"
            << prof->calls() << "); wrote " << path << "\n";
}

// The outputs of one run of `p`, copied to the host.
std::vector<TensorData> run_on_host(target::Runtime& rt, const target::LoadedPlan& p, const std::vector<TensorData>& inputs) {
  std::vector<const TensorData*> in;
  for (const TensorData& t : inputs) in.push_back(&t);
  std::vector<TensorData> out = p.run(in);
  for (TensorData& t : out) t = rt.move(t, Device::cpu());
  return out;
}

// Runs a kernel plan on its target's runtime (device 0), outputs on the host. A plan made for
// another target, or a target without a device here, is a kiln::Error saying so. --repeat runs
// it again: the median device time where the target has device timers (inputs on the device,
// and each kernel's time in the last run), else the median wall time; every run must give the
// same bits as the first.
std::vector<TensorData> run_loaded(target::Runtime& rt, const std::shared_ptr<target::LoadedPlan>& exe,
                                   const std::vector<TensorData>& inputs, const ParsedArgs& a);

std::vector<TensorData> run_plan(const std::string& target_name, plan::KernelPlan p, const std::vector<TensorData>& inputs,
                                 const ParsedArgs& a) {
  KILN_CHECK(p.target == target_name, "kiln run: the plan is for target '", p.target, "', not '", target_name,
             "' (run it with --target ", p.target, ")");
  save_plan_if_asked(a, p);
  target::Runtime& rt = target::runtime(target_name);
  std::string why;
  KILN_CHECK(rt.available(&why), "kiln run --target ", target_name, ": ", why);
  target::LoadOptions options;
  options.device = Device{rt.device_type(), 0};
  return run_loaded(rt, rt.load({std::move(p), {}}, nullptr, options, nullptr), inputs, a);
}

std::vector<TensorData> run_loaded(target::Runtime& rt, const std::shared_ptr<target::LoadedPlan>& exe,
                                   const std::vector<TensorData>& inputs, const ParsedArgs& a) {
  target::LoadOptions options;
  options.device = Device{rt.device_type(), 0};
  const bool profile = a.has("--profile");
  // Switched on before the first call, which the medians then leave out (it loads and warms).
  if (profile) exe->set_profiling(true);
  const std::vector<TensorData> outputs = run_on_host(rt, *exe, inputs);
  const int repeat = repeat_count(a);
  if (repeat == 0) return outputs;
  auto check_same = [&](const std::vector<TensorData>& again, int run) {
    for (size_t k = 0; k < again.size(); ++k) {
      if (std::memcmp(again[k].data(), outputs[k].data(), static_cast<size_t>(again[k].numel() * dtype_size(again[k].dtype))) == 0)
        continue;
      double worst = 0;
      int64_t at = 0;
      for (int64_t e = 0; e < again[k].numel(); ++e) {
        const double d = std::fabs(element(again[k], e) - element(outputs[k], e));
        if (!(d <= worst)) worst = d, at = e;
      }
      fail("run ", run, " gave different output ", k, " than the first run (largest difference ", worst, " at element ",
           at, ")");
    }
  };
  std::vector<TensorData> on_device;
  std::vector<const TensorData*> ptrs;
  for (const TensorData& t : inputs) on_device.push_back(rt.move(t, options.device));
  for (const TensorData& t : on_device) ptrs.push_back(&t);
  if (profile) {
    // Each call timed kernel by kernel: the profile is the measurement, a run's total is not.
    for (int i = 0; i < repeat; ++i) check_same(run_on_host(rt, *exe, on_device), i + 2);
    exe->set_profiling(false);
    write_profile(*exe, rt.name(), a.get("--profile"));
    return outputs;
  }
  if (const std::optional<double> ms = rt.median_device_ms(options.device, [&] { exe->run(ptrs); }, repeat)) {
    std::cout << "compiled in " << exe->compile_seconds() * 1e3 << " ms; median run " << *ms << " ms of GPU time over "
              << repeat << " runs (after warm-up)\n";
    const std::vector<double> per = exe->last_kernel_ms();
    for (size_t k = 0; k < per.size() && k < exe->plan().kernels.size(); ++k)
      std::cout << "  " << exe->plan().kernels[k].name << ": " << per[k] << " ms (last run)\n";
    check_same(run_on_host(rt, *exe, on_device), repeat + 2);
    return outputs;
  }
  std::vector<double> ms;
  for (int i = 0; i < repeat; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<TensorData> again = run_on_host(rt, *exe, on_device);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    check_same(again, i + 2);
  }
  std::sort(ms.begin(), ms.end());
  std::cout << "compiled in " << exe->compile_seconds() * 1e3 << " ms; median run " << ms[ms.size() / 2] << " ms over "
            << ms.size() << " runs, all identical\n"
            << exe->compile_details();
  return outputs;
}

constexpr int64_t kShowValues = 8;

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Element `flat` (row-major) of any strided host tensor, as a double.
double element(const TensorData& t, int64_t flat) {
  int64_t offset = 0;
  for (size_t d = t.sizes.size(); d-- > 0;) {
    const int64_t size = t.sizes[d];
    offset += (flat % size) * t.strides[d];
    flat /= size;
  }
  const char* p = static_cast<const char*>(t.data()) + offset * dtype_size(t.dtype);
  switch (t.dtype) {
    case DType::bool_: return *reinterpret_cast<const uint8_t*>(p) != 0;
    case DType::i32: return *reinterpret_cast<const int32_t*>(p);
    case DType::i64: return static_cast<double>(*reinterpret_cast<const int64_t*>(p));
    case DType::f16: return half_bits_to_float(*reinterpret_cast<const uint16_t*>(p));
    case DType::bf16: return bf16_bits_to_float(*reinterpret_cast<const uint16_t*>(p));
    case DType::f32: return *reinterpret_cast<const float*>(p);
    case DType::f64: return *reinterpret_cast<const double*>(p);
  }
  return 0;
}

std::string format_value(DType dtype, double v) {
  if (dtype == DType::bool_) return v != 0 ? "true" : "false";
  std::ostringstream out;
  if (is_integral(dtype)) out << static_cast<int64_t>(v);
  else out << v;
  return out.str();
}

// A host tensor of the given dtype and sizes filled with seeded random values: standard
// normal for floating types (the randn of every Kiln target), 0..3 for integers, 0/1 for bool.
TensorData random_tensor(DType dtype, const std::vector<int64_t>& sizes, uint64_t seed) {
  TensorData t = TensorData::empty_host(dtype, sizes);
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t bits = splitmix64(seed ^ splitmix64(static_cast<uint64_t>(i)));
    switch (dtype) {
      case DType::bool_: t.data_as<uint8_t>()[i] = static_cast<uint8_t>(bits & 1); break;
      case DType::i32: t.data_as<int32_t>()[i] = static_cast<int32_t>(bits % 4); break;
      case DType::i64: t.data_as<int64_t>()[i] = static_cast<int64_t>(bits % 4); break;
      case DType::f16: t.data_as<uint16_t>()[i] = float_to_half_bits(eval::randn_at(seed, static_cast<uint64_t>(i))); break;
      case DType::bf16: t.data_as<uint16_t>()[i] = float_to_bf16_bits(eval::randn_at(seed, static_cast<uint64_t>(i))); break;
      case DType::f32: t.data_as<float>()[i] = eval::randn_at(seed, static_cast<uint64_t>(i)); break;
      case DType::f64: t.data_as<double>()[i] = eval::randn_at(seed, static_cast<uint64_t>(i)); break;
    }
  }
  return t;
}

// --out DIR: output k to DIR/out<k>.npy.
void write_outputs(const std::string& dir, const std::vector<TensorData>& outputs) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  KILN_CHECK(!ec, "cannot create output directory '", dir, "': ", ec.message());
  for (size_t k = 0; k < outputs.size(); ++k) {
    const std::string path = (std::filesystem::path(dir) / ("out" + std::to_string(k) + ".npy")).string();
    npy::save_npy(outputs[k], path);
    std::cout << "wrote " << path << "\n";
  }
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

const CommandSpec& run_spec() {
  static const CommandSpec spec{
      "run",
      "GRAPH.json|MODEL.onnx|PLAN.json",
      "Runs a graph file on a target and prints each output's type and first values.",
      "Inputs come from .npy files, one per graph input in order (their count, dtypes and sizes are\n"
      "checked against the graph: a symbolic size takes the file's size, within the symbol's range;\n"
      "an ONNX model's dynamic dims are imported at the files' sizes, 1 included),\n"
      "or are made up with --random at the symbols' example sizes: standard normal values for\n"
      "floating types, 0..3 for integers, 0/1 for bool. A bf16 input accepts a '<f4' file (numpy has\n"
      "no bfloat16), rounded to bf16. With --out DIR each output k is written to DIR/out<k>.npy\n"
      "(bf16 outputs as '<f4').\n"
      "--target cpu compiles the graph as the \"kiln\" backend does (passes, fusion, LLVM; cuda and vulkan:\n"
      "their codegen and runtime on device 0); --check\n"
      "then also runs it on the reference target and reports the largest relative error per output\n"
      "(exit status 1 when one exceeds the dtype's tolerance: 1e-5 f32/f64, 1e-2 f16/bf16, exact\n"
      "for integers and bool).\n"
      "A kernel plan file (kiln.plan JSON: `kiln show --save-plan`, debug_dir, or downloaded from the\n"
      "browser inspector) runs with --random on its target's runtime (--target, default the plan's):\n"
      "inputs at the symbols' example sizes, the values a graph run with the same seed makes.\n"
      "A plan is native code: it runs only when Kiln makes the same plan, byte for byte, from the\n"
      "graph, request and options the plan says made it (its origin), or when it is signed with\n"
      "KILN_CACHE_SECRET (plans written while it is set are signed); else an error names the first\n"
      "kernel or field that differs; --trust-plan runs it anyway (docs/plan-trust.md).\n"
      "A graph compiles through the compile caches, as kiln::compile does (KILN_CACHE_DIR,\n"
      "KILN_ASSERT_NO_COMPILE).\n"
      "--profile OUT.json times every kernel of the plan on each call, as KILN_LOGS=profile does (cpu:\n"
      "a steady clock around each kernel; cuda: events between launches, no CUDA graph; vulkan:\n"
      "timestamps), runs the plan 1 + N times (every run must give the same bits) and writes, per\n"
      "kernel in plan order, its median and minimum ms over the calls after the first and its share\n"
      "(docs/config.md describes the file); with a graph or a plan file, not on the reference target.\n",
      {{"--target", "NAME", "where to run it: reference (default), cpu, cuda, vulkan"},
       {"--inputs", "A.npy,B.npy", "the inputs, comma separated, in the graph's input order"},
       {"--random", "", "make random inputs instead"},
       {"--seed", "N", "seed for --random (default 0)"},
       {"--out", "DIR", "write the outputs to DIR/out0.npy, DIR/out1.npy, ..."},
       {"--check", "", "compare the target's outputs with the reference target's"},
       {"--repeat", "N", "(cpu, cuda, vulkan) run N more times: median time (vulkan, cuda: GPU time, after warm-up; vulkan: each kernel's), and every run must give the same bits"},
       {"--profile", "OUT.json", "(cpu, cuda, vulkan) time each kernel over 1 + N calls (N: --repeat, default 20) and write the medians as kiln.profile JSON"},
       {"--save-plan", "FILE", "(cpu, cuda, vulkan) write the kernel plan it runs as JSON (kiln.plan), e.g. to edit and run again"},
       {"--plan", "", "the argument is a kernel plan file (kiln run --plan PLAN.json; recognised without it too)"},
       {"--trust-plan", "", "run a plan file even when it is not the plan Kiln makes from its origin (a plan is native code: only for plans from someone you trust)"}}};
  return spec;
}

int cmd_run(std::span<char* const> args) {
  const CommandSpec& spec = run_spec();
  ParsedArgs a = parse_args(spec, args);
  if (a.help) {
    std::cout << command_help(spec);
    return 0;
  }
  const std::string target = a.has("--target") ? a.get("--target") : "reference";
  if (a.has("--inputs") && a.has("--random")) throw UsageError("kiln run: give either --inputs or --random, not both");
  if (a.has("--seed") && !a.has("--random")) throw UsageError("kiln run: --seed needs --random");
  uint64_t seed = 0;
  if (a.has("--seed")) {
    const std::string& s = a.get("--seed");
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), seed);
    if (ec != std::errc() || ptr != s.data() + s.size())
      throw UsageError("kiln run: --seed takes a non-negative integer, got '" + s + "'");
  }

  bool known = false;
  std::string list;
  for (const std::string& t : available_targets()) {
    known = known || t == target;
    list += (list.empty() ? "" : ", ") + t;
  }
  KILN_CHECK(known, "unknown target '", target, "' (available: ", list, ")");
  (void)repeat_count(a);  // a bad --repeat is refused before anything runs
  if (a.has("--profile")) check_profile_path(a.get("--profile"));

  {
    // A kernel plan file (from debug_dir, or made elsewhere, e.g. in the browser): the cpu runtime
    // runs it on random inputs at the symbols' example sizes.
    const std::string text = read_regular_file(a.positional[0], "graph or plan file");
    const bool is_plan = text.find("\"kiln.plan\"") != std::string::npos && text.find("\"kiln.graph\"") == std::string::npos;
    KILN_CHECK(is_plan || !a.has("--plan"), "kiln run --plan: ", a.positional[0], " is not a kernel plan file (kiln.plan JSON)");
    if (is_plan) {
      KILN_CHECK(a.has("--random") && !a.has("--check"), "kiln run: a plan file runs with --random (and no --check: ",
                 "the plan has no graph to compare with)");
      plan::KernelPlan p = plan::plan_from_json(text, a.positional[0]);
      if (!a.has("--trust-plan")) check_plan_may_run(p, a.positional[0]);
      // Without --target, on the target the plan was made for.
      const std::string plan_target = a.has("--target") ? target : p.target;
      check_profile_target(a, plan_target);
      std::vector<int64_t> examples;
      for (const SymbolInfo& si : p.symbols) examples.push_back(si.example);
      std::vector<TensorData> plan_inputs;
      for (const plan::PlanBuffer& b : p.buffers)
        if (b.kind == "input") {
          if (plan_inputs.size() <= static_cast<size_t>(b.index)) plan_inputs.resize(static_cast<size_t>(b.index) + 1);
          std::vector<int64_t> sizes;
          for (const SymInt& x : b.sizes) sizes.push_back(x.evaluate(examples));
          plan_inputs[static_cast<size_t>(b.index)] = random_tensor(b.dtype, sizes, splitmix64(seed + static_cast<uint64_t>(b.index)));
        }
      // KILN_LOGS=output_code shows what runs, as the backends do (the way to see a GPU's kernels).
      KILN_LOG(output_code, "kernel plan:\n", p.str(), "module:\n", p.module_source());
      const std::vector<TensorData> outs = run_plan(plan_target, std::move(p), plan_inputs, a);
      for (size_t k = 0; k < outs.size(); ++k) {
        std::cout << "output " << k << ": " << dtype_name(outs[k].dtype) << shape_str(static_shape(outs[k].sizes)) << "\n  [";
        for (int64_t i = 0; i < std::min(outs[k].numel(), kShowValues); ++i)
          std::cout << (i ? ", " : "") << format_value(outs[k].dtype, element(outs[k], i));
        std::cout << (outs[k].numel() > kShowValues ? ", ...]\n" : "]\n");
      }
      if (a.has("--out")) write_outputs(a.get("--out"), outs);
      return 0;
    }
  }
  check_profile_target(a, target);
  // Input files are read first: an ONNX model's dynamic dims take their sizes.
  std::vector<TensorData> files_read;
  std::vector<std::vector<int64_t>> file_sizes;
  const std::vector<std::string> files = a.has("--inputs") ? split_commas(a.get("--inputs")) : std::vector<std::string>{};
  for (const std::string& f : files) {
    files_read.push_back(npy::load_npy(f));
    file_sizes.push_back(files_read.back().sizes);
  }
  const Graph g = load_model_file(a.positional[0], file_sizes).graph;
  const size_t n_inputs = g.inputs().size();
  // The target's libraries start loading beside what follows (the inputs, the passes, the cache
  // lookup), as a compile's do; held until the run is over.
  std::shared_ptr<void> device_setup;
  if (target != "reference") {
    target::Runtime& rt = target::runtime(target);
    std::string why;
    if (rt.available(&why)) device_setup = kiln::start_device_setup(g, Device{rt.device_type(), 0});
  }

  std::vector<TensorData> inputs;
  std::vector<std::string> origins;
  if (a.has("--inputs")) {
    KILN_CHECK(files.size() == n_inputs, "the graph takes ", n_inputs, " input", n_inputs == 1 ? "" : "s", ", --inputs names ",
               files.size(), " file", files.size() == 1 ? "" : "s");
    for (size_t k = 0; k < files.size(); ++k) {
      TensorData t = std::move(files_read[k]);
      const DType want = g.node(g.inputs()[k]).meta.dtype;
      if (want == DType::bf16 && t.dtype == DType::f32) t = eval::convert(t, DType::bf16);
      inputs.push_back(std::move(t));
      origins.push_back(files[k]);
    }
  } else if (a.has("--random")) {
    for (size_t k = 0; k < n_inputs; ++k) {
      const TensorMeta& m = g.node(g.inputs()[k]).meta;
      inputs.push_back(random_tensor(m.dtype, shape_hints(m.sizes), splitmix64(seed + k)));
      origins.push_back("--random");
    }
  } else if (n_inputs > 0) {
    throw UsageError("kiln run: the graph takes " + std::to_string(n_inputs) + " input" + (n_inputs == 1 ? "" : "s") +
                     ": give --inputs A.npy,... or --random");
  }
  check_inputs(g, inputs, origins);

  for (size_t k = 0; k < inputs.size(); ++k) {
    std::cout << input_label(g, k) << ": " << dtype_name(inputs[k].dtype) << shape_str(static_shape(inputs[k].sizes))
              << " (" << origins[k] << ")\n";
  }
  std::vector<TensorData> outputs;
  if (target == "reference") {
    outputs = eval::run_graph(g, inputs);
  } else {
    // A target: the default passes, the scheduler and the target's codegen for device 0 (its
    // capabilities: the GPU's architecture, the Vulkan device's caps), then its runtime.
    target::Runtime& rt = target::runtime(target);
    std::string why;
    KILN_CHECK(rt.available(&why), "kiln run --target ", target, ": ", why);
    const Device device{rt.device_type(), 0};
    const Graph scheduled = passes::run_default_pipeline(g);
    // Through the compile caches as kiln::compile goes (memory, disk, remote; assert_no_compile).
    const std::shared_ptr<target::LoadedPlan> exe = kiln::cached_target_plan(scheduled, device);
    if (a.has("--save-plan")) {
      // A plan written for later carries what made it (checked when it is run as a file).
      plan::KernelPlan p = exe->plan();
      p.origin = target::plan_origin(format::to_json(scheduled, -1), rt.codegen_request(device));
      save_plan_if_asked(a, p);
    }
    outputs = run_loaded(rt, exe, inputs, a);
  }
  int bad = 0;
  if (a.has("--check")) {
    const std::vector<TensorData> want = eval::run_graph(g, inputs);
    for (size_t k = 0; k < outputs.size(); ++k) {
      const TensorData& t = outputs[k];
      double num = 0, den = 0, worst = 0;
      for (int64_t i = 0; i < t.numel(); ++i) {
        const double x = element(t, i), y = element(want[k], i);
        // NaN where the reference has NaN and the same infinity where it has one agree; the
        // relative L2 error is over the elements finite on both sides.
        if (std::isnan(x) != std::isnan(y) || ((std::isinf(x) || std::isinf(y)) && x != y)) worst = INFINITY;
        if (!std::isfinite(x) || !std::isfinite(y)) continue;
        num += (x - y) * (x - y);
        den += y * y;
        worst = std::max(worst, std::fabs(x - y));
      }
      const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
      const double tol = is_integral(t.dtype) || t.dtype == DType::bool_ ? 0.0
                         : (t.dtype == DType::f16 || t.dtype == DType::bf16) ? 1e-2 : 1e-5;
      const bool ok = rel <= tol && !std::isinf(worst);
      bad += ok ? 0 : 1;
      std::cout << "check output " << k << ": relative L2 error " << rel << ", max abs error " << worst
                << (ok ? " (ok)" : " (OUTSIDE TOLERANCE)") << "\n";
    }
  }

  for (size_t k = 0; k < outputs.size(); ++k) {
    const TensorData& t = outputs[k];
    const int64_t n = t.numel();
    std::cout << "output " << k << " (node " << g.outputs()[k] << "): " << dtype_name(t.dtype)
              << shape_str(static_shape(t.sizes)) << "\n  [";
    for (int64_t i = 0; i < std::min(n, kShowValues); ++i) std::cout << (i ? ", " : "") << format_value(t.dtype, element(t, i));
    std::cout << (n > kShowValues ? ", ...]" : "]");
    if (n > kShowValues) std::cout << " (first " << kShowValues << " of " << n << ")";
    std::cout << "\n";
  }
  if (a.has("--out")) write_outputs(a.get("--out"), outputs);
  return bad ? 1 : 0;
}

}  // namespace kiln::cli
