// Helpers every Boost.Test suite of Kiln shares: checking error messages.
#pragma once

#include <boost/test/unit_test.hpp>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "kiln/graph/error.h"

namespace kiln_test_util {

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// How often `part` occurs in `text`, not overlapping.
inline size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

// Runs fn, requires it to throw kiln::Error, and returns the message.
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const kiln::Error& e) {
    return e.what();
  }
  BOOST_ERROR("expected kiln::Error, nothing was thrown");
  return "";
}

// A whole file's bytes ("" when it cannot be read), and writing bytes to a file.
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace kiln_test_util
