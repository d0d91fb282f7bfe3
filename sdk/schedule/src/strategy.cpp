// Strategy decisions shared by every target (strategy.h).
#include "kiln/schedule/strategy.h"

namespace kiln::schedule {

bool uses_column_strategy(const Kernel& k) {
  const size_t n = k.domain.size(), no = static_cast<size_t>(k.num_outer);
  if (k.kind != KernelKind::reduction || no == 0 || no == n) return false;
  bool outer_unit = false, inner_unit = false;
  for (const Instr& in : k.instrs) {
    if (in.kind != InstrKind::load || !in.inner) continue;
    // A load that does not move with the last outer dim reads one address for all the lanes
    // side by side (a row's statistic in a norm's weight gradient): it favours neither.
    if (in.index.coeffs[n - 1] == 1 && in.index.coeffs[no - 1] != 0) inner_unit = true;
    if (in.index.coeffs[no - 1] == 1) outer_unit = true;
  }
  return outer_unit && !inner_unit;
}

}  // namespace kiln::schedule
