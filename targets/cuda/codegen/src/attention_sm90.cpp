// Fused attention on Hopper (sm_90a): the flash kernel of attention.cpp with warpgroup MMA
// (wgmma), FlashAttention-3's loop without its warp specialisation. Plans generated for an sm_90
// device (CodegenOptions::arch 90) use it for head dims of 64 and 128; the runtime compiles
// their programs for sm_90a. Measured on the H200 at the suite's attention_bf16 (docs/cuda.md):
// 0.183-0.185 ms against 0.254-0.260 for the mma.sync kernel in the same calls, 0.198-0.203 for
// torch.compile's best and 0.168-0.182 for torch's own SDPA.
//
// Per block: MT = 2 warpgroups (256 threads), each owning 64 query rows; key tiles of 64. Q,
// and K and V in 4 stages (3 or 2 where 4 do not fit), sit in dynamic shared memory with the
// 128-byte swizzle wgmma reads (cp.async, 16 bytes a thread; element copies where rows are not
// 16-byte aligned). S = Q K^T reads both from shared memory; O += P V takes P from registers
// (the softmax's accumulators rounded to 16 bits) and V through a transposing descriptor. Each
// iteration issues S of the next tile with P V of this one, then the next loads, then the online
// softmax (base 2, as the mma.sync kernel's) while P V runs.
#include <cstdint>
#include <cstdio>
#include <string>

#include "internal.h"

