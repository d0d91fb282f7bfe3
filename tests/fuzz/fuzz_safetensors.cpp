// libFuzzer target for the .safetensors reader (frontends/safetensors): parse, the reader load
// uses, on arbitrary bytes may give tensors or throw kiln::Error; any other exception
// (kiln::InternalError included: it is not a kiln::Error, so it escapes and libFuzzer reports
// the abort), a crash or a sanitizer report is a finding. What loads must save and load back
// equal (names, dtypes, sizes, bytes, metadata), and its second save must give the bytes of its
// first.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "kiln/graph/error.h"
#include "kiln/safetensors/safetensors.h"

namespace {

[[noreturn]] void finding(const char* what, const std::string& detail) {
  std::fprintf(stderr, "%s: %s\n", what, detail.c_str());
  std::abort();
}

bool same(const kiln::safetensors::Tensors& a, const kiln::safetensors::Tensors& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  for (const auto& [name, x] : a.tensors) {
    auto it = b.tensors.find(name);
    if (it == b.tensors.end()) return false;
    const kiln::TensorData& y = it->second;
    if (x.dtype != y.dtype || x.sizes != y.sizes) return false;
    const size_t n = static_cast<size_t>(x.numel() * kiln::dtype_size(x.dtype));
    if (n && std::memcmp(x.data(), y.data(), n) != 0) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  kiln::safetensors::Tensors t;
  try {
    t = kiln::safetensors::parse(bytes, "fuzz.safetensors");
  } catch (const kiln::Error& e) {
    kiln::fuzz::rejected(e);
    return 0;  // rejected with a message: fine (only kiln::Error: an InternalError must escape)
  }
  for (const auto& [name, x] : t.tensors)
    if (!x.is_contiguous() || x.offset != 0) finding("a loaded tensor is not contiguous", name);
  try {
    const std::string once = kiln::safetensors::to_bytes(t);
    const kiln::safetensors::Tensors back = kiln::safetensors::parse(once, "round-trip.safetensors");
    if (!same(t, back)) finding("save then load changed the tensors", once.substr(0, 200));
    if (kiln::safetensors::to_bytes(back) != once) finding("a second save gave other bytes", once.substr(0, 200));
  } catch (const kiln::Error& e) {
    finding("tensors that loaded do not round-trip", e.what());
  }
  return 0;
}
