// KernelProfile: see profile.h.
#include "kiln/plan/profile.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "kiln/graph/error.h"

namespace kiln::plan {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A gemm kernel's source is the product itself where it has a tile (a generated shader), else
// the epilogue after the library's product.
bool generated_gemm(const PlanKernel& k) { return k.gemm && k.gemm->tile[0] > 0; }

// "matmul (library)" for a library gemm kernel (the call, then its generated epilogue if any).
std::string kind_of(const PlanKernel& k) {
  if (k.gemm && !generated_gemm(k)) return k.kind + " (library)";
  return k.kind;
}

std::string shape_text(const SymShape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + s[i].str();
  return out;
}

// What a kernel computes, in a few words: a gemm's m x n x k (batch, dtype, epilogue), a
// convolution's shapes, a reference kernel's op, a generated kernel's extent and what it writes.
std::string what_of(const KernelPlan& plan, const PlanKernel& k) {
  if (k.gemm) {
    const PlanGemm& g = *k.gemm;
    std::string s = "gemm " + g.m.str() + "x" + g.n.str() + "x" + g.k.str();
    if (!g.batch.empty()) s += " batch " + shape_text(g.batch);
    s += " " + std::string(dtype_name(g.dtype));
    if (!g.epilogue.empty()) s += " +" + g.epilogue;
    if (generated_gemm(k)) s += ", tiles " + std::to_string(g.tile[0]) + "x" + std::to_string(g.tile[1]);
    else if (!k.source.empty()) s += ", then an epilogue kernel";
    return s;
  }
  if (k.convolution) {
    const PlanConvolution& c = *k.convolution;
    SymShape w;
    for (int64_t d : c.w_sizes) w.push_back(SymInt(d));
    std::string s = "conv x " + shape_text(c.x_sizes) + " w " + shape_text(w) + " " +
                    std::string(dtype_name(c.dtype));
    if (!c.strides.empty() && c.strides[0] != 1) s += " stride " + std::to_string(c.strides[0]);
    if (c.groups != 1) s += " groups " + std::to_string(c.groups);
    if (c.channels_last) s += " channels last";
    if (c.computes != ConvolutionComputes::y) s += ", gradient of " + std::string(convolution_computes_name(c.computes));
    return s;
  }
  if (k.kind == "reference") return std::string(op_name(k.op)) + " on the host";
  std::string s = "over " + k.parallel_extent.str();
  for (size_t i = 0; i < k.writes.size() && i < 2; ++i)
    if (k.writes[i] >= 0 && static_cast<size_t>(k.writes[i]) < plan.buffers.size()) {
      const PlanBuffer& b = plan.buffers[static_cast<size_t>(k.writes[i])];
      s += (i ? ", " : ", writes ") + std::string(dtype_name(b.dtype)) + "[" + shape_text(b.sizes) + "]";
    }
  return s;
}

// Kernels doing the same work (identical layers): the same kind, description and source once
// the kernel's own name is taken out of it.
std::string same_work_key(const KernelPlan& plan, const PlanKernel& k) {
  std::string src = k.source;
  for (const std::string& name : {k.entry, k.name}) {
    if (name.empty()) continue;
    for (size_t at = src.find(name); at != std::string::npos; at = src.find(name, at + 1)) src.replace(at, name.size(), "@");
  }
  return k.kind + "\n" + what_of(plan, k) + "\n" + std::to_string(std::hash<std::string>{}(src));
}

// The first call loads modules and warms caches: leave it out once there are others.
size_t calls_left_out(int64_t calls) { return calls > 1 ? 1 : 0; }

std::vector<double> medians(const std::vector<std::vector<double>>& ms, size_t skip) {
  std::vector<double> m;
  for (const std::vector<double>& k : ms) m.push_back(median(std::vector<double>(k.begin() + static_cast<std::ptrdiff_t>(skip), k.end())));
  return m;
}

}  // namespace

void KernelProfile::add_call(std::span<const double> ms) {
  KILN_CHECK(ms.size() == ms_.size(), "kernel profile: a call timed ", ms.size(), " kernels; the plan has ", ms_.size());
  for (size_t k = 0; k < ms.size(); ++k) ms_[k].push_back(ms[k]);
  ++calls_;
}

