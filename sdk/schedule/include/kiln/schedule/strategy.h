// sdk/schedule: strategy decisions about a kernel that every target makes the same way, made
// here once so that the codegens (CPU LLVM IR, NVPTX, CUDA C, GLSL) cannot drift apart.
//
// Takes: a finished kernel (finish_kernel). Gives: which way its loops map onto a target.
#pragma once

#include "kiln/schedule/kernel_ir.h"

namespace kiln::schedule {

// Whether reduction kernel k takes the column strategy: its reduced (inner) dims are the strided
// ones, i.e. some inner load walks the last outer dim with unit stride and none that moves with
// the last outer dim walks the last inner dim so (one that does not, e.g. a per-row statistic
// read by every column's sum, reads one address across the side-by-side lanes). Then a target puts neighbouring outer points side by side (SIMD lanes, GPU
// threads, so loads coalesce) and loops over the inner dims, instead of splitting each row.
// False for pointwise and matmul kernels and for reductions with no outer or no inner dims.
bool uses_column_strategy(const Kernel& k);

}  // namespace kiln::schedule
