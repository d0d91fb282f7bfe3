// Fused attention kernels: out = softmax(q k^T * scale) v without storing the scores, in the
// manner of FlashAttention-2. The body is one template in the plan's prelude (flash_prelude());
// each attention kernel of a plan is a small wrapper that finds its batch index and query rows
// and calls the body with the operands' strides. The wrapper has a fixed signature: its text
// depends only on the configuration (emit_attention), every size, stride, offset and the scale
// being an argument, so the runtime compiles one program per configuration and loads the
// common ones prebuilt (targets/cuda/runtime/src/prebuilt.h).
//
// Per block: 4 warps and BR = 64 * tiles query rows (tiles: 16-row m-tiles per warp, 1 or 2).
// Q is staged through shared memory into registers once (ldmatrix). K and V stream through
// shared memory in tiles of BC rows (cp.async, double-buffered: the next tile loads while this
// one is used). Per tile, S = Q K^T and O += P V run on tensor cores (mma.sync m16n8k16 with f32
// accumulation); the softmax is online: a running max and sum per row in base 2 rescale O when
// the max grows, and O is divided by the sum once at the end. Rows of shared memory are padded
// by 16 bytes so that ldmatrix reads them without bank conflicts. Rows past lq or lk read as 0
// (zero-filled copies) and scores of keys past lk as -inf. A mask (bool, or of the attention's
// dtype and added) is read from global memory where the softmax needs it, at any strides (0 where
// it is broadcast): kiln_flash_masked_softmax. Operands whose rows are not 16-byte
// aligned are copied to shared memory element by element instead of with cp.async. Before sm_80
// (no bf16 mma, no cp.async) each thread computes one query row with scalar f32 arithmetic.
// Plans for an sm_90 device take Hopper's kernel (attention_sm90.cpp, warpgroup MMA) instead for
// head dims of 64 and 128: same wrapper and arguments, its own body, block and shared memory.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "internal.h"
#include "kiln/graph/error.h"

