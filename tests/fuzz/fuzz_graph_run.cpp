// libFuzzer target for the graph format and the reference interpreter together: from_json on
// arbitrary bytes, then, for a graph that loads and whose inputs and nodes are all small at its
// symbols' example values (or their minimum, when an example is large), run_graph on
// deterministic inputs of those sizes. Loading and running may throw kiln::Error; any other
// exception (kiln::InternalError, a bug in Kiln, included: it escapes and libFuzzer reports the
// abort), a crash or a sanitizer report is a finding. An output must have its node's dtype and
// the sizes its node's type gives at those symbol values.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/eval/interpreter.h"
#include "kiln/format/graph_json.h"
#include "kiln/graph/error.h"
#include "fuzz_util.h"

namespace {

constexpr int64_t kMaxSymbol = 64;           // symbols are bound to values at most this
constexpr int64_t kMaxElements = 1 << 16;    // per tensor, and all inputs together
constexpr int64_t kMaxAllElements = 1 << 20; // every node together

// The sizes of a type at the symbol values, nullopt when one is negative, overflows, or the
// element count passes `cap`.
std::optional<std::vector<int64_t>> small_sizes(const kiln::SymShape& shape, std::span<const int64_t> values,
                                                int64_t cap, int64_t* count) {
  std::vector<int64_t> sizes;
  int64_t n = 1;
  for (const kiln::SymInt& s : shape) {
    const std::optional<int64_t> v = kiln::fuzz::checked_evaluate(s, values);
    if (!v || *v < 0) return std::nullopt;
    sizes.push_back(*v);
    if (__builtin_mul_overflow(n, std::max<int64_t>(*v, 1), &n) || n > cap) return std::nullopt;
  }
  *count = n;
  return sizes;
}

// Deterministic values: small integers and halves for floats (some negative, some zero), 0..3
// for integers (valid indices into small dims), alternating for bool.
void fill(kiln::TensorData& t, uint64_t salt) {
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t h = (static_cast<uint64_t>(i) + salt) * 0x9E3779B97F4A7C15ull;
    const int64_t k = static_cast<int64_t>((h >> 33) % 9) - 4;  // -4..4
    switch (t.dtype) {
      case kiln::DType::f32: t.data_as<float>()[i] = static_cast<float>(k) / 2; break;
      case kiln::DType::f64: t.data_as<double>()[i] = static_cast<double>(k) / 2; break;
      case kiln::DType::f16:
      case kiln::DType::bf16: {
        // +-k/2 in both 16-bit formats: exact small values (0, 0.5, 1, 1.5, 2 and negatives).
        static const uint16_t f16[] = {0x0000, 0x3800, 0x3C00, 0x3E00, 0x4000};
        static const uint16_t bf16[] = {0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000};
        const uint16_t mag = (t.dtype == kiln::DType::f16 ? f16 : bf16)[k < 0 ? -k : k];
        const uint16_t bits = static_cast<uint16_t>(mag | (k < 0 ? 0x8000 : 0));
        std::memcpy(static_cast<char*>(t.data()) + 2 * i, &bits, 2);
        break;
      }
      case kiln::DType::i32: t.data_as<int32_t>()[i] = static_cast<int32_t>(k < 0 ? -k - 1 : k) % 4; break;
      case kiln::DType::i64: t.data_as<int64_t>()[i] = (k < 0 ? -k - 1 : k) % 4; break;
      case kiln::DType::bool_: static_cast<unsigned char*>(t.data())[i] = static_cast<unsigned char>(k > 0); break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::Graph g;
  try {
    g = kiln::format::from_json(text, "fuzz.json");
  } catch (const kiln::Error& e) {
    kiln::fuzz::rejected(e);
    return 0;  // rejected with a message: fine (only kiln::Error: an InternalError must escape)
  }
  // Symbol values: the example where it is small and in range, else the minimum where that is.
  std::vector<int64_t> values;
  for (const kiln::SymbolInfo& s : g.shapes().symbols()) {
    int64_t v = s.example;
    if (v < s.min || v > s.max || v > kMaxSymbol) v = s.min;
    if (v < 0 || v > kMaxSymbol || v > s.max) return 0;
    values.push_back(v);
  }
  // Every node small at those values (the interpreter computes each one), the inputs too.
  int64_t all = 0;
  for (const kiln::Node& n : g.nodes()) {
    int64_t count = 0;
    if (!small_sizes(n.meta.sizes, values, kMaxElements, &count)) return 0;
    all += count;
    if (all > kMaxAllElements) return 0;
  }
  std::vector<kiln::TensorData> inputs;
  int64_t in_total = 0;
  for (kiln::NodeId i : g.inputs()) {
    const kiln::Node& n = g.node(i);
    int64_t count = 0;
    std::vector<int64_t> sizes = *small_sizes(n.meta.sizes, values, kMaxElements, &count);
    in_total += count;
    if (in_total > kMaxElements) return 0;
    inputs.push_back(kiln::TensorData::empty_host(n.meta.dtype, std::move(sizes)));
    fill(inputs.back(), static_cast<uint64_t>(i) * 1000003u);
  }
  std::vector<kiln::TensorData> outs;
  try {
    outs = kiln::eval::run_graph(g, inputs);
  } catch (const kiln::Error& e) {
    kiln::fuzz::rejected(e);
    return 0;  // e.g. an index out of range, a violated shape fact: fine
  }
  // What ran must be what the graph says: one output per graph output, of its node's type.
  if (outs.size() != g.outputs().size()) {
    std::fprintf(stderr, "run_graph gave %zu outputs for a graph of %zu\n", outs.size(), g.outputs().size());
    std::abort();
  }
  std::vector<int64_t> bound;
  try {
    bound = kiln::eval::bind_symbols(g, inputs);
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "run_graph ran, but bind_symbols refuses the same inputs: %s\n", e.what());
    std::abort();
  }
  for (size_t o = 0; o < outs.size(); ++o) {
    const kiln::TensorMeta& m = g.node(g.outputs()[o]).meta;
    int64_t count = 0;
    const std::optional<std::vector<int64_t>> want = small_sizes(m.sizes, bound, kMaxElements, &count);
    if (outs[o].dtype != m.dtype || !want || outs[o].sizes != *want) {
      std::fprintf(stderr, "output %zu is %s%s, its node says %s%s\n", o, std::string(kiln::dtype_name(outs[o].dtype)).c_str(),
                   kiln::shape_str(kiln::static_shape(outs[o].sizes)).c_str(), std::string(kiln::dtype_name(m.dtype)).c_str(),
                   kiln::shape_str(m.sizes).c_str());
      std::abort();
    }
  }
  return 0;
}
