// kiln::plan::KernelProfile: where a plan's time goes, kernel by kernel (KILN_LOGS=profile).
// Takes: each profiled call's device time per kernel, in ms, as a runtime measured it (events
//   between the kernels' launches on its queue; a reference kernel's time includes its copies
//   and the host interpreter).
// Gives: a table of the kernels by median time over the calls after the first (which pays for
//   lazy loading), kernels doing the same work (identical layers: same kind, shapes and source
//   but for their names) on one row with their count, each with kind, share and what it
//   computes; the totals per kind; which calls are due a report.
// One mechanism for every runtime: the runtime measures, this accumulates and prints.
#pragma once

#include <kiln/plan/plan.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kiln::plan {

class KernelProfile {
 public:
  explicit KernelProfile(size_t kernels) : ms_(kernels) {}
  // One call's time per kernel (ms.size() must be the plan's kernel count).
  void add_call(std::span<const double> ms);
  int64_t calls() const { return calls_; }
  // The call just added is the 4th, 8th, 16th, ...: a report then keeps a long run's log short.
  bool report_due() const { return calls_ >= 4 && (calls_ & (calls_ - 1)) == 0; }
  // The table, at most `top` rows (the rest summed on one line); `device` names where it ran.
  std::string report(const KernelPlan& plan, const std::string& device, size_t top = 30) const;

 private:
  std::vector<std::vector<double>> ms_;  // per kernel, per call
  int64_t calls_ = 0;
};

}  // namespace kiln::plan
