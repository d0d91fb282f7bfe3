// KernelProfile: see profile.h.
#include "kiln/plan/profile.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "kiln/graph/error.h"

namespace kiln::plan {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// "matmul (library)" for a gemm kernel (a library call, then its generated epilogue if any).
std::string kind_of(const PlanKernel& k) {
  if (k.gemm) return k.kind + " (library)";
  return k.kind;
}

}  // namespace

void KernelProfile::add_call(std::span<const double> ms) {
  KILN_CHECK(ms.size() == ms_.size(), "kernel profile: a call timed ", ms.size(), " kernels; the plan has ", ms_.size());
  for (size_t k = 0; k < ms.size(); ++k) ms_[k].push_back(ms[k]);
  ++calls_;
}

std::string KernelProfile::report(const KernelPlan& plan, const std::string& device, size_t top) const {
  KILN_CHECK(plan.kernels.size() == ms_.size(), "kernel profile: the plan has ", plan.kernels.size(),
             " kernels; the profile ", ms_.size());
  // The first call loads modules and warms caches: leave it out once there are others.
  const size_t skip = calls_ > 1 ? 1 : 0;
  std::vector<std::pair<double, size_t>> by_time;
  double total = 0;
  std::map<std::string, std::pair<double, int64_t>> by_kind;
  for (size_t k = 0; k < ms_.size(); ++k) {
    const double m = median(std::vector<double>(ms_[k].begin() + static_cast<std::ptrdiff_t>(skip), ms_[k].end()));
    by_time.emplace_back(m, k);
    total += m;
    auto& [kms, n] = by_kind[kind_of(plan.kernels[k])];
    kms += m;
    ++n;
  }
  std::stable_sort(by_time.begin(), by_time.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  char line[512];
  std::string out;
  std::snprintf(line, sizeof line, "%zu kernels on %s, %.3f ms in all (sum of per-kernel medians over calls %zu-%lld)\n",
                ms_.size(), device.c_str(), total, skip + 1, static_cast<long long>(calls_));
  out += line;
  out += "      ms  share  kind                  kernel\n";
  auto share = [&](double m) { return total > 0 ? 100.0 * m / total : 0.0; };
  double rest = 0;
  size_t rest_n = 0;
  for (size_t i = 0; i < by_time.size(); ++i) {
    const auto [m, k] = by_time[i];
    if (i >= top) {
      rest += m;
      ++rest_n;
      continue;
    }
    const PlanKernel& pk = plan.kernels[k];
    std::snprintf(line, sizeof line, "%8.3f %5.1f%%  %-20s  %s\n", m, share(m), kind_of(pk).c_str(), pk.name.c_str());
    out += line;
  }
  if (rest_n) {
    std::snprintf(line, sizeof line, "%8.3f %5.1f%%  (%zu more kernels)\n", rest, share(rest), rest_n);
    out += line;
  }
  out += "by kind:\n";
  std::vector<std::pair<double, std::string>> kinds;
  for (const auto& [name, v] : by_kind) kinds.emplace_back(v.first, name);
  std::stable_sort(kinds.begin(), kinds.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [m, name] : kinds) {
    std::snprintf(line, sizeof line, "%8.3f %5.1f%%  %-20s  %lld kernels\n", m, share(m), name.c_str(),
                  static_cast<long long>(by_kind[name].second));
    out += line;
  }
  return out;
}

}  // namespace kiln::plan
