// What the fuzzers of tests/fuzz share.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>

#include "kiln/graph/error.h"
#include "kiln/graph/symint.h"
#include "kiln/graph/tensor_data.h"
#if KILN_FUZZ_JIT
#include <cstring>
#include <vector>

#include "kiln/cpu/executable.h"
#endif

namespace kiln::fuzz {

// A kiln::Error the fuzzer accepts (a clean rejection): printed when KILN_FUZZ_VERBOSE is set,
// to see what the seeds and a reproducer are rejected for (e.g. `KILN_FUZZ_VERBOSE=1
// fuzz_npy corpus/npy/*`).
inline void rejected(const kiln::Error& e) {
  static const bool verbose = std::getenv("KILN_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "rejected: %s\n", e.what());
}

// s at the symbol values, nullopt when a symbol has no value or a product or sum leaves int64.
inline std::optional<int64_t> checked_evaluate(const SymInt& s, std::span<const int64_t> values) {
  if (s.is_static()) return s.hint();
  const SymExpr e = s.expr();  // a copy: terms() of the temporary would dangle
  int64_t total = 0;
  for (const SymTerm& t : e.terms()) {
    int64_t v = t.coeff;
    for (SymbolId id : t.symbols)
      if (id >= values.size() || __builtin_mul_overflow(v, values[id], &v)) return std::nullopt;
    if (__builtin_add_overflow(total, v, &total)) return std::nullopt;
  }
  return total;
}

#if KILN_FUZZ_JIT
// Copies of `inputs` in cpu runtime buffers (with KILN_CPU_GUARD_PAGES set, each ending just
// before an inaccessible page), for the fuzzers that run generated kernels, which no sanitizer sees.
inline std::vector<TensorData> guarded_copies(std::span<const TensorData> inputs) {
  std::vector<TensorData> out;
  for (const TensorData& t : inputs) {
    const size_t n = static_cast<size_t>(t.numel() * dtype_size(t.dtype));
    TensorData c = t;
    c.storage = cpu::allocate_host_buffer(n);
    if (n > 0) std::memcpy(c.data(), t.data(), n);
    out.push_back(std::move(c));
  }
  return out;
}
#endif

}  // namespace kiln::fuzz
