// Helpers every Boost.Test suite of Kiln shares: checking error messages.
#pragma once

#include <boost/test/unit_test.hpp>
#include <functional>
#include <string>

#include "kiln/graph/error.h"

namespace kiln_test_util {

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
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

}  // namespace kiln_test_util