namespace kiln::cuda::detail {

namespace {

constexpr const char* kFlashPrelude = R"(
// ---- fused attention (targets/cuda/codegen/src/attention.cpp) ----
#define KILN_FLASH_WARPS 4
__device__ __forceinline__ unsigned kiln_smem(const void* p) {
  unsigned r;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
  return r;
}
// ROWS x COLS elements from global rows (row_stride apart, unit stride within) to shared rows
// of COLS + 8; rows at or past `rows` become 0.
template <int ROWS, int COLS>
__device__ __forceinline__ void kiln_flash_tile(unsigned short* s, const unsigned short* g, long long row_stride,
                                                long long rows, bool vec) {
  constexpr int CHUNKS = COLS / 8, PITCH = COLS + 8, THREADS = 32 * KILN_FLASH_WARPS;
#pragma unroll
  for (int it = 0; it < (ROWS * CHUNKS + THREADS - 1) / THREADS; ++it) {
    const int i = it * THREADS + threadIdx.x;
    if (ROWS * CHUNKS % THREADS != 0 && i >= ROWS * CHUNKS) break;
    const int r = i / CHUNKS, c = (i % CHUNKS) * 8;
    unsigned short* dst = s + r * PITCH + c;
    const bool in = r < rows;
    const unsigned short* src = g + (in ? (long long)r * row_stride + c : 0);
#if __CUDA_ARCH__ >= 800
    if (vec) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(kiln_smem(dst)), "l"(src), "r"(in ? 16 : 0));
      continue;
    }
#endif
#pragma unroll
    for (int e = 0; e < 8; ++e) dst[e] = in ? src[e] : (unsigned short)0;
  }
}
__device__ __forceinline__ void kiln_ldsm4(unsigned* r, const unsigned short* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(kiln_smem(p)));
}
__device__ __forceinline__ void kiln_ldsm4_t(unsigned* r, const unsigned short* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(kiln_smem(p)));
}
template <bool BF16>
__device__ __forceinline__ void kiln_mma(float* c, const unsigned* a, unsigned b0, unsigned b1) {
  if (BF16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// Two floats rounded to f16/bf16, lo in the low half.
template <bool BF16>
__device__ __forceinline__ unsigned kiln_pack2(float lo, float hi) {
  unsigned r;
  if (BF16) asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  else asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ float kiln_ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
template <bool BF16>
__device__ __forceinline__ float kiln_flash_f(unsigned short x) { return BF16 ? kiln_bf2f(x) : kiln_h2f(x); }

// The online softmax of a warp's 16 x BC score tile under a mask (MK 1: bool, 1 keeps; MK 2: of
// the attention's dtype, added to the scaled scores), in place. s[4 n + e] is the raw score of row
// row0 + lane / 4 + 8 (e / 2) and key key0 + 8 n + 2 (lane % 4) + e % 2 (the mma.sync accumulator
// layout, which wgmma's m64nBC gives each warp too); mask points at the batch index's mask, its rows
// m_rs and keys m_cs apart. Unlike the unmasked softmax, which keeps the max of raw scores in base
// 2, this one works in natural units (y = s * scale + mask, p = exp2((y - max) * log2(e))): a mask of
// the dtype's lowest value (torch's finfo.min) times log2(e) would overflow to -inf and turn a row
// that is masked everywhere into zeros where softmax gives equal weights. Keys past lk and rows
// past lq read no mask. alpha: the factor for the old accumulators and sums of each of the
// thread's two rows.
template <int MK, bool BF16, int BC>
__device__ __forceinline__ void kiln_flash_masked_softmax(float* s, float* row_max, float* row_sum, float* alpha,
                                                          const void* __restrict__ mask, long long m_rs, long long m_cs,
                                                          long long row0, long long lq, long long key0, long long lk,
                                                          float scale) {
  const float kNegInf = __int_as_float(0xff800000), kLog2e = 1.4426950408889634f;
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const long long row = row0 + lane / 4 + 8 * h;
    const long long mrow = (row < lq ? row : 0) * m_rs;
    float r = kNegInf;
#pragma unroll
    for (int n = 0; n < BC / 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const long long key = key0 + n * 8 + 2 * (lane % 4) + e;
        float y = kNegInf;
        if (key < lk) {
          const long long at = mrow + key * m_cs;
          const float x = s[4 * n + 2 * h + e] * scale;
          if (MK == 1) y = ((const unsigned char*)mask)[at] ? x : kNegInf;
          else y = x + kiln_flash_f<BF16>(((const unsigned short*)mask)[at]);
        }
        s[4 * n + 2 * h + e] = y;
        r = fmaxf(r, y);
      }
    r = fmaxf(r, __shfl_xor_sync(0xffffffffu, r, 1));
    r = fmaxf(r, __shfl_xor_sync(0xffffffffu, r, 2));
    const float m = fmaxf(row_max[h], r);
    const float base = m == kNegInf ? 0.f : m;
    alpha[h] = kiln_ex2((row_max[h] - base) * kLog2e);
    row_max[h] = m;
    float sum = 0.f;
#pragma unroll
    for (int n = 0; n < BC / 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float p = kiln_ex2((s[4 * n + 2 * h + e] - base) * kLog2e);
        s[4 * n + 2 * h + e] = p;
        sum += p;
      }
    row_sum[h] = row_sum[h] * alpha[h] + sum;
  }
}

// One block: query rows [m0, m0 + 64 * MT) of one batch index; q, k, v, o point at that batch
// index's first row. scale_log2 = scale * log2(e); NEG: it is negative (the row's largest scaled
// score is then its smallest raw score). qa, ka, va: q, k, v and their row strides are 16-byte
// aligned (literals where the views are static: NVRTC then drops the other tile loader).
// MK: the mask's kind (0 none, 1 bool, 2 of the attention's dtype) at mask (this batch index's
// first row; rows m_rs, keys m_cs apart); with a mask, scale_log2 is the scale itself (the masked
// softmax works in natural units) and rows whose softmax is NaN are written as zeros.
template <bool BF16, int D, int DV, int MT, int BC, bool NEG, int MK>
__device__ __forceinline__ void kiln_flash(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
                                           const unsigned short* __restrict__ v, unsigned short* __restrict__ o,
                                           long long q_rs, long long k_rs, long long v_rs, long long lq, long long lk,
                                           long long m0, float scale_log2, bool qa, bool ka, bool va,
                                           const void* __restrict__ mask, long long m_rs, long long m_cs) {
  constexpr int BR = 16 * MT * KILN_FLASH_WARPS, QP = D + 8, VP = DV + 8;
  const float kNegInf = __int_as_float(0xff800000);
#if __CUDA_ARCH__ >= 800
  constexpr int KV = 2 * BC * (QP + VP), QS = BR * QP;
  __shared__ __align__(16) unsigned short smem[KV > QS ? KV : QS];
  unsigned short* const sk = smem;               // [2][BC][QP]
  unsigned short* const sv = smem + 2 * BC * QP; // [2][BC][VP]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  // Q -> shared -> registers (A fragments of each m-tile), once.
  kiln_flash_tile<BR, D>(smem, q + m0 * q_rs, q_rs, lq - m0, qa);
  asm volatile("cp.async.commit_group;\n" ::);
  asm volatile("cp.async.wait_group 0;\n" ::);
  __syncthreads();
  unsigned qf[MT][D / 16][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      kiln_ldsm4(qf[mt][kk], smem + ((warp * MT + mt) * 16 + lane % 16) * QP + kk * 16 + (lane / 16) * 8);
  __syncthreads();

  float acc[MT][DV / 8][4];
  float row_max[MT][2], row_sum[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int n = 0; n < DV / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][n][e] = 0.f;
#pragma unroll
    for (int h = 0; h < 2; ++h) row_max[mt][h] = kNegInf, row_sum[mt][h] = 0.f;
  }
  const long long tiles = (lk + BC - 1) / BC;
  if (tiles > 0) {
    kiln_flash_tile<BC, D>(sk, k, k_rs, lk, ka);
    kiln_flash_tile<BC, DV>(sv, v, v_rs, lk, va);
  }
  asm volatile("cp.async.commit_group;\n" ::);
  for (long long j = 0; j < tiles; ++j) {
    const int buf = (int)(j & 1);
    if (j + 1 < tiles) {  // the next tile loads while this one is used
      const long long next = (j + 1) * BC;
      kiln_flash_tile<BC, D>(sk + (buf ^ 1) * BC * QP, k + next * k_rs, k_rs, lk - next, ka);
      kiln_flash_tile<BC, DV>(sv + (buf ^ 1) * BC * VP, v + next * v_rs, v_rs, lk - next, va);
    }
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group 1;\n" ::);
    __syncthreads();
    const unsigned short* kt = sk + buf * BC * QP;
    const unsigned short* vt = sv + buf * BC * VP;

    // S = Q K^T: per m-tile, BC / 8 n-tiles of 16 x 8 scores.
    float s[MT][BC / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int n = 0; n < BC / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][n][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
      for (int nn = 0; nn < BC / 16; ++nn) {
        unsigned b[4];
        kiln_ldsm4(b, kt + (nn * 16 + (lane / 16) * 8 + lane % 8) * QP + kk * 16 + ((lane / 8) % 2) * 8);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          kiln_mma<BF16>(s[mt][2 * nn], qf[mt][kk], b[0], b[1]);
          kiln_mma<BF16>(s[mt][2 * nn + 1], qf[mt][kk], b[2], b[3]);
        }
      }

    // Online softmax (base 2): each row's 4 threads share its max through shuffles. The max is
    // taken over raw scores and scaled once; exp2(s * scale_log2 - max) is one FFMA and one MUFU.
    // (The sm_90 kernel's kiln_wg_softmax is the same per 16-row tile; called per m-tile here it
    // made this kernel 5% slower on the H200: 0.2743 against 0.2604 ms.)
    const long long key0 = j * BC;
    if constexpr (MK != 0) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        float alpha[2];
        kiln_flash_masked_softmax<MK, BF16, BC>(&s[mt][0][0], row_max[mt], row_sum[mt], alpha, mask, m_rs, m_cs,
                                                m0 + (warp * MT + mt) * 16, lq, key0, lk, scale_log2);
#pragma unroll
        for (int n = 0; n < DV / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[mt][n][e] *= alpha[e / 2];
      }
    } else {
      const bool partial = key0 + BC > lk;
      if (partial) {  // keys past lk: a raw score whose scaled value is -inf (p = 0)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int n = 0; n < BC / 8; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e)
              if (key0 + n * 8 + 2 * (lane % 4) + (e & 1) >= lk) s[mt][n][e] = NEG ? -kNegInf : kNegInf;
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float r = NEG ? -kNegInf : kNegInf;
#pragma unroll
          for (int n = 0; n < BC / 8; ++n)
#pragma unroll
            for (int e = 0; e < 2; ++e) r = NEG ? fminf(r, s[mt][n][2 * h + e]) : fmaxf(r, s[mt][n][2 * h + e]);
          r = NEG ? fminf(r, __shfl_xor_sync(0xffffffffu, r, 1)) : fmaxf(r, __shfl_xor_sync(0xffffffffu, r, 1));
          r = NEG ? fminf(r, __shfl_xor_sync(0xffffffffu, r, 2)) : fmaxf(r, __shfl_xor_sync(0xffffffffu, r, 2));
          const float m = fmaxf(row_max[mt][h], r * scale_log2);
          const float base = m == kNegInf ? 0.f : m;
          const float alpha = kiln_ex2(row_max[mt][h] - base);
          row_max[mt][h] = m;
          float sum = 0.f;
#pragma unroll
          for (int n = 0; n < BC / 8; ++n)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const float p = kiln_ex2(fmaf(s[mt][n][2 * h + e], scale_log2, -base));
              s[mt][n][2 * h + e] = p;
              sum += p;
            }
          row_sum[mt][h] = row_sum[mt][h] * alpha + sum;
#pragma unroll
          for (int n = 0; n < DV / 8; ++n) acc[mt][n][2 * h] *= alpha, acc[mt][n][2 * h + 1] *= alpha;
        }
    }

    // O += P V: P's accumulator fragments are the A fragments of the next product.
#pragma unroll
    for (int kc = 0; kc < BC / 16; ++kc) {
      unsigned pa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        pa[mt][0] = kiln_pack2<BF16>(s[mt][2 * kc][0], s[mt][2 * kc][1]);
        pa[mt][1] = kiln_pack2<BF16>(s[mt][2 * kc][2], s[mt][2 * kc][3]);
        pa[mt][2] = kiln_pack2<BF16>(s[mt][2 * kc + 1][0], s[mt][2 * kc + 1][1]);
        pa[mt][3] = kiln_pack2<BF16>(s[mt][2 * kc + 1][2], s[mt][2 * kc + 1][3]);
      }
#pragma unroll
      for (int dd = 0; dd < DV / 16; ++dd) {
        unsigned b[4];
        kiln_ldsm4_t(b, vt + (kc * 16 + ((lane / 8) % 2) * 8 + lane % 8) * VP + dd * 16 + (lane / 16) * 8);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          kiln_mma<BF16>(acc[mt][2 * dd], pa[mt], b[0], b[1]);
          kiln_mma<BF16>(acc[mt][2 * dd + 1], pa[mt], b[2], b[3]);
        }
      }
    }
    __syncthreads();  // this buffer is refilled by the next iteration's prefetch
  }
  asm volatile("cp.async.wait_group 0;\n" ::);

  // O / sum, rounded once, two elements per store.
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = row_sum[mt][h];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      // No keys (lk == 0): zeros, as the product with an empty v gives; every score -inf: NaN,
      // as softmax gives, or with a mask zeros, as for any row whose softmax is NaN.
      const float inv = l == 0.f ? (lk == 0 ? 0.f : __int_as_float(0x7fc00000)) : 1.f / l;
      const bool zero = MK != 0 && !(l > 0.f);
      const long long row = m0 + (warp * MT + mt) * 16 + lane / 4 + 8 * h;
      if (row >= lq) continue;
      unsigned* dst = (unsigned*)(o + row * DV + 2 * (lane % 4));
