// kiln::logs: category parsing, the output destination, and line prefixing.
#include <kiln/config/log.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::logs {
namespace {

constexpr std::string_view kNames[kNumCategories] = {
    "graph", "guards",      "recompiles", "graph_breaks", "schedule",
    "fusion", "output_code", "cache",      "perf_hints",   "dynamic",
    "partition", "profile",
};
// "all": every category but profile, which times each kernel alone and so changes the run.
constexpr uint32_t kAll = ((1u << kNumCategories) - 1) & ~(1u << static_cast<unsigned>(Category::profile));

struct State {
  std::mutex mu;                                  // guards everything below and the output
  std::function<void(std::string_view)> sink;
  bool file_checked = false;                      // KILN_LOG_FILE looked at
  std::FILE* file = nullptr;                      // open log file, or null for stderr
};

// Leaked on purpose: code may log from static destructors.
State& state() {
  static State* s = new State;
  return *s;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Parses "graph,guards", "+all", "all,-output_code". A leading '+' is accepted and ignored
// (Kiln has one log level); '-' removes. Unknown names are collected for one warning.
uint32_t parse_spec(std::string_view spec, std::vector<std::string>& unknown) {
  uint32_t bits = 0;
  while (!spec.empty()) {
    size_t comma = spec.find(',');
    std::string_view token = trim(spec.substr(0, comma));
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    bool remove = false;
    if (!token.empty() && (token.front() == '+' || token.front() == '-')) {
      remove = token.front() == '-';
      token = trim(token.substr(1));
    }
    if (token.empty()) continue;
    uint32_t these = 0;
    if (token == "all") {
      these = kAll;
    } else {
      for (int i = 0; i < kNumCategories; ++i)
        if (token == kNames[i]) these = 1u << i;
    }
    if (!these) {
      unknown.emplace_back(token);
      continue;
    }
    bits = remove ? bits & ~these : bits | these;
  }
  return bits;
}

std::string unknown_warning(std::string_view source, const std::vector<std::string>& unknown) {
  std::string msg(source);
  msg += unknown.size() == 1 ? ": unknown log category " : ": unknown log categories ";
  for (size_t i = 0; i < unknown.size(); ++i) msg += (i ? ", '" : "'") + unknown[i] + "'";
  msg += "; valid categories are all";
  for (std::string_view name : kNames) msg += ", " + std::string(name);
  return msg + ".";
}

// Sets the mask from a spec; returns the warning to print (after releasing any lock).
std::string apply_spec(std::string_view source, std::string_view spec) {
  std::vector<std::string> unknown;
  uint32_t bits = parse_spec(spec, unknown);
  detail::mask.store(bits, std::memory_order_relaxed);
  return unknown.empty() ? std::string() : unknown_warning(source, unknown);
}

std::string prefix_lines(std::string_view prefix, std::string_view text) {
  std::string out;
  out.reserve(text.size() + prefix.size() + 1);
  // A trailing '\n' ends the last line rather than starting an empty one.
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  while (true) {
    size_t nl = text.find('\n');
    out += prefix;
    out += text.substr(0, nl);
    out += '\n';
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

void emit(std::string_view block) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.sink) {
    s.sink(block);
    return;
  }
  if (!s.file_checked) {
    s.file_checked = true;
    const char* path = std::getenv("KILN_LOG_FILE");
    if (path && *path) {
      s.file = std::fopen(path, "a");
      if (!s.file)
        std::fprintf(stderr, "[kiln warning] cannot open KILN_LOG_FILE '%s' for appending; "
                             "logging to stderr.\n", path);
    }
  }
  std::FILE* out = s.file ? s.file : stderr;
  std::fwrite(block.data(), 1, block.size(), out);
  std::fflush(out);  // a crash right after a log line should not lose it
}

}  // namespace

std::string_view category_name(Category c) {
  auto i = static_cast<unsigned>(c);
  return i < kNumCategories ? kNames[i] : std::string_view("?");
}

namespace detail {
bool read_env_and_check(Category c) {
  static std::mutex init_mu;  // one thread reads the environment; the others wait for it
  std::string warning;
  {
    std::lock_guard<std::mutex> lock(init_mu);
    if (mask.load(std::memory_order_relaxed) & kUnread) {
      const char* spec = std::getenv("KILN_LOGS");
      warning = apply_spec("KILN_LOGS", spec ? spec : "");
    }
  }
  if (!warning.empty()) warn(warning);
  return enabled(c);
}
}  // namespace detail

void write(Category c, std::string_view text) {
  std::string prefix = "[kiln:";
  prefix += category_name(c);
  prefix += "] ";
  emit(prefix_lines(prefix, text));
}

void warn(std::string_view text) { emit(prefix_lines("[kiln warning] ", text)); }

void set_categories_for_testing(std::string_view spec) {
  std::string warning = apply_spec("log categories", spec);
  if (!warning.empty()) warn(warning);
}

void set_sink_for_testing(std::function<void(std::string_view)> fn) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.sink = std::move(fn);
}

void reset_for_testing() {
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.file) std::fclose(s.file);
    s.file = nullptr;
    s.file_checked = false;
  }
  detail::mask.store(0xFFFFFFFFu, std::memory_order_relaxed);
}

}  // namespace kiln::logs
