// kiln bench: the benchmark suite of shared/bench/suite.md on the CPU. Each workload runs
// through Kiln (compiled in each requested mode, and eager) and, in the same process, through
// hand-written fused loops (the practical roofline) and Eigen where it expresses the
// workload. Every implementation is checked against Kiln's reference result before it is
// timed. Prints a table of medians and ratios; --json writes suite.md's JSON lines.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "../bench/suite.h"
#include "anchor.h"
#include "commands.h"
#include "kiln/graph/error.h"
#include "kiln/target/target.h"

namespace kiln::cli {

namespace {

using bench::Tensors;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// What every timer below shares: the median of `reps` calls, each measured by `one_call` (which
// makes the call and returns its time in ms), or, for launch-bound workloads, host wall time per
// call over 2000 back-to-back calls ending with `sync`.
template <class F, class One, class Sync>
double median_or_per_launch(F&& call, int reps, bool launch_bound, One&& one_call, Sync&& sync) {
  if (launch_bound) {
    constexpr int kCalls = 2000;
    const auto t = Clock::now();
    for (int i = 0; i < kCalls; ++i) call();
    sync();
    return seconds_since(t) * 1e3 / kCalls;
  }
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) times.push_back(one_call());
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Median wall time of `reps` calls after 3 warm-ups, or, for launch-bound workloads, the mean
// of 2000 back-to-back calls.
template <class F>
double time_ms(F&& call, int reps, bool launch_bound) {
  for (int i = 0; i < 3; ++i) call();
  return median_or_per_launch(
      call, reps, launch_bound,
      [&] {
        const auto t = Clock::now();
        call();
        return seconds_since(t) * 1e3;
      },
      [] {});
}

// Relative L2 error of `got` against `want`, over every output.
double rel_error(const std::vector<std::vector<double>>& got, const std::vector<std::vector<double>>& want) {
  double diff = 0, norm = 0;
  for (size_t o = 0; o < want.size(); ++o) {
    KILN_CHECK(got.at(o).size() == want[o].size(), "bench: output ", o, " has ", got[o].size(), " elements, expected ",
               want[o].size());
    for (size_t i = 0; i < want[o].size(); ++i) {
      diff += (got[o][i] - want[o][i]) * (got[o][i] - want[o][i]);
      norm += want[o][i] * want[o][i];
    }
  }
  return norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

std::vector<std::vector<double>> values(const Tensors& ts) {
  std::vector<std::vector<double>> out;
  for (const Tensor& t : ts) out.push_back(t.to_vector<double>());
  return out;
}

int64_t bytes_of(const Tensors& ts) {
  int64_t total = 0;
  for (const Tensor& t : ts) total += t.numel().hint() * dtype_size(t.dtype());
  return total;
}

// On a device: the device time of each call (device events on CUDA's stream, timestamps around
// Vulkan's command buffers), the median of `reps` (at least 30) after the target's warm-up;
// launch-bound workloads: host wall time per call over 2000 back-to-back calls and one
// synchronisation, after the same warm-up. Host wall time where the target has no device timers.
template <class F>
double time_ms_device(target::Runtime& rt, Device d, F&& call, int reps, bool launch_bound) {
  if (!launch_bound) {
    if (const std::optional<double> ms = rt.median_device_ms(d, call, std::max(reps, 30))) return *ms;
    return time_ms(call, reps, false);
  }
  rt.median_device_ms(d, call, 1);  // warm-up (clocks up, lazily loaded kernels loaded)
  return median_or_per_launch(call, 1, true, [] { return 0.0; }, [&] { rt.synchronize(d); });
}

struct Result {
  std::string workload, impl;
  int64_t min_bytes = 0;
  double median_ms = 0;
  double compile_s = -1, compile_again_s = -1;
  double max_rel_err = 0;
  double gbps() const { return min_bytes / (median_ms * 1e-3) / 1e9; }
};

std::string json_line(const Result& r, const std::string& device) {
  std::ostringstream out;
  out.precision(6);
  out << "{\"workload\": \"" << r.workload << "\", \"device\": \"" << device << "\", \"impl\": \"" << r.impl
      << "\", \"min_bytes\": " << r.min_bytes << ", \"median_ms\": " << r.median_ms
      << ", \"gbps\": " << r.gbps();
  if (r.compile_s >= 0) out << ", \"compile_s\": " << r.compile_s << ", \"compile_again_s\": " << r.compile_again_s;
  out << ", \"max_rel_err\": " << r.max_rel_err << "}";
  return out.str();
}

double tolerance(const Tensors& outputs) {
  for (const Tensor& t : outputs)
    if (t.dtype() == DType::bf16 || t.dtype() == DType::f16) return 1e-2;
  return 1e-5;
}

// The CPU targets of the scheduler issue, checked on this run's results (ratios of medians
// measured one after the other in this process): memory-bound workloads at >= 0.9x the
// hand-written fused loops, compiled >= 3x Kiln eager on the normalisations, faster than Eigen
// wherever Eigen expresses the workload, cold compile <= 50 ms. Lines only for what ran.
void print_target_checks(const std::vector<Result>& all) {
  auto find = [&](const std::string& w, const std::string& impl) -> const Result* {
    for (const Result& r : all)
      if (r.workload == w && r.impl == impl) return &r;
    return nullptr;
  };
  std::vector<std::string> lines;
  auto check = [&](const std::string& what, const std::string& w, double value, double target, const char* unit,
                   bool higher_is_better) {
    const bool ok = higher_is_better ? value >= target : value <= target;
    char buf[160];
    std::snprintf(buf, sizeof buf, "  %-34s %-15s %8.3g%s %s %g%s  %s", what.c_str(), w.c_str(), value, unit,
                  higher_is_better ? ">=" : "<=", target, unit, ok ? "ok" : "MISSED");
    lines.emplace_back(buf);
  };
  for (const char* w : {"sincos", "gelu_bias", "softmax", "layernorm", "rmsnorm", "add_layernorm", "sum_all", "col_sum"})
    if (const Result *k = find(w, "kiln_default"), *h = find(w, "handwritten_fused"); k && h)
      check("default vs hand-written fused", w, h->median_ms / k->median_ms, 0.9, "x", true);
  for (const char* w : {"softmax", "layernorm", "rmsnorm", "add_layernorm"})
    if (const Result *k = find(w, "kiln_default"), *e = find(w, "kiln_eager"); k && e)
      check("default vs Kiln eager", w, e->median_ms / k->median_ms, 3.0, "x", true);
  for (const Result& r : all)
    if (r.impl == "eigen")
      if (const Result* k = find(r.workload, "kiln_default"))
        check("default vs Eigen", r.workload, r.median_ms / k->median_ms, 1.0, "x", true);
  for (const Result& r : all)
    if (r.impl == "kiln_default" && r.compile_s >= 0)
      check("cold compile", r.workload, r.compile_s * 1e3, 50, " ms", false);
  if (lines.empty()) return;
  std::printf("\ntargets (CPU, ratios of this run's medians):\n");
  for (const std::string& l : lines) std::printf("%s\n", l.c_str());
}

}  // namespace

const CommandSpec& bench_spec() {
  static const CommandSpec spec{
      "bench",
      "",
      "Run the benchmark suite (shared/bench/suite.md) through Kiln and reference implementations.",
      "Each workload runs through Kiln compiled in each mode of --modes ('eager' runs the ops\n"
      "one by one without compiling), and on the CPU also through hand-written fused loops\n"
      "(-O3 -march=native, OpenMP) and Eigen's Tensor module where it expresses the workload.\n"
      "Every result is checked against Kiln's reference target before it is timed (relative L2\n"
      "error under 1e-5 for f32, 1e-2 for bf16). Times are medians of --reps calls after 3\n"
      "warm-ups (small_chain: the mean of 2000 back-to-back calls). compile_s is the first\n"
      "call's time minus the median call time, for a fresh compiled function of a graph this\n"
      "process has not compiled (cold); compile_again_s (\"again s\") the same for a second\n"
      "fresh compiled function of the same code in the same process (an in-memory plan hit).",
      {{"--device", "DEVICE", "cpu (default); cuda and vulkan need their targets"},
       {"--small", "", "the suite's CPU sizes"},
       {"--only", "LIST", "comma-separated workloads (default: all)"},
       {"--modes", "LIST", "Kiln modes, comma-separated (default: default,eager; on cuda eager runs first)"},
       {"--reps", "N", "timed calls per implementation (default 10)"},
       {"--no-references", "", "skip the hand-written and Eigen implementations"},
       {"--json", "FILE", "also write one JSON object per result to FILE"},
       {"--anchor", "SCRIPT", "then run SCRIPT (shared/bench/torch_anchor.py) with python3 on the same\n"
                              "device and workloads, and print one table of both and the target's goals"},
       {"--anchor-args", "ARGS", "more options for the anchor script (e.g. \"--modes eager,default\")"}}};
  return spec;
}

int cmd_bench(std::span<char* const> args) {
  const ParsedArgs a = parse_args(bench_spec(), args);
  if (a.help) {
    std::cout << command_help(bench_spec());
    return 0;
  }
  const std::string device = a.has("--device") ? a.get("--device") : "cpu";
  // The device's target (the registry's runtime of that name) and its device 0.
  target::ensure_builtin_targets();
  target::Runtime* rt = target::find_runtime(device);
  if (!rt) {
    std::string names;
    for (const std::string& n : target::runtime_names()) names += (names.empty() ? "" : ", ") + n;
    fail("bench: device '", device, "' is not available in this build (", names, " are)");
  }
  const Device dev{rt->device_type(), 0};
  const bool on_device = dev.type != DeviceType::cpu;
  if (on_device) {
    std::string why;
    KILN_CHECK(rt->available(&why), "bench --device ", device, ": ", why);
  }
  // Cold compiles are measured here, so the on-disk compile cache (which would serve graphs an
  // earlier run compiled) is off; `kiln cache bench` measures the caches.
  config::set("cache.plan_cache", false);
  const bool small = a.has("--small");
  const auto only = a.has("--only") ? split_list(a.get("--only")) : std::vector<std::string>{};
  // Eager where the target runs eager ops (not on Vulkan tensors yet).
  auto modes = split_list(a.has("--modes") ? a.get("--modes") : (rt->eager_policy().enabled ? "default,eager" : "default"));
  // On a device eager runs first, as the anchor (torch_anchor.py) runs eager before it compiles: a
  // library's first use in the process (cuBLASLt's handle, heuristics and lazily loaded
  // kernels, ~0.1 s) then lands in the eager run on both sides, not in a cold compile.
  if (on_device) std::stable_partition(modes.begin(), modes.end(), [](const std::string& m) { return m == "eager"; });
  int reps = 10;
  if (a.has("--reps")) {
    reps = std::atoi(a.get("--reps").c_str());
    if (reps < 1) throw UsageError("kiln bench: --reps must be a positive integer");
  }
  const bool references = !a.has("--no-references");
  std::ofstream json;
  if (a.has("--json")) {
    json.open(a.get("--json"));
    KILN_CHECK(json.good(), "bench: cannot write ", a.get("--json"));
  }
  for (const std::string& name : only) {
    const auto& s = bench::suite();
    KILN_CHECK(std::any_of(s.begin(), s.end(), [&](const bench::Workload& w) { return w.name == name; }),
               "bench: unknown workload '", name, "'");
  }

  double copy = -1;  // the device's copy bandwidth, GB/s (-1: not measured)
  if (on_device) {
    const std::optional<target::Bandwidth> bw = rt->copy_gbps(dev);
    const std::vector<std::string> lines = rt->device_lines();
    copy = bw ? bw->gbps : -1;
    std::printf("device: %s; device-to-device copy %.0f GB/s (read + write)\n", lines.empty() ? device.c_str() : lines[0].c_str(),
                copy);
    if (bw && json.is_open())
      json << "{\"workload\": \"d2d_copy\", \"device\": \"" << device << "\", \"impl\": \"" << bw->how
           << "\", \"gbps\": " << copy << "}\n";
  }
  std::printf("%-15s %-22s %10s %9s %9s %10s %9s %10s\n", "workload", "impl", "median ms", "GB/s", "vs hand",
              "compile s", "again s", "rel err");
  int failures = 0;
  std::vector<Result> all;
  for (const bench::Workload& w : bench::suite()) {
    if (!only.empty() && std::find(only.begin(), only.end(), w.name) == only.end()) continue;
    const Tensors host_inputs = w.make_inputs(small);
    Tensors inputs = host_inputs;
    if (on_device)
      for (Tensor& t : inputs) t = t.to(dev);
    Tensors expected;
    if (on_device && (w.name == "mlp_bf16" || w.name == "attention_bf16")) {
      // The same code eager on the CPU (compiled single-op kernels and OpenBLAS: the reference
      // interpreter would take minutes over the GPU sizes' matmuls).
      expected = w.eager(host_inputs);
    } else {
      // The reference target, op by op (eager would otherwise run compiled CPU kernels).
      config::Patch reference_only({{"cpu.eager_compile_threshold", int64_t{-1}}});
      expected = w.eager(host_inputs);
    }
    const auto want = values(expected);
    const int64_t min_bytes = bytes_of(inputs) + bytes_of(expected);
    const double tol = tolerance(expected);
    std::vector<Result> results;

    for (const std::string& mode : modes) {
      Result r{w.name, "kiln_" + mode, min_bytes};
      std::replace(r.impl.begin(), r.impl.end(), '-', '_');
      std::function<Tensors(const Tensors&)> fn;
      std::function<Tensors(const Tensors&)> again;
      if (mode == "eager") {
        fn = w.eager;
      } else {
        CompileOptions options;
        options.mode = mode;
        fn = w.compiled(options);
        again = w.compiled(options);
      }
      // Eager ran first (above) and compiled its single-op kernels: a workload of one op would
      // find its kernel's image in the runtime's process cache. Cold means the compiler runs.
      if (on_device && mode != "eager") rt->forget_compiled();
      auto t0 = Clock::now();
      // The cold compile: the first of this graph and mode in the process, so no cache holds it
      // (the on-disk cache is off, above; NVRTC's images from earlier modes are forgotten). The
      // second compiled function below compiles the same graph again: an in-memory hit.
      Tensors got = fn(inputs);
      const double first_s = seconds_since(t0);
      r.max_rel_err = rel_error(values(got), want);
      if (on_device)
        r.median_ms = time_ms_device(*rt, dev, [&] { fn(inputs); }, reps, w.launch_bound);
      else
        r.median_ms = time_ms([&] { fn(inputs); }, reps, w.launch_bound);
      if (again) {
        t0 = Clock::now();
        again(inputs);
        r.compile_s = std::max(0.0, first_s - r.median_ms * 1e-3);
        r.compile_again_s = std::max(0.0, seconds_since(t0) - r.median_ms * 1e-3);
      }
      results.push_back(r);
    }

    const bool f32 = std::all_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.dtype() == DType::f32; });
    if (references && f32 && !on_device) {
      std::vector<std::vector<int64_t>> shapes;
      std::vector<const float*> in;
      for (const Tensor& t : inputs) {
        shapes.push_back(shape_hints(t.shape()));
        in.push_back(t.contiguous().data().data_as<float>());
      }
      for (const auto& [impl, host] : {std::pair{"handwritten_fused", bench::handwritten_impl(w.name, shapes)},
                                       std::pair{"eigen", bench::eigen_impl(w.name, shapes)}}) {
        if (!host) continue;
        Tensors outs;
        std::vector<float*> out;
        for (const Tensor& e : expected) {
          outs.push_back(zeros(e.shape()));
          out.push_back(outs.back().data().data_as<float>());
        }
        Result r{w.name, impl, min_bytes};
        host(in, out);
        r.max_rel_err = rel_error(values(outs), want);
        r.median_ms = time_ms([&] { host(in, out); }, reps, w.launch_bound);
        results.push_back(r);
      }
    }

