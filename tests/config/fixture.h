// Shared by the config tests: a clean configuration (no KILN_* option variables, no set()
// values) before and after each test, and a helper to check an error's message.
#pragma once

#include "kiln_test_util.h"

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

using kiln_test_util::contains;
using kiln_test_util::error_of;

}  // namespace kiln_test
