// What the model samples (samples/models: gpt2, llama, bert, resnet) share: one driver that
// checks a kiln::nn model compiled against its eager run, or against PyTorch's output for the
// same weights, and times it. A sample describes its model (how to make one from a seeded
// nn::Init, load one from a state dict, and an example input) and hands the rest to run():
//
//   <sample> [--device cpu|cuda|vulkan] [--config <name>] [--batch B] [--seq T | --size S]
//            [--weights W.safetensors --input x.npy --expect y.npy [--expect-f32 y32.npy]]
//            [--autocast bf16|f16]
//
// Without --weights: a model from a seeded nn::Init, made and run eagerly on the CPU (the
// reference), goes to the device through its state dict in a .safetensors file and passes to
// kiln::compile as a pytree (its tensors are graph inputs); the compiled output is checked
// against the eager one, a second model with other weights must be served by the same compiled
// entry (one compile) with its own eager output, and compiled and eager calls on the device are
// timed side by side. With
// --weights/--input/--expect (written by tools/models/model_reference.py from torch's model) the
// compiled output is checked against torch's (relative L2) and compiled calls are timed. Exits
// non-zero when a check fails. --autocast runs every call (compiled, eager, and torch's with
// model_reference.py --autocast) under kiln::autocast: matmuls in bf16 or f16, reductions and
// norms in f32; the tolerances widen to that precision's, and with --expect-f32 (torch's f32
// output) to how far torch's own low-precision output is from it.
#pragma once

#include <kiln/kiln.h>
#include <kiln/npy/npy.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "../sample_util.h"

namespace kiln::samples {

// The value of `--name V` (or `--name=V`), else `fallback`.
inline std::string flag(int argc, char** argv, const std::string& name, const std::string& fallback = "") {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == name && i + 1 < argc) return argv[i + 1];
    if (a.rfind(name + "=", 0) == 0) return a.substr(name.size() + 1);
  }
  return fallback;
}

inline int64_t int_flag(int argc, char** argv, const std::string& name, int64_t fallback) {
  const std::string v = flag(argc, argv, name);
  return v.empty() ? fallback : std::stoll(v);
}

// ||got - want|| / ||want|| over every element (on the host, in double).
inline double relative_l2(const Tensor& got, const Tensor& want) {
  const std::vector<double> a = got.to(Device::cpu()).to_vector<double>(), b = want.to(Device::cpu()).to_vector<double>();
  if (a.size() != b.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
  return std::sqrt(num / (den > 0 ? den : 1));
}

// Token ids [batch, seq] spread over the vocabulary (the token models' example input).
inline Tensor example_ids(int64_t batch, int64_t seq, int64_t vocab, Device device) {
  std::vector<int64_t> ids(static_cast<size_t>(batch * seq));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 37 + 11) % static_cast<size_t>(vocab));
  return from_vector(ids, {batch, seq}, device);
}

// A model's description for run(). Model has operator()(const Tensor&) -> Tensor and
// state_dict() -> StateDict, and is a pytree (KILN_PYTREE).
template <class Model>
struct ModelSample {
  std::string name;     // what the output lines call it
  std::string summary;  // its configuration, one line
  std::function<Model(nn::Init&)> make;
  std::function<Model(const StateDict&)> load;
  std::function<Tensor(Device)> example_input;  // the input without --input
  DType input_dtype = DType::f32;               // what --input's array is converted to
  double eager_tolerance = 1e-5;                // compiled against eager (relative L2)
  double torch_tolerance = 1e-4;                // compiled against torch's output
};

// f(), or, where it throws kiln::Error (a bad option's value), "<program>: <message>" on stderr
// and exit status 2.
template <class F>
auto or_exit(const char* program, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    std::exit(2);
  }
}

inline Device sample_device(int argc, char** argv) {
  const std::string d = flag(argc, argv, "--device", "cpu");
  if (d == "cpu") return Device::cpu();
  const Device device = parse_device(d == "cuda" || d == "vulkan" ? d + ":0" : d);
  try {
    (void)ones({1}).to(device);  // a device to run on, or why there is none
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    std::exit(2);
  }
  return device;
}

