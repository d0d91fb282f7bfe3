// The counter-based random numbers every Kiln target shares, so that randn(shape, seed) gives
// the same values on the reference interpreter, the CPU, CUDA and Vulkan.
//
// Takes a 64-bit seed and a flat element index; gives one standard-normal float. Header-only,
// standard library only, so codegen can call it on the host or port it line for line.
//
// The scheme (element i depends only on (seed, i), never on the tensor's size or on which
// thread computes it):
//   key     = (seed & 0xffffffff, seed >> 32)
//   counter = (p & 0xffffffff, p >> 32, 0, 0)          with p = i / 2 (the pair index)
//   (r0, r1, r2, r3) = Philox4x32-10(counter, key)     (Salmon et al. 2011, Random123's philox4x32_R
//                                                       with R = 10; r2 and r3 are unused)
//   u1 = float((r0 >> 8) + 1) * 2^-24                  in (0, 1]; exact in float (24-bit integer)
//   u2 = float(r1 >> 8) * 2^-24                        in [0, 1); exact in float
//   radius = sqrtf(-2.0f * logf(u1))                   all in float
//   theta  = 6.2831855f * u2                           (2*pi rounded to float)
//   randn(seed, i) = i even ? radius * cosf(theta) : radius * sinf(theta)
// So elements 2p and 2p+1 are the two halves of one Box-Muller pair. The float operations
// are IEEE single precision; logf/sinf/cosf differ between math libraries by an ulp or so,
// which is the only place targets may disagree.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

namespace kiln::eval {

inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u;  // multiplier applied to counter word 0
inline constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;  // multiplier applied to counter word 2
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;  // Weyl increment of key word 0 (golden ratio)
inline constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;  // Weyl increment of key word 1 (sqrt(3) - 1)

// Philox4x32 with 10 rounds: the key is bumped by the Weyl constants before every round but
// the first; each round is
//   (hi0, lo0) = M0 * c0,  (hi1, lo1) = M1 * c2   (64-bit products split into 32-bit halves)
//   c = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0)
inline std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kPhiloxW0;
      key[1] += kPhiloxW1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * counter[0];
    const uint64_t p1 = static_cast<uint64_t>(kPhiloxM1) * counter[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    counter = {hi1 ^ counter[1] ^ key[0], lo1, hi0 ^ counter[3] ^ key[1], lo0};
  }
  return counter;
}

// Element `index` of randn(seed): a standard normal sample (see the scheme above).
inline float randn_at(uint64_t seed, uint64_t index) {
  const uint64_t pair = index >> 1;
  const std::array<uint32_t, 4> r =
      philox4x32_10({static_cast<uint32_t>(pair), static_cast<uint32_t>(pair >> 32), 0u, 0u},
                    {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  const float u1 = static_cast<float>((r[0] >> 8) + 1u) * 0x1p-24f;  // (0, 1]
  const float u2 = static_cast<float>(r[1] >> 8) * 0x1p-24f;         // [0, 1)
  const float radius = std::sqrt(-2.0f * std::log(u1));
  const float theta = 6.2831855f * u2;
  return (index & 1u) ? radius * std::sin(theta) : radius * std::cos(theta);
}

}  // namespace kiln::eval
