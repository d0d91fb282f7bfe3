// kiln::plan::KernelProfile: where a plan's time goes, kernel by kernel (KILN_LOGS=profile).
// Takes: each profiled call's device time per kernel, in ms, as a runtime measured it (events
//   between the kernels' launches on its queue; a reference kernel's time includes its copies
//   and the host interpreter).
// Gives: a table of the kernels by median time over the calls after the first (which pays for
//   lazy loading), kernels doing the same work (identical layers: same kind, shapes and source
//   but for their names) on one row with their count, each with kind, share and what it
//   computes; the totals per kind; which calls are due a report. Also the same medians as
//   kiln.profile JSON, every kernel in plan order (`kiln run --profile`; docs/config.md).
// One mechanism for every runtime: the runtime measures, this accumulates and prints.
#pragma once

#include <kiln/plan/plan.h>

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace kiln::plan {

class KernelProfile {
 public:
  // `device`: where the kernels run, in the runtime's words ("cuda:0 (NVIDIA H200)").
  KernelProfile(size_t kernels, std::string device) : ms_(kernels), device_(std::move(device)) {}
  // One call's time per kernel (ms.size() must be the plan's kernel count).
  void add_call(std::span<const double> ms);
  int64_t calls() const { return calls_; }
  const std::string& device() const { return device_; }
  // The call just added is the 4th, 8th, 16th, ...: a report then keeps a long run's log short.
  bool report_due() const { return calls_ >= 4 && (calls_ & (calls_ - 1)) == 0; }
  // The table, at most `top` rows (the rest summed on one line).
  std::string report(const KernelPlan& plan, size_t top = 30) const;
  // The kiln.profile JSON text (version 1): target, device, calls, per kernel in plan order its
  // index, name, kind, graph nodes, median and min ms and share, and the total. A profile of no
  // calls is a kiln::Error (it has no times to give), as is a plan of another kernel count.
  std::string to_json(const KernelPlan& plan) const;

 private:
  std::vector<std::vector<double>> ms_;  // per kernel, per call
  std::string device_;
  int64_t calls_ = 0;
};

}  // namespace kiln::plan