std::string KernelProfile::report(const KernelPlan& plan, size_t top) const {
  KILN_CHECK(plan.kernels.size() == ms_.size(), "kernel profile: the plan has ", plan.kernels.size(),
             " kernels; the profile ", ms_.size());
  const size_t skip = calls_left_out(calls_);
  const std::vector<double> med = medians(ms_, skip);
  std::vector<std::pair<double, size_t>> by_time;
  double total = 0;
  std::map<std::string, std::pair<double, int64_t>> by_kind;
  for (size_t k = 0; k < ms_.size(); ++k) {
    const double m = med[k];
    by_time.emplace_back(m, k);
    total += m;
    auto& [kms, n] = by_kind[kind_of(plan.kernels[k])];
    kms += m;
    ++n;
  }
  // Kernels doing the same work are one row: total, count, time per kernel.
  struct Row {
    double ms = 0;
    int64_t count = 0;
    size_t first = 0;
  };
  std::map<std::string, Row> groups;
  for (const auto& [m, k] : by_time) {
    Row& r = groups[same_work_key(plan, plan.kernels[k])];
    if (r.count == 0) r.first = k;
    r.ms += m;
    ++r.count;
  }
  std::vector<Row> rows;
  for (const auto& [key, r] : groups) rows.push_back(r);
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.ms > b.ms || (a.ms == b.ms && a.first < b.first); });
  char line[512];
  std::string out;
  std::snprintf(line, sizeof line, "%zu kernels on %s, %.3f ms in all (sum of per-kernel medians over calls %zu-%lld)\n",
                ms_.size(), device_.c_str(), total, skip + 1, static_cast<long long>(calls_));
  out += line;
  out += "      ms  share   n   ms each  kind                  first of the n: what it computes\n";
  auto share = [&](double m) { return total > 0 ? 100.0 * m / total : 0.0; };
  double rest = 0;
  size_t rest_n = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    if (i >= top) {
      rest += r.ms;
      rest_n += static_cast<size_t>(r.count);
      continue;
    }
    const PlanKernel& pk = plan.kernels[r.first];
    std::snprintf(line, sizeof line, "%8.3f %5.1f%% %3lld %9.4f  %-20s  %s: %s\n", r.ms, share(r.ms),
                  static_cast<long long>(r.count), r.ms / static_cast<double>(r.count), kind_of(pk).c_str(), pk.name.c_str(),
                  what_of(plan, pk).c_str());
    out += line;
  }
  if (rest_n) {
    std::snprintf(line, sizeof line, "%8.3f %5.1f%%  (%zu more kernels)\n", rest, share(rest), rest_n);
    out += line;
  }
  out += "by kind:\n";
  std::vector<std::pair<std::string, std::pair<double, int64_t>>> kinds(by_kind.begin(), by_kind.end());
  std::stable_sort(kinds.begin(), kinds.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  for (const auto& [name, v] : kinds) {
    std::snprintf(line, sizeof line, "%8.3f %5.1f%%  %-20s  %lld kernels\n", v.first, share(v.first), name.c_str(),
                  static_cast<long long>(v.second));
    out += line;
  }
  return out;
}

std::string KernelProfile::to_json(const KernelPlan& plan) const {
  KILN_CHECK(plan.kernels.size() == ms_.size(), "kernel profile: the plan has ", plan.kernels.size(),
             " kernels; the profile ", ms_.size());
  KILN_CHECK(calls_ > 0, "kernel profile on ", device_, ": no call of the plan's ", ms_.size(),
             " kernels was timed, so there are no times to write");
  const size_t skip = calls_left_out(calls_);
  const std::vector<double> med = medians(ms_, skip);
  double total = 0;
  for (double m : med) total += m;
  using nlohmann::json;
  // One line per kernel: a long plan's file stays readable and diffs by kernel.
  std::string out = "{\"format\": \"kiln.profile\", \"version\": 1, \"target\": " + json(plan.target).dump() +
                    ", \"device\": " + json(device_).dump() + ",\n \"calls\": " + std::to_string(calls_) +
                    ", \"first_call_left_out\": " + (skip ? "true" : "false") +
                    ", \"kernel_count\": " + std::to_string(ms_.size());
  if (!plan.signature.empty()) out += ", \"plan_signature\": " + json(plan.signature).dump();
  if (!plan.origin.empty()) out += ", \"kiln_version\": " + json(plan.origin.kiln_version).dump();
  out += ",\n \"kernels\": [";
  for (size_t k = 0; k < ms_.size(); ++k) {
    const PlanKernel& pk = plan.kernels[k];
    const std::vector<double>& timed = ms_[k];
    json nodes = json::array();
    for (NodeId n : pk.provenance) nodes.push_back(n);
    const nlohmann::ordered_json row = {{"index", k},
                      {"name", pk.name},
                      {"kind", pk.kind},
                      {"nodes", std::move(nodes)},
                      {"median_ms", med[k]},
                      {"min_ms", *std::min_element(timed.begin() + static_cast<std::ptrdiff_t>(skip), timed.end())},
                      {"share", total > 0 ? med[k] / total : 0.0}};
    out += (k ? ",\n  " : "\n  ") + row.dump();
  }
  out += (ms_.empty() ? "],\n" : "\n ],\n");
  out += " \"total_ms\": " + json(total).dump() + "}\n";
  return out;
}

}  // namespace kiln::plan