template <class Model>
int run(ModelSample<Model> sample, int argc, char** argv) {
  const Device device = sample_device(argc, argv);
  const std::string low = flag(argc, argv, "--autocast");
  std::optional<autocast> mixed;
  if (!low.empty()) {
    mixed.emplace(parse_dtype(low));
    sample.eager_tolerance = sample.torch_tolerance = 3e-2;  // bf16 keeps 8 bits, f16 11
    sample.summary += ", autocast(" + low + ")";
  }
  auto forward = kiln::compile([](const Model& m, const Tensor& x) { return m(x); });
  bool ok = true;
  auto check = [&](const char* what, double err, double tolerance) {
    std::printf("%-52s relative L2 %.3g (at most %.0e)\n", what, err, tolerance);
    ok = ok && err <= tolerance;
  };
  std::printf("%s: %s on %s\n", sample.name.c_str(), sample.summary.c_str(), device.str().c_str());

  const std::string weights = flag(argc, argv, "--weights");
  if (!weights.empty()) {
    const Model m = sample.load(load_state_dict(weights, device));
    const Tensor x = Tensor::from_data(npy::load_npy(flag(argc, argv, "--input"))).to(sample.input_dtype).to(device);
    const Tensor expect = Tensor::from_data(npy::load_npy(flag(argc, argv, "--expect")));
    Tensor y;
    const double first = time_ms([&] { y = forward(m, x); synchronize(device); });
    std::printf("first call (trace, compile, run): %.1f ms\n", first);
    // With --autocast and torch's f32 output: low precision moves a deep model's output by more
    // than the tolerance (torch's own bf16 ResNet-50 is 12% from its f32 one), so Kiln passes
    // when it stays as close to torch's low-precision output and to the f32 one as torch's
    // low-precision output is to the f32 one (within 1.5x).
    double tolerance = sample.torch_tolerance, f32_tolerance = 0;
    Tensor expect_f32;
    const std::string f32_path = flag(argc, argv, "--expect-f32");
    if (mixed && !f32_path.empty()) {
      expect_f32 = Tensor::from_data(npy::load_npy(f32_path));
      const double torch_drift = relative_l2(expect, expect_f32);
      std::printf("%-52s relative L2 %.3g\n", "(torch's output against torch's in f32)", torch_drift);
      tolerance = std::max(tolerance, torch_drift);
      f32_tolerance = std::max(sample.torch_tolerance, 1.5 * torch_drift);
    }
    check("compiled output against torch's", relative_l2(y, expect), tolerance);
    if (expect_f32.defined()) check("compiled output against torch's in f32", relative_l2(y, expect_f32), f32_tolerance);
    std::vector<double> compiled_ms;
    for (int r = 0; r < 3; ++r) forward(m, x);
    synchronize(device);
    for (int r = 0; r < 20; ++r) compiled_ms.push_back(time_ms([&] { forward(m, x); synchronize(device); }));
    std::printf("median per call: compiled %.3f ms\n", median(compiled_ms));
  } else {
    // Models made and run eagerly on the CPU (the reference), moved to the device through their
    // .safetensors files.
    auto to_device = [&](const Model& m) {
      const std::string path = (std::filesystem::temp_directory_path() /
                                ("kiln_sample_" + sample.name + "_" + std::to_string(::getpid()) + ".safetensors"))
                                   .string();
      save_state_dict(m.state_dict(), path, {{"format", "pt"}});
      Model loaded = sample.load(load_state_dict(path, device));
      std::filesystem::remove(path);
      return loaded;
    };
    nn::Init init(0);
    const Model m_cpu = sample.make(init), m = to_device(m_cpu);
    const Tensor x_cpu = sample.example_input(Device::cpu()), x = x_cpu.to(device);
    Tensor compiled;
    const double first = time_ms([&] { compiled = forward(m, x); synchronize(device); });
    std::printf("first call (trace, compile, run): %.1f ms\n", first);
    check("compiled output against eager on the cpu", relative_l2(compiled, m_cpu(x_cpu)), sample.eager_tolerance);
    if (mixed) {
      const autocast f32(DType::bf16, false);
      std::printf("%-52s relative L2 %.3g\n", "(compiled output against eager without autocast)",
                  relative_l2(compiled, m_cpu(x_cpu)));
    }

    // A second model (other weights): the same compiled entry serves it, its weights are inputs.
    const Model other_cpu = sample.make(init), other = to_device(other_cpu);
    check("a second model's output (same compiled entry)", relative_l2(forward(other, x), other_cpu(x_cpu)),
          sample.eager_tolerance);
    const CompileStats stats = forward.stats();
    std::printf("compiles %lld, cache hits %lld\n", static_cast<long long>(stats.compiles),
                static_cast<long long>(stats.cache_hits));
    ok = ok && stats.compiles == 1;

    std::vector<double> compiled_ms, eager_ms;
    for (int r = 0; r < 10; ++r) compiled_ms.push_back(time_ms([&] { forward(m, x); synchronize(device); }));
    try {
      for (int r = 0; r < 10; ++r) eager_ms.push_back(time_ms([&] { m(x); synchronize(device); }));
    } catch (const Error& e) {
      std::printf("(no eager timing: %s)\n", e.what());
    }
    if (eager_ms.empty()) std::printf("median per call: compiled %.3f ms\n", median(compiled_ms));
    else std::printf("median per call: compiled %.3f ms, eager %.3f ms\n", median(compiled_ms), median(eager_ms));
  }
  std::printf("%s: %s\n", sample.name.c_str(), ok ? "all checks passed" : "a check FAILED");
  return ok ? 0 : 1;
}

}  // namespace kiln::samples
