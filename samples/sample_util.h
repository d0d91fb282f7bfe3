// What the samples share: medians, timing a call, and the --device option.
#pragma once

#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace kiln::samples {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

template <class F>
double time_ms(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// --device cpu (default) or --device cuda (cuda:0): where the compiled function's inputs live,
// and so which target compiles it. Exits with the reason when there is no such device.
inline Device device_from_args(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i], v;
    if (a.rfind("--device=", 0) == 0) v = a.substr(9);
    else if (a == "--device" && i + 1 < argc) v = argv[++i];
    else v = "?";
    if (v == "cpu") return Device::cpu();
    if (v == "cuda" || v == "cuda:0") {
      try {
        (void)ones({1}).to(Device::cuda(0));  // a device to run on, or why there is none
      } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
        std::exit(1);
      }
      return Device::cuda(0);
    }
    std::fprintf(stderr, "usage: %s [--device cpu|cuda]\n", argv[0]);
    std::exit(2);
  }
  return Device::cpu();
}

}  // namespace kiln::samples
