// kiln bench --anchor: the suite through an anchor script (shared/bench/torch_anchor.py: PyTorch
// eager and torch.compile) in the same invocation, after Kiln's runs, and one table of both: per
// workload Kiln's best mode against the anchor's best variant, GB/s and % of the device copy,
// and both cold compiles; then the CUDA target's goals checked on those figures.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace kiln::cli {

// One result line of Kiln's or the anchor's (median_ms < 0: the variant failed; compile_s < 0:
// none measured).
struct BenchRow {
  std::string workload, impl;
  double median_ms = -1, gbps = 0, compile_s = -1;
  std::string error;
};

// Runs `python3 <script> --device <device> [--small] [--only a,b] <extra>` and reads its JSON
// lines (each also written to `json` when given). An anchor that cannot start, or that exits with
// an error, is a kiln::Error naming the command.
std::vector<BenchRow> run_anchor(const std::string& script, const std::string& device, bool small,
                                 const std::vector<std::string>& only, const std::string& extra, std::ostream* json);

// The combined table (workloads in Kiln's order) and, for device "cuda", the goals: memory-bound
// geometric-mean speedup >= 1.10 and none below 0.95, the normalisations and gelu_bias at >= 90%
// of `copy_gbps`, mlp_bf16 and attention_bf16 no slower than the anchor, small_chain <= 10 us a
// call and <= 1/3 of the anchor's, every cold compile (kiln_default) <= 1/10 of torch.compile's
// default mode.
void print_anchor_table(const std::vector<BenchRow>& kiln, const std::vector<BenchRow>& anchor, double copy_gbps,
                        const std::string& device);

}  // namespace kiln::cli
