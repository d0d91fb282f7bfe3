// Internal to targets/cuda/codegen: what the generic kernels (cuda_c.cpp) and the fused
// attention kernels (attention.cpp) share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kiln/cuda/codegen.h"
#include "kiln/schedule/strategy.h"  // uses_column_strategy

namespace kiln::cuda::detail {

// A kernel's parameter list: its buffers in id order (const where only read, __restrict__
// unless two share memory), then every plan symbol as long long.
std::string kernel_params(const schedule::Kernel& k, const schedule::Schedule& s);
// A size as a C expression of type long long over the symbols.
std::string sym_c(const SymInt& v);

// The flash-attention body every attention kernel calls (a template, in the plan's prelude
// when the plan has attention kernels).
const char* flash_prelude();
// The same on Hopper (attention_sm90.cpp): the wgmma body (appended to flash_prelude() in plans
// with such kernels), the head dims it takes, and its dynamic shared memory per block.
const std::string& flash_sm90_prelude();
bool flash_sm90_supports(int64_t d, int64_t dv);
// Whether attention kernel `a` is generated as the sm_90 kernel under options o.
bool uses_flash_sm90(const schedule::Attention& a, const CodegenOptions& o);
int64_t flash_sm90_smem_bytes(int64_t d, int64_t dv, int64_t mt, int64_t bc);
// An attention kernel's entry (a wrapper choosing the block's batch index and query rows and
// calling the body) and its launch; sets the plan kernel's parallel extent.
std::string emit_attention(const schedule::Kernel& k, const schedule::Schedule& s, const CodegenOptions& o,
                           plan::PlanKernel& pk);

// Row reductions (cuda_c.cpp, nvptx.cpp; which reductions are rows: schedule::uses_column_strategy):
// the threads of a row's block, and how many elements of a row a thread keeps in registers at most.
int64_t row_block(int64_t inner);
// The LLVM path (nvptx.cpp) packs short rows: `threads` per row and `rows` rows per block. A row
// of at most 512 elements takes a power-of-two segment of one warp (about 16 elements a
// thread, combined by shuffles alone, no shared memory or barrier) and blocks hold up to 256
// threads while that leaves a few hundred blocks; a longer row takes row_block(inner) threads,
// one row per block. One block per short row (ConvNeXt's 96-channel layer norms at 50176
// points) left most of each SM's thread slots empty: 90 GB/s.
struct RowGeometry {
  int64_t threads = 32, rows = 1;
};
RowGeometry row_geometry(int64_t inner, int64_t rows);
inline constexpr int64_t kMaxCachedItems = 16;
// The row cache: with `block` threads taking `width` consecutive elements a step, the steps a
// thread makes over a static row of a kernel of two or more passes, when it may keep all their
// elements in registers (at most kMaxCachedItems); 0 when not (cache_rows off, a symbolic or
// empty row, too many elements).
int64_t row_cache_steps(const schedule::Kernel& k, const CodegenOptions& o, int64_t block, int64_t width);
// Online softmax: a row kernel whose pass 0 is m = max(a) and pass 1 is s = sum(exp(a - m))
// (softmax, log_softmax, logsumexp), with nothing else in those passes, computes both in one
// pass over the row when the row is not kept in registers: a running (m, s) per thread, rescaled
// by exp(m_old - m_new) when the maximum grows, merged pairwise across threads the same way.
struct OnlinePair {
  int32_t max = -1, sum = -1, arg = -1;  // the two reductions and a
};
std::optional<OnlinePair> online_pair(const schedule::Kernel& k, const CodegenOptions& o);

// LLVM IR for NVPTX (nvptx.cpp): whether kernel k is printed so under options o (compiler
// "llvm", a pointwise kernel or matmul epilogue), and its module (PlanKernel::language "llvm").
bool nvptx_emits(const schedule::Kernel& k, const CodegenOptions& o);
std::string emit_nvptx(const schedule::Kernel& k, const schedule::Schedule& s, const CodegenOptions& o, plan::PlanLaunch& launch);

}  // namespace kiln::cuda::detail
