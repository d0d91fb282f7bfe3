// targets/cstyle: what the GPU codegens (CUDA C, GLSL) decide the same way about a kernel's
// structure, apart from the expressions the printer writes: which reductions and loads belong to
// which pass of a reduction kernel, and which loads and stores can be done several consecutive
// elements at a time (vector accesses). Portable C++.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kiln/cstyle/printer.h"

namespace kiln::cstyle {

// The reduction instructions of pass `pass` (0-based: Instr::pass - 1), in instruction order.
std::vector<int32_t> reductions_of_pass(const schedule::Kernel& k, int32_t pass);
// The loads pass `pass` needs: those of its reductions' arguments and of its inner stores,
// through their arguments but not through earlier reductions' results, nor through `kept`
// (values a row cache holds from an earlier pass).
std::set<int32_t> loads_of_pass(const schedule::Kernel& k, int32_t pass, const std::set<int32_t>& kept = {});
// A row kernel's values of its first pass that later passes read again (a layer norm's input,
// read by the variance and the normalisation), where keeping them in a row cache is fewer
// values than keeping the loads they are computed from: the row's elements computed from a
// stencil (a depthwise convolution's 49 taps and weights before a norm over its channels) are
// computed once instead of once per pass. Empty where the loads are as few (a norm of a loaded
// row: the loads are what to keep) or the kernel has one pass.
std::set<int32_t> row_values_to_keep(const schedule::Kernel& k);

// The product of the kernel's inner extents (a reduction's row; 1 for a pointwise kernel).
SymInt inner_extent(const schedule::Kernel& k);
// The stores of a reduction kernel made once per outer point (after its passes), at the outer
// scope, by the threads for which `who` (a C condition) holds; nothing when there are none.
void store_outer(KernelPrinter& p, const Scope& outer, const std::string& who);

// The row cache (a static row's elements a thread loads, kept in registers across passes):
// declare_row_cache prints `T lc<load>[entries];` for load instruction `load`; cache_row_loads
// makes each of `loads` recorded into `lc<load>[slot]` where it is first loaded and read from
// there where an earlier pass recorded it (KernelPrinter::load_records, load_reads).
void declare_row_cache(KernelPrinter& p, int32_t load, int64_t entries);
void cache_row_loads(KernelPrinter& p, const std::vector<int32_t>& loads, const std::string& slot);

// Vector accesses: plain loads and stores with unit stride along the last domain dim (`dim`),
// whose extent is a static multiple of `width` (so a group of `width` consecutive positions never
// crosses a row), and whose other strides and offset are multiples of `width`: statically, or at
// run time (`multiples`: the symbolic ones; the target checks them once per launch into one flag
// and falls back to single elements where it is false). A decision, not text: the C-style
// targets print the flag with flag(), the NVPTX codegen as LLVM IR.
struct VectorPlan {
  size_t dim = 0;
  int width = 1;
  std::set<int32_t> loads;   // instructions
  std::set<size_t> stores;   // indices into Kernel::stores
  // Symbolic offsets and strides of the vector accesses, each to be a multiple of `width`, in the
  // order met (loads in instruction order, then stores; per access its offset, then its strides).
  std::vector<SymInt> multiples;
  // The run-time condition as one C expression of printer p's dialect: `(size) % width == 0` for
  // each of `multiples`, sorted, unique, ANDed ("true" when there are none).
  std::string flag(const KernelPrinter& p) const;
};
// nullopt when nothing qualifies. Dims before `first_dim` must not be the vector dim; with
// `inner_only` only inner loads and stores count (row reductions). `has_form(buffer)`: whether the
// target has a vector form of that buffer (its dtype, how it is bound). Buffer addresses are the
// target's to align (both runtimes bind every buffer at a multiple of a vector's bytes); the
// conditions are on symbolic offsets and strides only.
// `masked_form(buffer)`: whether the target also loads a group of that buffer under one mask
// (a masked load whose mask does not vary along the vector dim: a channels-last stencil's tap,
// inside or outside the image for all its channels alike); null: masked loads one by one.
std::optional<VectorPlan> plan_vectors(const schedule::Kernel& k, size_t first_dim, bool inner_only, int width,
                                       const std::function<bool(int32_t)>& has_form,
                                       const std::function<bool(int32_t)>& masked_form = nullptr);

}  // namespace kiln::cstyle
