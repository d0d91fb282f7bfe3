// Strategy decisions shared by every target (strategy.h).
#include "kiln/schedule/strategy.h"

namespace kiln::schedule {

bool uses_column_strategy(const Kernel& k) {
  const size_t n = k.domain.size(), no = static_cast<size_t>(k.num_outer);
  if (k.kind != KernelKind::reduction || no == 0 || no == n) return false;
  bool outer_unit = false, inner_unit = false;
  for (const Instr& in : k.instrs) {
    if (in.kind != InstrKind::load || !in.inner) continue;
    if (in.index.coeffs[n - 1] == 1) inner_unit = true;
    if (in.index.coeffs[no - 1] == 1) outer_unit = true;
  }
  return outer_unit && !inner_unit;
}

}  // namespace kiln::schedule
