// Internal to frontends/cpp: debug_dir's dumps (KILN_DEBUG_DIR, docs/config.md). Each compiled
// graph of a compiled function (a whole-function entry or one segment of a function that breaks
// its graph) gets a directory "<function>_<sequence>" holding the readable graph, its JSON and its
// guards, what the backend writes there while compiling it (the plan, its code, the fusion
// decisions: debug_dump_dir()), and compile.json: which compile of which function it was, why it
// happened (a recompile's failed guard, the graph break that ended a segment), how long it
// took and the source line of the user's program that traced each node (call_sites.h). `kiln report DIR` turns such a directory into one HTML compile report.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "call_sites.h"
#include "kiln/capture/capture.h"

namespace kiln::detail {

// What compile.json says of one compile, besides the function and its stats.
struct CompileEvent {
  std::string kind;                       // "first", "recompile" or "segment"
  int64_t segment = -1;                   // a segment's position in the call
  std::string reason;                     // a recompile's failed guard (empty otherwise)
  std::vector<std::string> graph_breaks;  // what ended a segment ("the function's return" last)
  double trace_ms = -1;                   // < 0: not measured
  double compile_ms = -1;
  const std::vector<CallStack>* call_sites = nullptr;  // per node of the graph: where it was traced
};

class DebugDump {
 public:
  // Does nothing when debug_dir is empty; else makes the directory and points the backend's
  // dumps (debug_dump_dir()) at it until destroyed.
  explicit DebugDump(const FunctionCache& cache);
  ~DebugDump();
  DebugDump(const DebugDump&) = delete;
  DebugDump& operator=(const DebugDump&) = delete;
  bool active() const { return !path_.empty(); }
  // The function's stats now: a compile's kind and reason come from how they changed across it.
  CompileStats stats() const { return cache_.stats(); }
  // Writes graph.txt, graph.json, guards.txt (when given) and compile.json; `before` is stats()
  // taken before the compile.
  void write(const Graph& graph, const GuardSet* guards, CompileEvent event, const CompileStats& before) const;
  // Nothing was compiled (a segment found in the function's cache): the directory goes.
  void discard();

 private:
  const FunctionCache& cache_;
  std::filesystem::path path_;
  int64_t sequence_ = 0;
};

}  // namespace kiln::detail
