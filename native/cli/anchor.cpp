#include "anchor.h"

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "kiln/graph/error.h"

namespace kiln::cli {

namespace {

std::string shell_quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

const BenchRow* best(const std::vector<BenchRow>& rows, const std::string& workload, const std::string& prefix) {
  const BenchRow* b = nullptr;
  for (const BenchRow& r : rows)
    if (r.workload == workload && r.impl.rfind(prefix, 0) == 0 && r.median_ms > 0 && (!b || r.median_ms < b->median_ms)) b = &r;
  return b;
}

const BenchRow* find(const std::vector<BenchRow>& rows, const std::string& workload, const std::string& impl) {
  for (const BenchRow& r : rows)
    if (r.workload == workload && r.impl == impl) return &r;
  return nullptr;
}

}  // namespace

std::vector<BenchRow> run_anchor(const std::string& script, const std::string& device, bool small,
                                 const std::vector<std::string>& only, const std::string& extra, std::ostream* json) {
  std::string cmd = "python3 " + shell_quoted(script) + " --device " + shell_quoted(device) + (small ? " --small" : "");
  if (!only.empty()) {
    std::string list;
    for (const std::string& w : only) list += (list.empty() ? "" : ",") + w;
    cmd += " --only " + shell_quoted(list);
  }
  if (!extra.empty()) cmd += " " + extra;  // (options for the script, as given)
  std::printf("\nanchor: %s\n", cmd.c_str());
  std::fflush(stdout);
  FILE* p = popen(cmd.c_str(), "r");
  KILN_CHECK(p, "bench --anchor: cannot start '", cmd, "'");
  std::vector<BenchRow> rows;
  std::string line;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) {
    line += buf;
    if (line.empty() || line.back() != '\n') continue;  // a longer line: read on
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    line.clear();
    if (j.is_discarded() || !j.is_object()) continue;  // not a result line
    if (json) *json << j.dump() << "\n";
    if (j.contains("info")) {
      std::printf("anchor: %s\n", j["info"].dump().c_str());
      continue;
    }
    BenchRow r;
    r.workload = j.value("workload", "");
    r.impl = j.value("impl", "");
    if (j.contains("error")) r.error = j.value("error", "");
    if (j.contains("median_ms") && j["median_ms"].is_number()) r.median_ms = j["median_ms"].get<double>();
    if (j.contains("gbps") && j["gbps"].is_number()) r.gbps = j["gbps"].get<double>();
    if (j.contains("compile_s") && j["compile_s"].is_number()) r.compile_s = j["compile_s"].get<double>();
    if (!r.error.empty()) std::printf("anchor: %s %s failed: %s\n", r.workload.c_str(), r.impl.c_str(), r.error.c_str());
    if (!r.workload.empty()) rows.push_back(std::move(r));
  }
  const int status = pclose(p);
  KILN_CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0, "bench --anchor: '", cmd,
             "' failed (exit status ", WIFEXITED(status) ? WEXITSTATUS(status) : -1, ") after ", rows.size(),
             " results");
  return rows;
}

void print_anchor_table(const std::vector<BenchRow>& kiln, const std::vector<BenchRow>& anchor, double copy_gbps,
                        const std::string& device) {
  std::vector<std::string> workloads;
  for (const BenchRow& r : kiln)
    if (std::find(workloads.begin(), workloads.end(), r.workload) == workloads.end()) workloads.push_back(r.workload);
  std::printf("\n%-15s %-30s %-30s %8s %9s %7s %10s %10s %8s\n", "workload", "kiln best (mode) ms", "anchor best (variant) ms",
              "speedup", "kiln GB/s", "% copy", "kiln cold", "tc cold", "ratio");
  auto cell = [](const BenchRow* r, const char* prefix) {
    if (!r) return std::string("-");
    char b[64];
    std::snprintf(b, sizeof b, "%.4g (%s)", r->median_ms, r->impl.substr(std::string(prefix).size()).c_str());
    return std::string(b);
  };
  std::vector<std::string> goals;
  auto goal = [&](const std::string& what, double value, double target, bool higher, const char* unit) {
    const bool ok = higher ? value >= target : value <= target;
    char b[200];
    std::snprintf(b, sizeof b, "  %-46s %9.3g%s %s %g%s  %s", what.c_str(), value, unit, higher ? ">=" : "<=", target, unit,
                  ok ? "ok" : "MISSED");
    goals.emplace_back(b);
  };
  const std::vector<std::string> memory_bound = {"sincos",        "gelu_bias", "softmax", "layernorm",
                                                 "rmsnorm",       "add_layernorm", "sum_all", "col_sum"};
  double log_sum = 0;
  int n_mem = 0;
  for (const std::string& w : workloads) {
    const BenchRow* k = best(kiln, w, "kiln_");
    const BenchRow* t = best(anchor, w, "torch_");
    const BenchRow* kc = find(kiln, w, "kiln_default");
    const BenchRow* tc = find(anchor, w, "torch_default");
    const double speedup = k && t ? t->median_ms / k->median_ms : 0;
    const bool has_cold = kc && tc && kc->compile_s >= 0 && tc->compile_s > 0;
    char sp[32] = "-", pc[32] = "-", ratio[32] = "-";
    if (speedup > 0) std::snprintf(sp, sizeof sp, "%.2fx", speedup);
    if (k && copy_gbps > 0) std::snprintf(pc, sizeof pc, "%.0f%%", 100 * k->gbps / copy_gbps);
    if (has_cold) std::snprintf(ratio, sizeof ratio, "1/%.1f", tc->compile_s / std::max(kc->compile_s, 1e-9));
    std::printf("%-15s %-30s %-30s %8s %9.0f %7s %10.3f %10.3f %8s\n", w.c_str(), cell(k, "kiln_").c_str(),
                cell(t, "torch_").c_str(), sp, k ? k->gbps : 0.0, pc, kc ? kc->compile_s : -1.0, tc ? tc->compile_s : -1.0,
                ratio);
    if (device != "cuda" || !k) continue;
    const bool is_mem = std::find(memory_bound.begin(), memory_bound.end(), w) != memory_bound.end();
    if (is_mem && t) {
      log_sum += std::log(speedup);
      n_mem += 1;
      goal(w + ": speedup over the anchor's best", speedup, 0.95, true, "x");
    }
    if (w == "gelu_bias" || w == "softmax" || w == "layernorm" || w == "rmsnorm" || w == "add_layernorm")
      goal(w + ": % of the copy bandwidth", 100 * k->gbps / copy_gbps, 90, true, "%");
    if ((w == "mlp_bf16" || w == "attention_bf16") && t) goal(w + ": time / the anchor's best", k->median_ms / t->median_ms, 1.0, false, "x");
    if (w == "small_chain") {
      goal(w + ": host time per call", k->median_ms * 1e3, 10, false, " us");
      if (t) goal(w + ": time / the anchor's best", k->median_ms / t->median_ms, 1.0 / 3, false, "x");
    }
    if (has_cold) goal(w + ": cold compile / torch.compile's", kc->compile_s / tc->compile_s, 0.1, false, "x");
  }
  if (n_mem > 0) goal("memory-bound geometric-mean speedup", std::exp(log_sum / n_mem), 1.10, true, "x");
  std::printf("(speedup: the anchor's best time / Kiln's best; cold: first call minus a warm call, caches off, s; "
              "ratio: torch.compile default's cold compile / Kiln default's)\n");
  if (goals.empty()) return;
  std::printf("\ngoals (CUDA target issue), on this run's figures:\n");
  for (const std::string& g : goals) std::printf("%s\n", g.c_str());
}

}  // namespace kiln::cli