#pragma unroll
      for (int n = 0; n < DV / 8; ++n)
        dst[n * 4] = zero ? 0u : kiln_pack2<BF16>(acc[mt][n][2 * h] * inv, acc[mt][n][2 * h + 1] * inv);
    }
#else
  // Before sm_80: one query row per thread, f32 arithmetic, the same online softmax.
  for (int r = threadIdx.x; r < BR; r += 32 * KILN_FLASH_WARPS) {
    const long long row = m0 + r;
    if (row >= lq) continue;
    float acc[DV];
    for (int c = 0; c < DV; ++c) acc[c] = 0.f;
    float m = kNegInf, l = 0.f;
    const float u = MK != 0 ? 1.4426950408889634f : 1.f;  // to base 2 (with a mask, x is in natural units)
    for (long long key = 0; key < lk; ++key) {
      float dot = 0.f;
      for (int c = 0; c < D; ++c) dot += kiln_flash_f<BF16>(q[row * q_rs + c]) * kiln_flash_f<BF16>(k[key * k_rs + c]);
      float x = dot * scale_log2;
      if (MK == 1) x = ((const unsigned char*)mask)[row * m_rs + key * m_cs] ? x : kNegInf;
      if (MK == 2) x += kiln_flash_f<BF16>(((const unsigned short*)mask)[row * m_rs + key * m_cs]);
      const float mn = fmaxf(m, x);
      const float base = mn == kNegInf ? 0.f : mn;
      const float alpha = exp2f((m - base) * u), p = exp2f((x - base) * u);
      l = l * alpha + p;
      for (int c = 0; c < DV; ++c) acc[c] = acc[c] * alpha + p * kiln_flash_f<BF16>(v[key * v_rs + c]);
      m = mn;
    }
    const float inv = l == 0.f ? (lk == 0 ? 0.f : __int_as_float(0x7fc00000)) : 1.f / l;
    const bool zero = MK != 0 && !(l > 0.f);
    for (int c = 0; c < DV; ++c) {
      const float y = zero ? 0.f : acc[c] * inv;
      o[row * DV + c] = BF16 ? kiln_f2bf(y) : kiln_f2h(y);
    }
  }
