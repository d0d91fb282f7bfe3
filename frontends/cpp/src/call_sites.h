// Internal to frontends/cpp: where in the user's program each traced op was called, for
// debug_dir's dumps (compile.json's "sources"), `kiln report` and the inspector. A C++ trace
// has no interpreter frames to read, so the tracer keeps the return addresses of the stack when
// it records an op (only while a debug dump is on: a walk costs microseconds per op) and
// resolves them when the dump is written: through the program's line tables (GCC's
// libbacktrace), the innermost frame, inlined ones included, whose source is neither Kiln's
// (its library folders, an installed include/kiln/) nor the system's (/usr/include, the
// compiler's headers). A program built without line tables gets the function's name alone.
// An op's error names the same line (dispatch.cpp), resolved only when one is thrown.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::detail {

// The return addresses of a stack, innermost first.
struct CallStack {
  std::vector<uintptr_t> pcs;
  bool empty() const { return pcs.empty(); }
};

// The stack now (empty where this build has no unwinder: KILN_HAVE_BACKTRACE=0).
CallStack capture_call_stack();

struct SourceLine {
  std::string file;      // "" where the program has no line tables
  int line = 0;          // 0 where unknown
  std::string function;  // demangled
};

// The user's frame of `stack` (nullopt where every frame is Kiln's, the system's, or unknown).
std::optional<SourceLine> user_source_line(const CallStack& stack);

// Whether this build can record call sites at all.
bool call_sites_supported();

// "file:line" (the function where the program has no line tables) of the user's frame of the
// stack now; "" where none is known. For error messages: it resolves at once.
std::string user_call_site_now();

}  // namespace kiln::detail
