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

std::string shape_text(const SymShape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + s[i].str();
  return out;
}

// What a kernel computes, in a few words: a gemm's m x n x k (batch, dtype, epilogue), a
// convolution's shapes, a reference kernel's op, a generated kernel's name and extent.
std::string what_of(const PlanKernel& k) {
  if (k.gemm) {
    const PlanGemm& g = *k.gemm;
    std::string s = k.name + ": gemm " + g.m.str() + "x" + g.n.str() + "x" + g.k.str();
    if (!g.batch.empty()) s += " batch " + shape_text(g.batch);
    s += " " + std::string(dtype_name(g.dtype));
    if (!g.epilogue.empty()) s += " +" + g.epilogue;
    if (!k.source.empty()) s += ", then an epilogue kernel";
    return s;
  }
  if (k.convolution) {
    const PlanConvolution& c = *k.convolution;
    SymShape w;
    for (int64_t d : c.w_sizes) w.push_back(SymInt(d));
    std::string s = k.name + ": conv x " + shape_text(c.x_sizes) + " w " + shape_text(w) + " " +
                    std::string(dtype_name(c.dtype));
    if (!c.strides.empty() && c.strides[0] != 1) s += " stride " + std::to_string(c.strides[0]);
    if (c.groups != 1) s += " groups " + std::to_string(c.groups);
    return s;
  }
  if (k.kind == "reference") return k.name + ": " + std::string(op_name(k.op)) + " on the host";
  return k.name + " over " + k.parallel_extent.str();
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
    std::snprintf(line, sizeof line, "%8.3f %5.1f%%  %-20s  %s\n", m, share(m), kind_of(pk).c_str(), what_of(pk).c_str());
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