#endif
}
)";

constexpr int64_t kWarps = 4;
// Batch dims every flash kernel takes (more where a graph has more), so that the common ranks
// share one signature.
constexpr size_t kBatchDims = 4;

// Key rows per shared-memory tile: the largest multiple of 16 up to 64 whose two K and V
// buffers fit the 48 KiB of static shared memory.
int64_t key_tile(int64_t d, int64_t dv) {
  int64_t bc = 64;
  while (bc > 16 && 2 * bc * (d + 8 + dv + 8) * 2 > 48 * 1024) bc -= 16;
  return bc;
}

}  // namespace

const char* flash_prelude() { return kFlashPrelude; }

std::string emit_attention(const schedule::Kernel& k, const schedule::Schedule&, const CodegenOptions& o,
                           plan::PlanKernel& pk) {
  const schedule::Attention& a = *k.attention;
  KILN_CHECK(a.dtype == DType::f16 || a.dtype == DType::bf16, "cuda codegen: attention kernel ", k.name,
             " is ", dtype_name(a.dtype), "; the fused kernel takes f16 or bf16");
  KILN_CHECK(a.d % 16 == 0 && a.dv % 16 == 0 && a.d >= 16 && a.dv >= 16 && a.d <= 128 && a.dv <= 128,
             "cuda codegen: attention kernel ", k.name, " has head dims ", a.d, " and ", a.dv,
             "; the fused kernel takes multiples of 16 up to 128");
  // Hopper's kernel (attention_sm90.cpp): 2 warpgroups of 64 query rows each, key tiles of 64,
  // tiles in dynamic shared memory. Else 4 warps of `tiles` 16-row m-tiles each.
  const bool sm90 = uses_flash_sm90(a, o);
  KILN_CHECK(o.attention_warp_tiles >= 0 && o.attention_warp_tiles <= 2,
             "cuda codegen: attention_warp_tiles must be 1 or 2 (0: the codegen's choice), got ", o.attention_warp_tiles);
  const int64_t tiles = sm90 ? 2 : o.attention_warp_tiles > 0 ? o.attention_warp_tiles : (a.d <= 64 && a.dv <= 64 ? 2 : 1);
  const int64_t rows = sm90 ? 64 * tiles : 16 * tiles * kWarps;
  const int64_t bc = sm90 ? 64 : key_tile(a.d, a.dv);

  SymInt batch = 1;
  for (const SymInt& e : a.batch) batch = batch * e;
  // Blocks of `rows` query rows; every variant launches over batch * (lq + 127) items so that
  // the extent is one expression for 64 and 128 rows per block (a few blocks find no rows).
  pk.parallel_extent = batch * (a.lq + SymInt(16 * 2 * kWarps - 1));
  pk.launch.block = sm90 ? 128 * tiles : 32 * kWarps;
  pk.launch.items_per_block = rows;
  if (sm90) pk.launch.shared_bytes = flash_sm90_smem_bytes(a.d, a.dv, tiles, bc);

  // The kernel has a fixed signature (PlanKernel::arg_buffers/arg_values): its source depends
  // only on the configuration below, never on sizes, strides or the scale, so one program serves
  // every graph with that configuration and the runtime may carry it prebuilt. The batch dims
  // (at least kBatchDims; unused ones of size 1 in front) and every offset, stride and size are
  // arguments.
  const size_t nb = std::max(kBatchDims, a.batch.size());
  const size_t pad = nb - a.batch.size();
  // Rows are 16-byte aligned where a view's offset and strides are multiples of 8 elements
  // (buffers start at multiples of kBufferAlignment); statically known for static views (the
  // other tile loader is then not compiled), else checked by the kernel.
  static_assert(kBufferAlignment % 16 == 0, "the flash kernel's tiles are copied 16 bytes at a time");
  auto aligned = [](const auto& view) {
    std::vector<SymInt> parts = view.batch_strides;
    parts.push_back(view.offset);
    parts.push_back(view.row_stride);
    for (const SymInt& p : parts)
      if (!p.is_static() || p.hint() % 8 != 0) return false;
    return true;
  };
  const bool static_aligned = aligned(a.q_view) && aligned(a.k_view) && aligned(a.v_view);
  // Rows of q, k and v one after the other (row stride = head dim, the usual layout): the strides
  // are literals (a runtime stride in the tile loaders' addresses cost the suite's attention 9%
  // on the H200: 0.2551 against 0.2770 ms).
  auto packed = [](const SymInt& row_stride, int64_t dim) { return row_stride.is_static() && row_stride.hint() == dim; };
  const bool dense = packed(a.q_view.row_stride, a.d) && packed(a.k_view.row_stride, a.d) && packed(a.v_view.row_stride, a.dv);
  const char* dt = a.dtype == DType::bf16 ? "bf16" : "f16";
  // The mask's kind (kiln_flash's MK): 0 none, 1 bool, 2 of the attention's dtype.
  const bool masked = a.mask >= 0;
  KILN_CHECK(!masked || a.mask_dtype == DType::bool_ || a.mask_dtype == a.dtype, "cuda codegen: attention kernel ",
             k.name, " has a ", dtype_name(a.mask_dtype), " mask; the fused kernel takes a bool one or one of its dtype");
  const int mask_kind = !masked ? 0 : a.mask_dtype == DType::bool_ ? 1 : 2;
  // NEG (the row's largest scaled score is its smallest raw one) only matters to the unmasked
  // softmax: masked programs are one per mask kind whatever the scale's sign.
  const bool neg = a.scale < 0 && !masked;
  pk.entry = "kiln_flash_" + std::string(sm90 ? "sm90_" : "") + dt + "_d" + std::to_string(a.d) + "_v" + std::to_string(a.dv) + "_t" +
             std::to_string(tiles) + "_c" + std::to_string(bc) + (neg ? "_neg" : "_pos") +
             (static_aligned ? "_a16" : "_any") + (dense ? "_dense" : "_strided") + "_b" + std::to_string(nb) +
             (mask_kind == 1 ? "_mbool" : mask_kind == 2 ? "_madd" : "") + (a.causal ? "_causal" : "");
  pk.arg_buffers = {a.q, a.k, a.v};
  if (masked) pk.arg_buffers.push_back(a.mask);
  pk.arg_buffers.push_back(a.out);
  // The kernel's value parameters, in order, and what the runtime passes for each: one list, so
  // the signature and PlanKernel::arg_values cannot disagree.
  std::vector<std::pair<std::string, SymInt>> params = {{"lq", a.lq}, {"lk", a.lk}};
  for (size_t d = 0; d < nb; ++d) {
    const std::string i = std::to_string(d);
    const bool real = d >= pad;
    params.emplace_back("n" + i, real ? a.batch[d - pad] : SymInt(1));
    params.emplace_back("qs" + i, real ? a.q_view.batch_strides[d - pad] : SymInt(0));
    params.emplace_back("ks" + i, real ? a.k_view.batch_strides[d - pad] : SymInt(0));
    params.emplace_back("vs" + i, real ? a.v_view.batch_strides[d - pad] : SymInt(0));
    if (masked) params.emplace_back("ms" + i, real ? a.mask_view.batch_strides[d - pad] : SymInt(0));
  }
  params.insert(params.end(), {{"qo", a.q_view.offset}, {"ko", a.k_view.offset}, {"vo", a.v_view.offset},
                               {"q_rs", a.q_view.row_stride}, {"k_rs", a.k_view.row_stride}, {"v_rs", a.v_view.row_stride}});
  if (masked)
    params.insert(params.end(), {{"mo", a.mask_view.offset}, {"m_rs", a.mask_view.row_stride}, {"m_cs", a.mask_key_stride}});
  // The scale in base 2, or with a mask in natural units (kiln_flash_masked_softmax).
  const float scale_log2 = static_cast<float>(masked ? a.scale : a.scale * 1.4426950408889634);
  uint32_t bits = 0;
  std::memcpy(&bits, &scale_log2, sizeof bits);
  params.emplace_back("scale_bits", SymInt(static_cast<int64_t>(bits)));

  const std::string R = std::to_string(rows);
  // sm90: 2 blocks an SM where the registers allow (122 for head dims of 64; 174 for 128).
  const std::string bounds = sm90 ? std::to_string(pk.launch.block) + (a.d <= 64 && a.dv <= 64 ? ", 2" : ", 1")
                                  : std::to_string(32 * kWarps);
  std::string src = "extern \"C\" __global__ void __launch_bounds__(" + bounds + ") " + pk.entry +
                    "(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k, const unsigned short* "
                    "__restrict__ v, " + std::string(masked ? "const unsigned char* __restrict__ m, " : "") +
                    "unsigned short* __restrict__ o";
  for (const auto& [name, value] : params) {
    src += ", long long " + name;
    pk.arg_values.push_back(value);
  }
  src += ") {\n";
  src += "  const long long tiles = (lq + " + std::to_string(rows - 1) + ") / " + R + ";\n";
  std::string batch_count = "n0";
  for (size_t d = 1; d < nb; ++d) batch_count += " * n" + std::to_string(d);
  src += "  if ((long long)blockIdx.x >= " + batch_count + " * tiles) return;\n";
  if (static_aligned) {
    src += "  const bool qa = true, ka = true, va = true;\n";
  } else {
    auto check = [&](const char* off, const char* rs, const char* bs) {
      std::string c = std::string("((") + off + " | " + rs;
      for (size_t d = 0; d < nb; ++d) c += std::string(" | ") + bs + std::to_string(d);
      return c + ") & 7) == 0";
    };
    src += "  const bool qa = " + check("qo", "q_rs", "qs") + ", ka = " + check("ko", "k_rs", "ks") + ", va = " +
           check("vo", "v_rs", "vs") + ";\n";
  }
  src += "  long long bi = (long long)blockIdx.x / tiles;\n";
  src += "  const long long m0 = ((long long)blockIdx.x % tiles) * " + R + ";\n";
  src += "  const long long oo = bi * lq * " + std::to_string(a.dv) + ";\n";
  // A causal mask hides every key after a query's row: the block's rows [m0, m0 + R) need the
  // keys before m0 + R only, the tiles after them are skipped (about half of the work).
  if (a.causal) src += "  if (lk > m0 + " + R + ") lk = m0 + " + R + ";\n";
  for (size_t d = nb; d-- > 0;) {
    const std::string i = std::to_string(d);
    src += "  { const long long i = bi % n" + i + "; bi /= n" + i + "; qo += i * qs" + i + "; ko += i * ks" + i +
           "; vo += i * vs" + i + ";" + (masked ? " mo += i * ms" + i + ";" : "") + " }\n";
  }
  src += std::string(sm90 ? "  kiln_flash_wg<" : "  kiln_flash<") + (a.dtype == DType::bf16 ? "true" : "false") + ", " + std::to_string(a.d) + ", " +
         std::to_string(a.dv) + ", " + std::to_string(tiles) + ", " + std::to_string(bc) + ", " +
         (neg ? "true" : "false") + ", " + std::to_string(mask_kind) +
         ">(q + qo, k + ko, v + vo, o + oo, " +
         (dense ? std::to_string(a.d) + "LL, " + std::to_string(a.d) + "LL, " + std::to_string(a.dv) + "LL"
                : std::string("q_rs, k_rs, v_rs")) +
         ", lq, lk, m0, __int_as_float((int)scale_bits), qa, ka, va, " +
         (mask_kind == 0 ? "nullptr, 0, 0" : mask_kind == 1 ? "m + mo, m_rs, m_cs" : "(const unsigned short*)m + mo, m_rs, m_cs") +
         ");\n}\n";
  return src;
}

}  // namespace kiln::cuda::detail