namespace kiln::cuda::detail {

namespace {

// The wgmma wrappers: D[64 x N] (+)= A B with f32 accumulators for N = 64 and 128, bf16 or f16;
// "ss": A and B from shared-memory descriptors (K-major), "rs": A from registers, B MN-major.
std::string mma_wrappers() {
  auto list = [](int from, int n, const char* fmt) {
    std::string s;
    for (int i = 0; i < n; ++i) {
      char buf[32];
      std::snprintf(buf, sizeof buf, fmt, from + i, i);
      s += (i ? ", " : "") + std::string(buf);
    }
    return s;
  };
  auto one = [&](int n, const char* ty, bool regs_a) {
    const int nd = n / 2;
    const std::string N = std::to_string(n), T = ty;
    std::string a = regs_a ? "{" + list(nd, 4, "%%%d") + "}" : "%" + std::to_string(nd);
    const int b = regs_a ? nd + 4 : nd + 1, scale = b + 1;
    std::string s = "    asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %" + std::to_string(scale) + ", 0;\\n\"\n";
    s += "                 \"wgmma.mma_async.sync.aligned.m64n" + N + "k16.f32." + T + "." + T + " {" + list(0, nd, "%%%d") + "}, " +
         a + ", %" + std::to_string(b) + ", p, 1, 1" + (regs_a ? ", 1" : ", 0, 0") + ";\\n}\\n\"\n";
    s += "                 : " + list(0, nd, "\"+f\"(d[%d])") + "\n";
    s += regs_a ? "                 : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(db), \"r\"(scale_d) : \"memory\");\n"
                : "                 : \"l\"(da), \"l\"(db), \"r\"(scale_d) : \"memory\");\n";
    return s;
  };
  auto dispatch = [&](bool regs_a) {
    std::string s;
    for (int n : {64, 128}) {
      s += std::string("  ") + (n == 64 ? "" : "else ") + "if constexpr (N == " + std::to_string(n) + ") {\n";
      s += "    if constexpr (BF16)\n" + one(n, "bf16", regs_a) + "    else\n" + one(n, "f16", regs_a) + "  }\n";
    }
    return s;
  };
  return "// D[64 x N] (+)= A[64 x 16] B[16 x N]; A and B (K-major, no transpose) from shared-memory descriptors.\n"
         "template <bool BF16, int N>\n"
         "__device__ __forceinline__ void kiln_wgmma_ss(float* d, unsigned long long da, unsigned long long db, int scale_d) {\n" +
         dispatch(false) +
         "}\n"
         "// D[64 x N] (+)= A[64 x 16] B[16 x N]; A from registers (the m16n8k16 A fragment of each warp's 16 rows),\n"
         "// B from a shared-memory descriptor, MN-major (transposed).\n"
         "template <bool BF16, int N>\n"
         "__device__ __forceinline__ void kiln_wgmma_rs(float* d, const unsigned* a, unsigned long long db, int scale_d) {\n" +
         dispatch(true) + "}\n";
}

// The kernel body and its helpers (the templates every sm_90 attention kernel's wrapper calls).
constexpr const char* kBody = R"KILN(
// Shared-memory matrix descriptor of wgmma (sm_90a), 128-byte swizzle: start address >> 4 (bits
// 0-13), leading byte offset >> 4 (16-29), stride byte offset >> 4 (32-45), base offset 0 (49-51),
// layout type 1 = SWIZZLE_128B (62-63).
__device__ __forceinline__ unsigned long long kiln_wg_desc(unsigned addr, unsigned lbo, unsigned sbo) {
  return (unsigned long long)((addr & 0x3ffffu) >> 4) | ((unsigned long long)((lbo >> 4) & 0x3fffu) << 16) |
         ((unsigned long long)((sbo >> 4) & 0x3fffu) << 32) | (1ull << 62);
}
__device__ __forceinline__ void kiln_wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void kiln_wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void kiln_wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// Keeps the compiler from moving uses of a register that an in-flight wgmma reads or writes across
// the wait before it.
__device__ __forceinline__ void kiln_wg_pin(float& x) { asm volatile("" : "+f"(x)::"memory"); }
__device__ __forceinline__ void kiln_wg_pin(unsigned& x) { asm volatile("" : "+r"(x)::"memory"); }
__device__ __forceinline__ void kiln_cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void kiln_cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
// cp.async / ordinary shared-memory writes made visible to the tensor cores (async proxy), then a
// block barrier.
__device__ __forceinline__ void kiln_wg_publish() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
}

// ROWS x COLS elements (COLS a multiple of 64) from global rows (row_stride apart, unit stride
// within) to shared memory at s (1024-byte aligned) as COLS / 64 column blocks, each ROWS rows of
// 128 bytes with the 128-byte swizzle (16-byte chunk c of row r at chunk c ^ (r % 8)): the layout of
// wgmma's SWIZZLE_128B atoms (8 rows x 128 bytes). Rows at or past `rows` become 0. vec: 16-byte
// cp.async (g and row_stride 16-byte aligned); otherwise element loads and st.shared.
template <int ROWS, int COLS, int THREADS>
__device__ __forceinline__ void kiln_wg_tile(unsigned s, const unsigned short* g, long long row_stride, long long rows,
                                             bool vec) {
  constexpr int CHUNKS = COLS / 8, TOTAL = ROWS * CHUNKS;
#pragma unroll
  for (int it = 0; it < (TOTAL + THREADS - 1) / THREADS; ++it) {
    const int i = it * THREADS + threadIdx.x;
    if (TOTAL % THREADS != 0 && i >= TOTAL) break;
    const int r = i / CHUNKS, cc = i % CHUNKS;
    const unsigned dst = s + (cc >> 3) * (ROWS * 128) + r * 128 + (((cc & 7) ^ (r & 7)) << 4);
    const bool in = r < rows;
    const unsigned short* src = g + (in ? (long long)r * row_stride + cc * 8 : 0);
    if (vec) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(in ? 16 : 0) : "memory");
    } else {
      unsigned w[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) w[e] = in ? (unsigned)src[2 * e] | ((unsigned)src[2 * e + 1] << 16) : 0u;
      asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                   : "memory");
    }
  }
}

