// Shared by the format tests.
#pragma once

#include <kiln/format/graph_json.h>
#include <kiln/graph/error.h>

#include <boost/test/unit_test.hpp>
#include <string>
#include <vector>

namespace format_test {

inline kiln::TensorMeta meta(kiln::DType t, kiln::SymShape sizes) {
  kiln::TensorMeta m;
  m.dtype = t;
  m.sizes = std::move(sizes);
  return m;
}

// The message of the kiln::Error that parsing `text` throws ("" when it parses).
inline std::string parse_error(const std::string& text, const std::string& source = "graph.json") {
  try {
    kiln::format::from_json(text, source);
  } catch (const kiln::Error& e) {
    return e.what();
  }
  return "";
}

// Checks that g survives to_json / from_json unchanged and re-serialises to the same bytes,
// in both the indented and the compact form.
inline void check_round_trip(const kiln::Graph& g, const std::string& what) {
  BOOST_TEST_CONTEXT(what) {
    for (int indent : {2, -1}) {
      const std::string text = kiln::format::to_json(g, indent);
      kiln::Graph back;
      try {
        back = kiln::format::from_json(text, what);
      } catch (const kiln::Error& e) {
        BOOST_ERROR("from_json failed: " << e.what() << "\n" << text);
        continue;
      }
      BOOST_TEST((back == g), "round trip changed the graph:\n" << text << "\ngave\n" << kiln::format::to_json(back));
      BOOST_TEST(kiln::format::to_json(back, indent) == text);
    }
  }
}

}  // namespace format_test
