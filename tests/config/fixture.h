// Shared by the config tests: a clean configuration (no KILN_* option variables, no set()
// values) before and after each test, and a helper to check an error's message.
#pragma once

#include <kiln/config/config.h>

#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <functional>
#include <string>

namespace kiln_test {

inline void clear_option_env() {
  for (const auto& option : kiln::config::list_options()) ::unsetenv(option.env_var.c_str());
}

struct CleanConfig {
  CleanConfig() {
    clear_option_env();
    kiln::config::reset_for_testing();
  }
  ~CleanConfig() {
    clear_option_env();
    kiln::config::reset_for_testing();
  }
};

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

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace kiln_test
