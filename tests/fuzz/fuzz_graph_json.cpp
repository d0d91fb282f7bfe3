// libFuzzer target for the JSON graph format: from_json on arbitrary bytes may succeed or
// throw kiln::Error; any other exception (kiln::InternalError, a bug in Kiln, included: it is
// not a kiln::Error, so it leaves this function and libFuzzer reports the abort), a crash, a
// sanitizer report, or a graph that does not round-trip (to_json, from_json, to_json gives the
// same bytes and an equal graph) is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "kiln/format/graph_json.h"
#include "kiln/graph/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::Graph g;
  try {
    g = kiln::format::from_json(text, "fuzz.json");
  } catch (const kiln::Error&) {
    return 0;  // rejected with a message: fine (only kiln::Error: an InternalError must escape)
  }
  // It parsed: it must serialise and parse back to the same graph and the same bytes.
  std::string once;
  try {
    once = kiln::format::to_json(g);
    const kiln::Graph back = kiln::format::from_json(once, "round-trip.json");
    if (!(back == g)) {
      std::fprintf(stderr, "round trip changed the graph:\n%s\n", once.c_str());
      std::abort();
    }
    if (kiln::format::to_json(back) != once) {
      std::fprintf(stderr, "re-serialisation is not byte-identical:\n%s\n", once.c_str());
      std::abort();
    }
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "a graph that loaded does not round-trip: %s\n%s\n", e.what(), once.c_str());
    std::abort();
  }
  return 0;
}
