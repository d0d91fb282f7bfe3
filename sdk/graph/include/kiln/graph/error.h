// kiln::Error: the one exception type every stage throws for bad input or an
// unsupported request. Its message is a sentence saying what was wrong and where.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace kiln {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

namespace detail {
template <class... Parts>
std::string concat(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  return out.str();
}
}  // namespace detail

// Throws kiln::Error with the streamed parts joined: fail("input ", i, " has rank ", r).
template <class... Parts>
[[noreturn]] void fail(Parts&&... parts) {
  throw Error(detail::concat(std::forward<Parts>(parts)...));
}

}  // namespace kiln

// Checks a user-facing condition; the remaining arguments form the error message.
#define KILN_CHECK(cond, ...)                    \
  do {                                           \
    if (!(cond)) ::kiln::fail(__VA_ARGS__);      \
  } while (0)
