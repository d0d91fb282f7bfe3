// Kiln's two exception types, after Halide's user_error and internal_error:
//
// kiln::Error (fail, KILN_CHECK): anything a user, a file, a cache entry, a plan, a device or
// the environment can cause: a malformed graph or model, a bad option value, API misuse, an
// unsupported request, a driver that says no. Its message is a sentence saying what was wrong
// and where. Callers may catch it to recover (compile again, break the graph, fall back).
//
// kiln::InternalError (internal_fail, KILN_INTERNAL_CHECK): only for conditions that can fail
// through a bug in Kiln itself: "unreachable", a switch on an enum Kiln produced, a stage's
// consistency check on its own data structures. It derives from std::logic_error and not from
// kiln::Error, so no `catch (const kiln::Error&)` recovery path swallows a bug; the CLI reports
// it with exit status 70 and the fuzzers abort on it. Its message starts "internal error: ",
// names the file:line of the check and says it is a bug in Kiln. When unsure, use kiln::Error.
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

class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& message) : std::logic_error(message) {}
};

namespace detail {
template <class... Parts>
std::string concat(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  return out.str();
}

// "internal error: <file>:<line>: <what> (this is a bug in Kiln)".
template <class... Parts>
[[noreturn]] void internal_fail_at(const char* file, int line, Parts&&... parts) {
  std::string what = concat(std::forward<Parts>(parts)...);
  if (what.empty()) what = "check failed";
  throw InternalError(concat("internal error: ", file, ":", line, ": ", what, " (this is a bug in Kiln)"));
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

// Throws kiln::InternalError naming this file and line: internal_fail("unknown op kind ", k).
// A macro (for __FILE__ and __LINE__): call it unqualified.
// __FILE__ is relative to the repository root where the compiler supports -fmacro-prefix-map
// (the top-level CMakeLists.txt sets it).
#define internal_fail(...) ::kiln::detail::internal_fail_at(__FILE__, __LINE__ __VA_OPT__(, ) __VA_ARGS__)

// Checks a condition only a bug in Kiln can break; the remaining arguments form the message.
#define KILN_INTERNAL_CHECK(cond, ...)                                                \
  do {                                                                                \
    if (!(cond))                                                                      \
      ::kiln::detail::internal_fail_at(__FILE__, __LINE__,                            \
                                       "check `" #cond "` failed" __VA_OPT__(, ": ", ) __VA_ARGS__); \
  } while (0)
