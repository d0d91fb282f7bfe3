// What each kernel of a plan computes and moves, from the scheduled graph the plan was made
// from (its kernels' provenance names that graph's nodes): for the browser inspector's overlays
// and `kiln show`, as a roofline reads them (FLOPs per byte against the device's ratio).
#pragma once
#include <vector>

#include "kiln/graph/graph.h"
#include "kiln/plan/plan.h"

namespace kiln::plan {

// For each node of `scheduled`, the kernels (indices into p.kernels, ascending) that compute it:
// those whose provenance names it, and for an elementwise node computed inline on the way (in
// no provenance) the kernels of its users. Sources and views are in none.
std::vector<std::vector<int>> kernels_of_nodes(const KernelPlan& p, const Graph& scheduled);

// At the symbols' example sizes: `bytes`, the sizes of the buffers the kernel reads and writes,
// each once (what it must move at least); `flops`, the arithmetic of the nodes it computes: a
// matmul 2·M·N·K, attention 4·B·H·Lq·Lk·D, a convolution 2 per multiply-add, an elementwise
// op one per output element, a reduction one per input element, any other composite one per
// output element; sources, views and copies none. A node two kernels compute counts in both.
struct KernelCost {
  double bytes = 0;
  double flops = 0;
  double intensity() const { return bytes > 0 ? flops / bytes : 0; }  // FLOPs per byte
};
std::vector<KernelCost> kernel_costs(const KernelPlan& p, const Graph& scheduled);
// The same, given kernels_of_nodes(p, scheduled) already computed.
std::vector<KernelCost> kernel_costs(const KernelPlan& p, const Graph& scheduled,
                                     const std::vector<std::vector<int>>& kernels_of);

}  // namespace kiln::plan