    double hand_ms = 0;
    for (const Result& r : results)
      if (r.impl == "handwritten_fused") hand_ms = r.median_ms;
    for (const Result& r : results) {
      const bool ok = r.max_rel_err <= tol;
      failures += ok ? 0 : 1;
      std::printf("%-15s %-22s %10.3f %9.2f %9s %10s %9s %10.2g%s\n", r.workload.c_str(), r.impl.c_str(),
                  r.median_ms, r.gbps(),
                  hand_ms > 0 ? (std::to_string(hand_ms / r.median_ms).substr(0, 5) + "x").c_str() : "-",
                  r.compile_s >= 0 ? std::to_string(r.compile_s).substr(0, 7).c_str() : "-",
                  r.compile_again_s >= 0 ? std::to_string(r.compile_again_s).substr(0, 7).c_str() : "-",
                  r.max_rel_err, ok ? "" : "  WRONG");
      if (json.is_open()) json << json_line(r, device) << "\n";
    }
    all.insert(all.end(), results.begin(), results.end());
    std::fflush(stdout);
  }
  if (device == "cpu") print_target_checks(all);  // the targets are the CPU's
  if (a.has("--anchor")) {
    std::vector<BenchRow> rows;
    for (const Result& r : all)
      rows.push_back(BenchRow{r.workload, r.impl, r.median_ms, r.gbps(), r.compile_s, ""});
    const std::vector<BenchRow> anchor = run_anchor(a.get("--anchor"), device, small, only,
                                                    a.has("--anchor-args") ? a.get("--anchor-args") : "",
                                                    json.is_open() ? &json : nullptr);
    print_anchor_table(rows, anchor, copy, device);
  }
  if (failures) std::fprintf(stderr, "kiln bench: %d result(s) outside tolerance\n", failures);
  return failures ? 1 : 0;
}

}  // namespace kiln::cli
