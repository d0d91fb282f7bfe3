// frontends/cpp: debug_dir's dumps (debug_dump.h).
#include "debug_dump.h"

#include <atomic>
#include <cctype>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "kiln/config/config.h"
#include "kiln/format/graph_json.h"
#include "target_driver.h"

namespace kiln::detail {

namespace {

// A directory name from a function label: alphanumerics kept, and long labels (lambdas in
// templates run to hundreds of characters) cut to a prefix plus a hash of the whole.
std::string sanitize(std::string s) {
  constexpr size_t kMax = 80;
  const size_t hash = std::hash<std::string>{}(s);
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  if (s.size() > kMax) s = s.substr(0, kMax) + "_" + std::to_string(hash % 1000000007);
  return s;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  for (size_t at = 0, nl; at < text.size(); at = nl + 1) {
    nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    out.push_back(text.substr(at, nl - at));
  }
  return out;
}

// compile.json's "sources": per node that has one, the user's line that traced it.
nlohmann::ordered_json sources_of(const Graph& graph, const std::vector<CallStack>& call_sites) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t id = 0; id < call_sites.size() && id < graph.size(); ++id) {
    const std::optional<SourceLine> l = user_source_line(call_sites[id]);
    if (!l) continue;
    nlohmann::ordered_json s = {{"node", id}};
    if (!l->file.empty()) s["file"] = l->file;
    if (l->line > 0) s["line"] = l->line;
    if (!l->function.empty()) s["function"] = l->function;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

DebugDump::DebugDump(const FunctionCache& cache) : cache_(cache) {
  const std::string dir = config::get<std::string>("debug_dir");
  if (dir.empty()) return;
  static std::atomic<int64_t> counter{0};
  sequence_ = counter++;
  path_ = std::filesystem::path(dir) / (sanitize(cache.name()) + "_" + std::to_string(sequence_));
  std::filesystem::create_directories(path_);
  debug_dump_dir() = path_.string();
}

DebugDump::~DebugDump() {
  if (active()) debug_dump_dir().clear();
}

void DebugDump::write(const Graph& graph, const GuardSet* guards, CompileEvent event, const CompileStats& before) const {
  if (!active()) return;
  std::ofstream(path_ / "graph.txt") << graph.str();
  std::ofstream(path_ / "graph.json") << format::to_json(graph);
  if (guards) std::ofstream(path_ / "guards.txt") << guards->str();
  const CompileStats after = cache_.stats();
  // A compile that a failed guard (or a segment's new graph) caused counts as a recompile; its
  // reason is the last the function's stats recorded (on the miss, just before this compile).
  if (after.recompiles > before.recompiles) {
    if (event.kind != "segment") event.kind = "recompile";
    if (!after.recompile_reasons.empty()) event.reason = after.recompile_reasons.back();
  }
  nlohmann::ordered_json timing = nlohmann::ordered_json::object();
  if (event.trace_ms >= 0) timing["trace"] = event.trace_ms;
  if (event.compile_ms >= 0) timing["compile"] = event.compile_ms;
  const CompileOptions& o = cache_.options();
  nlohmann::ordered_json j = {
      {"format", "kiln.compile"},
      {"version", 1},
      {"function", cache_.name()},
      {"sequence", sequence_},
      {"index", after.compiles - 1},
      {"kind", event.kind},
      {"segment", event.segment},
      {"reason", event.reason.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(event.reason)},
      {"graph_breaks", event.graph_breaks},
      {"backend", o.backend},
      {"mode", o.mode},
      {"fullgraph", o.fullgraph},
      {"timing_ms", std::move(timing)},
      {"guards", guards ? lines_of(guards->str()) : std::vector<std::string>{}},
      {"stats", after.str()},
      {"sources_recorded", event.call_sites != nullptr && call_sites_supported()},
      {"sources", event.call_sites ? sources_of(graph, *event.call_sites) : nlohmann::ordered_json::array()}};
  std::ofstream(path_ / "compile.json") << j.dump(1) << "\n";
}

void DebugDump::discard() {
  if (!active()) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
  debug_dump_dir().clear();
  path_.clear();
}

}  // namespace kiln::detail
