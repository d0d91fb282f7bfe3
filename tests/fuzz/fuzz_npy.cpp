// libFuzzer target for the .npy reader (frontends/npy): parse_npy, the reader load_npy uses, on
// arbitrary bytes may give a tensor or throw kiln::Error; any other exception (kiln::InternalError,
// a bug in Kiln, included: it is not a kiln::Error, so it escapes and libFuzzer reports the
// abort), a crash or a sanitizer report is a finding. A tensor that loads must save and load
// back equal (dtype, sizes, bytes), and its second save must give the bytes of its first.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "kiln/graph/error.h"
#include "fuzz_util.h"
#include "kiln/npy/npy.h"

namespace {

[[noreturn]] void finding(const char* what, const std::string& detail) {
  std::fprintf(stderr, "%s: %s\n", what, detail.c_str());
  std::abort();
}

bool same(const kiln::TensorData& a, const kiln::TensorData& b) {
  if (a.dtype != b.dtype || a.sizes != b.sizes) return false;
  const size_t n = static_cast<size_t>(a.numel() * kiln::dtype_size(a.dtype));
  return n == 0 || std::memcmp(a.data(), b.data(), n) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  kiln::TensorData t;
  try {
    t = kiln::npy::parse_npy(bytes, "fuzz.npy");
  } catch (const kiln::Error& e) {
    kiln::fuzz::rejected(e);
    return 0;  // rejected with a message: fine (only kiln::Error: an InternalError must escape)
  }
  if (!t.is_contiguous() || t.offset != 0) finding("a loaded array is not contiguous", "");
  std::string once;
  try {
    once = kiln::npy::npy_bytes(t);
    const kiln::TensorData back = kiln::npy::parse_npy(once, "round-trip.npy");
    if (!same(t, back)) finding("save then load changed the array", once.substr(0, 200));
    if (kiln::npy::npy_bytes(back) != once) finding("a second save gave other bytes", once.substr(0, 200));
  } catch (const kiln::Error& e) {
    finding("an array that loaded does not round-trip", e.what());
  }
  return 0;
}
