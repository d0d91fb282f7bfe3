// The counter-based random numbers every Kiln target shares, so that rand and randn(shape, seed)
// give the same values on the reference interpreter, the CPU, CUDA and Vulkan.
//
// One primitive, the op table's `philox` (a pointwise op, so targets compute it inside fused
// kernels): given a 64-bit key and a 64-bit counter,
//   (r0, r1, r2, r3) = Philox4x32-10((counter & 0xffffffff, counter >> 32, 0, 0),
//                                    (key & 0xffffffff, key >> 32))
//                      (Salmon et al. 2011, Random123's philox4x32_R with R = 10)
//   philox(key, counter, word) = r[word] >> 8         24 bits, exact in float
// rand and randn decompose into it (sdk/graph/src/op_table.cpp), with key = seed (+ the run-time
// key input) and counter = i, the element's flat row-major index, so element i depends only on
// (key, i), never on the tensor's size or on which thread computes it:
//   rand(key, i)  = float(philox(key, i, 0)) * 2^-24                   in [0, 1)
//   u1 = float(philox(key, i, 0) + 1) * 2^-24                          in (0, 1]
//   u2 = float(philox(key, i, 1)) * 2^-24                              in [0, 1)
//   randn(key, i) = sqrtf(-2.0f * logf(u1)) * cosf(6.2831855f * u2)   all in float
//   randint(low, high, key, i) = low + min(floor(u * (high - low)), high - low - 1),
//     u = (philox(key, i, 2) * 2^24 + philox(key, i, 3)) * 2^-48       in double, exact
//     (the C++ frontend's randint, written over philox directly)
// The float operations are IEEE single precision; logf and cosf differ between math libraries
// by an ulp or so, which is the only place targets may disagree. (The reference interpreter runs
// the decomposition, each op rounded to f32 from double, so its randn may differ from
// randn_at by an ulp too.) rand_at and randn_at make the same numbers on the host: inputs of
// `kiln run`, test data.
#pragma once

#include <cmath>
#include <cstdint>

#include "kiln/graph/philox.h"

namespace kiln::eval {

// Element `index` of rand(key): uniform in [0, 1).
inline float rand_at(uint64_t key, uint64_t index) {
  return static_cast<float>(philox_bits(key, index, 0)) * 0x1p-24f;
}

// Element `index` of randn(key): a standard normal sample (see the scheme above).
inline float randn_at(uint64_t key, uint64_t index) {
  const float u1 = static_cast<float>(philox_bits(key, index, 0) + 1u) * 0x1p-24f;  // (0, 1]
  const float u2 = static_cast<float>(philox_bits(key, index, 1)) * 0x1p-24f;       // [0, 1)
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831855f * u2);
}

}  // namespace kiln::eval
