// How the `kiln` tool reports a command's exception: the message on stderr and the exit status.
//   UsageError (a command-line mistake): its message, status 2.
//   kiln::Error (bad input, an unsupported request, the environment): "kiln: error: ...", 1.
//   std::bad_alloc: "kiln: error: out of memory", 1.
//   kiln::InternalError, or any other exception no stage turned into a kiln::Error (a bug in
//   Kiln): "kiln: internal error (a bug in Kiln, please report it): <file>:<line>: ...", 70
//   (EX_SOFTWARE of sysexits.h).
#pragma once

#include <exception>
#include <ostream>

namespace kiln::cli {

inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitInternal = 70;

// Rethrows `e` (not null), writes its report to `err` and returns the exit status.
int report_exception(std::exception_ptr e, std::ostream& err);

}  // namespace kiln::cli