// Online softmax (base 2) of a warp's 16 x BC score tile in accumulator layout (mma.sync's
// m16n8 tiles one after the other, as wgmma's m64nBC gives each warp its 16 rows: s[4 n + e] is
// row lane / 4 + 8 (e / 2), key 8 n + 2 (lane % 4) + e % 2), in place:
// scores become p = exp2(s * scale_log2 - max). Keys at or past lk - key0 are masked. alpha: the
// factor for the old accumulators and sums of each of the thread's two rows. Each row's max is
// shared by its 4 threads through shuffles; row sums stay per thread until the end.
template <int BC, bool NEG>
__device__ __forceinline__ void kiln_wg_softmax(float* s, float* row_max, float* row_sum, float* alpha, float scale_log2,
                                                long long key0, long long lk) {
  const float kNegInf = __int_as_float(0xff800000);
  const int lane = threadIdx.x % 32;
  if (key0 + BC > lk) {  // keys past lk: a raw score whose scaled value is -inf (p = 0)
#pragma unroll
    for (int n = 0; n < BC / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (key0 + n * 8 + 2 * (lane % 4) + (e & 1) >= lk) s[4 * n + e] = NEG ? -kNegInf : kNegInf;
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float r = NEG ? -kNegInf : kNegInf;
#pragma unroll
    for (int n = 0; n < BC / 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) r = NEG ? fminf(r, s[4 * n + 2 * h + e]) : fmaxf(r, s[4 * n + 2 * h + e]);
    r = NEG ? fminf(r, __shfl_xor_sync(0xffffffffu, r, 1)) : fmaxf(r, __shfl_xor_sync(0xffffffffu, r, 1));
    r = NEG ? fminf(r, __shfl_xor_sync(0xffffffffu, r, 2)) : fmaxf(r, __shfl_xor_sync(0xffffffffu, r, 2));
    const float m = fmaxf(row_max[h], r * scale_log2);
    const float base = m == kNegInf ? 0.f : m;
    alpha[h] = kiln_ex2(row_max[h] - base);
    row_max[h] = m;
    float sum = 0.f;
#pragma unroll
    for (int n = 0; n < BC / 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float p = kiln_ex2(fmaf(s[4 * n + 2 * h + e], scale_log2, -base));
        s[4 * n + 2 * h + e] = p;
        sum += p;
      }
    row_sum[h] = row_sum[h] * alpha[h] + sum;
  }
}
// P (accumulator layout, BC keys) -> the register A fragments of BC / 16 wgmma k-steps (the
// m16n8k16 A layout of each warp's 16 rows: p[4 kc + i] holds keys 16 kc + 8 (i / 2) + 2 (lane % 4)
// + {0, 1} of row lane / 4 + 8 (i % 2)).
template <bool BF16, int BC>
__device__ __forceinline__ void kiln_wg_pack(unsigned* p, const float* s) {
#pragma unroll
  for (int kc = 0; kc < BC / 16; ++kc)
#pragma unroll
    for (int i = 0; i < 4; ++i) p[4 * kc + i] = kiln_pack2<BF16>(s[8 * kc + 2 * i], s[8 * kc + 2 * i + 1]);
}

// Dynamic shared memory of kiln_flash_wg<BF16, D, DV, MT, BC, NEG>: the Q tile, NST stages of K
// and V tiles (4 where they fit in 227 KB, else 3 or 2), 1024 bytes of slack to align the base to
// the swizzle atom. D = DV = 64, MT = 2, BC = 64: 16384 + 4 * 16384 + 1024 = 82944 bytes.
template <int D, int DV, int MT, int BC>
struct kiln_flash_wg_smem {
  static constexpr int QB = 64 * MT * D * 2, KB = BC * D * 2, VB = BC * DV * 2, LIMIT = 227 * 1024 - 1024;
  static constexpr int NST = QB + 4 * (KB + VB) <= LIMIT ? 4 : QB + 3 * (KB + VB) <= LIMIT ? 3 : 2;
  static constexpr int bytes = QB + NST * (KB + VB) + 1024;
};

// One block of 128 * MT threads (MT warpgroups, each owning 64 query rows): query rows
// [m0, m0 + 64 * MT) of one batch index; q, k, v, o point at that batch index's first row.
// Arguments as kiln_flash's (scale_log2 = scale * log2(e); NEG: it is negative; qa, ka, va: q, k, v
// and their row strides are 16-byte aligned; MK, mask, m_rs, m_cs: the optional mask, whose
// softmax is kiln_flash_masked_softmax, in natural units: scale_log2 is then the scale). Needs kiln_flash_wg_smem<D, DV, MT, BC>::bytes of
// dynamic shared memory; sm_90a (wgmma). D a multiple of 64 up to 256, DV 64 or 128, BC 64 or 128.
//  S = Q K^T: wgmma m64n{BC}k16, Q and K from shared memory (K-major, 128-byte swizzle).
//  O += P V: wgmma m64n{DV}k16, P from registers (the softmax's accumulators rounded to 16 bits),
//    V from shared memory (MN-major, transposed by the descriptor, 128-byte swizzle).
//  K and V tiles: 16-byte cp.async by all threads into NST stages, cp.async groups
//    G0 = {Q, K0}, G(t + 1) = {K[t + 1], V[t]}, one block barrier per key tile.
//  Iteration j: S of tile j + 1 and O += P V of tile j go to the tensor cores together, then the
//    next loads are issued, then the softmax of tile j + 1 (FlashAttention-3's intra-warpgroup
//    overlap, as far as ptxas's schedule keeps it) and the rescale of O.
template <bool BF16, int D, int DV, int MT, int BC, bool NEG, int MK>
__device__ __forceinline__ void kiln_flash_wg(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
                                              const unsigned short* __restrict__ v, unsigned short* __restrict__ o,
                                              long long q_rs, long long k_rs, long long v_rs, long long lq, long long lk,
                                              long long m0, float scale_log2, bool qa, bool ka, bool va,
                                              const void* __restrict__ mask, long long m_rs, long long m_cs) {
  static_assert(D % 64 == 0 && D <= 256 && (DV == 64 || DV == 128) && (BC == 64 || BC == 128) && MT >= 1 && MT <= 4,
                "kiln_flash_wg: unsupported shape");
  using SM = kiln_flash_wg_smem<D, DV, MT, BC>;
  constexpr int BR = 64 * MT, THREADS = 128 * MT, NST = SM::NST;
  static_assert(SM::bytes <= 227 * 1024, "kiln_flash_wg: tiles too large for shared memory");
  const float kNegInf = __int_as_float(0xff800000);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char kiln_dsmem[];
  const unsigned sq = (kiln_smem(kiln_dsmem) + 1023u) & ~1023u;  // [D / 64][BR][64], swizzled
  const unsigned sk = sq + SM::QB;                               // [NST][D / 64][BC][64]
  const unsigned sv = sk + NST * SM::KB;                         // [NST][DV / 64][BC][64]
  const int wg = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const long long tiles = (lk + BC - 1) / BC;

  // Descriptors (start address in the low 14 bits, in 16-byte units: offsets add there).
  // Q (A, K-major): this warpgroup's 64 rows; 8-row groups 1024 bytes apart (SBO); a k-step of 16
  // columns is 32 bytes along the swizzled 128-byte row, 64-column blocks BR * 128 bytes apart.
  const unsigned long long dq = kiln_wg_desc(sq + wg * 64 * 128, 16, 1024);
  // K (B, K-major): BC rows, likewise. V (B, MN-major): 64-column blocks BC * 128 bytes apart
  // (LBO), 8-key groups 1024 bytes apart (SBO); a k-step of 16 keys is 2048 bytes.
  const unsigned long long dk = kiln_wg_desc(sk, 16, 1024), dv = kiln_wg_desc(sv, BC * 128, 1024);
  auto qk = [&](float* s, int st) {  // S = Q K^T (stage st), one commit group
    kiln_wg_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      kiln_wgmma_ss<BF16, BC>(s, dq + (((kk / 4) * BR * 128 + (kk % 4) * 32) >> 4),
                              dk + ((st * SM::KB + (kk / 4) * BC * 128 + (kk % 4) * 32) >> 4), kk > 0);
    kiln_wg_commit();
  };
  float acc[DV / 2];  // O, accumulator layout
  auto pv = [&](const unsigned* p, int st) {  // O += P V (stage st), one commit group
    kiln_wg_fence();
#pragma unroll
    for (int kc = 0; kc < BC / 16; ++kc) kiln_wgmma_rs<BF16, DV>(acc, p + 4 * kc, dv + ((st * SM::VB + kc * 2048) >> 4), 1);
    kiln_wg_commit();
  };

  float s[BC / 2];
  unsigned p[BC / 4], pn[BC / 4];
  float row_max[2] = {kNegInf, kNegInf}, row_sum[2] = {0.f, 0.f}, alpha[2];
  auto softmax = [&](long long key0) {  // of this warp's 16 x BC scores s
    if constexpr (MK != 0)
      kiln_flash_masked_softmax<MK, BF16, BC>(s, row_max, row_sum, alpha, mask, m_rs, m_cs, m0 + wg * 64 + warp * 16, lq,
                                              key0, lk, scale_log2);
    else
      kiln_wg_softmax<BC, NEG>(s, row_max, row_sum, alpha, scale_log2, key0, lk);
  };
#pragma unroll
  for (int i = 0; i < DV / 2; ++i) acc[i] = 0.f;
#pragma unroll
  for (int i = 0; i < BC / 2; ++i) s[i] = 0.f;

  auto load = [&](long long t) {  // cp.async group G(t + 1) = {K[t + 1], V[t]}
    if (t + 1 < tiles)
      kiln_wg_tile<BC, D, THREADS>(sk + (int)((t + 1) % NST) * SM::KB, k + (t + 1) * BC * k_rs, k_rs, lk - (t + 1) * BC, ka);
    if (t < tiles) kiln_wg_tile<BC, DV, THREADS>(sv + (int)(t % NST) * SM::VB, v + t * BC * v_rs, v_rs, lk - t * BC, va);
    kiln_cp_commit();
  };
  kiln_wg_tile<BR, D, THREADS>(sq, q + m0 * q_rs, q_rs, lq - m0, qa);
  if (tiles > 0) kiln_wg_tile<BC, D, THREADS>(sk, k, k_rs, lk, ka);
  kiln_cp_commit();  // G0
#pragma unroll
  for (int t = 0; t < NST - 1; ++t) load(t);
  if (tiles > 0) {
    kiln_cp_wait<NST - 1>();  // G0
    kiln_wg_publish();
    qk(s, 0);
    kiln_wg_wait<0>();
#pragma unroll
    for (int i = 0; i < BC / 2; ++i) kiln_wg_pin(s[i]);
    softmax(0);
    kiln_wg_pack<BF16, BC>(p, s);
  }
  for (long long j = 0; j + 1 < tiles; ++j) {
    kiln_cp_wait<NST - 2>();  // G(j + 1): K[j + 1], V[j]
    kiln_wg_publish();        // ... visible to all; iteration j - 1's stages are no longer read
    qk(s, (int)((j + 1) % NST));
    pv(p, (int)(j % NST));
    load(j + NST - 1);        // G(j + NST), into the stages that iteration j - 1 read
    kiln_wg_wait<1>();        // S of tile j + 1 is in
#pragma unroll
    for (int i = 0; i < BC / 2; ++i) kiln_wg_pin(s[i]);
    softmax((j + 1) * BC);
    kiln_wg_pack<BF16, BC>(pn, s);
    kiln_wg_wait<0>();  // O += P V of tile j is in
#pragma unroll
    for (int i = 0; i < DV / 2; ++i) kiln_wg_pin(acc[i]), acc[i] *= alpha[(i / 2) % 2];
#pragma unroll
    for (int i = 0; i < BC / 4; ++i) kiln_wg_pin(p[i]), p[i] = pn[i];
  }
  if (tiles > 0) {  // O += P V of the last tile
    kiln_cp_wait<0>();
    kiln_wg_publish();
    pv(p, (int)((tiles - 1) % NST));
    kiln_wg_wait<0>();
#pragma unroll
    for (int i = 0; i < DV / 2; ++i) kiln_wg_pin(acc[i]);
  }
  kiln_cp_wait<0>();

  // O / sum, rounded once, two elements per store.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = row_sum[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    // No keys (lk == 0): zeros, as the product with an empty v gives; every score -inf: NaN,
    // as softmax gives, or with a mask zeros, as for any row whose softmax is NaN.
    const float inv = l == 0.f ? (lk == 0 ? 0.f : __int_as_float(0x7fc00000)) : 1.f / l;
    const bool zero = MK != 0 && !(l > 0.f);
    const long long row = m0 + wg * 64 + warp * 16 + lane / 4 + 8 * h;
    if (row >= lq) continue;
    unsigned* dst = (unsigned*)(o + row * DV + 2 * (lane % 4));
#pragma unroll
    for (int n = 0; n < DV / 8; ++n)
      dst[n * 4] = zero ? 0u : kiln_pack2<BF16>(acc[4 * n + 2 * h] * inv, acc[4 * n + 2 * h + 1] * inv);
  }
#else
  __trap();  // wgmma needs sm_90a (compile with --gpu-architecture=sm_90a)
#endif
}
)KILN";

}  // namespace

const std::string& flash_sm90_prelude() {
  static const std::string s =
      "\n// ---- fused attention, Hopper warpgroup MMA (targets/cuda/codegen/src/attention_sm90.cpp) ----\n" + mma_wrappers() +
      kBody;
  return s;
}

bool flash_sm90_supports(int64_t d, int64_t dv) { return (d == 64 || d == 128) && (dv == 64 || dv == 128); }

bool uses_flash_sm90(const schedule::Attention& a, const CodegenOptions& o) {
  return o.arch == 90 && o.attention_sm90 && flash_sm90_supports(a.d, a.dv);
}

int64_t flash_sm90_smem_bytes(int64_t d, int64_t dv, int64_t mt, int64_t bc) {
  // kiln_flash_wg_smem<D, DV, MT, BC>::bytes, in the prelude: the same arithmetic.
  const int64_t qb = 64 * mt * d * 2, kb = bc * d * 2, vb = bc * dv * 2, limit = 227 * 1024 - 1024;
  const int64_t stages = qb + 4 * (kb + vb) <= limit ? 4 : qb + 3 * (kb + vb) <= limit ? 3 : 2;
  return qb + stages * (kb + vb) + 1024;
}

}  // namespace kiln::cuda::detail
