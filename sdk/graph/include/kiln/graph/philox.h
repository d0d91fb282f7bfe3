// The op table's one random primitive, `philox` (ops.h), as the reference computes it and every
// codegen writes it out: Philox4x32-10 (Salmon et al. 2011, Random123's philox4x32_R with R = 10)
// over a 64-bit key and a 64-bit counter, the top 24 bits of one of its four words. rand and randn
// are built on it (their formulas: sdk/eval/include/kiln/eval/random.h). Standard library only.
#pragma once

#include <array>
#include <cstdint>

namespace kiln {

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

// The op `philox`: the top 24 bits of word `word` (0-3) for (key, counter).
inline uint32_t philox_bits(uint64_t key, uint64_t counter, int word) {
  const std::array<uint32_t, 4> r =
      philox4x32_10({static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0u, 0u},
                    {static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)});
  return r[static_cast<size_t>(word & 3)] >> 8;
}

}  // namespace kiln
