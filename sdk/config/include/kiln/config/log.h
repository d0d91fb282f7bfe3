// kiln::logs: per-category diagnostic logging for every stage. (Not "kiln::log": that name
// belongs to the tensor op kiln::log(x).)
// Takes: the categories to show, from KILN_LOGS (comma list, "all"/"+all" for everything but
//   profile, "-name" to drop one), and KILN_LOG_FILE (append there instead of stderr); both read on
//   first use.
// Gives: enabled(c), a relaxed load and a bit test, so a disabled KILN_LOG(...) costs almost
//   nothing and never formats its arguments; write() prefixing each line "[kiln:<category>] ";
//   warn() for messages that are always shown.
#pragma once

#include <kiln/graph/error.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string_view>

namespace kiln::logs {

enum class Category : uint8_t {
  graph,
  guards,
  recompiles,
  graph_breaks,
  schedule,
  fusion,
  output_code,
  cache,
  perf_hints,
  dynamic,
  partition,  // what the backward recomputes instead of storing (passes::rematerialize)
  profile,  // per-kernel device times; changes how plans run (one by one, timed), so not in "all"
};
inline constexpr int kNumCategories = 12;

// "graph", "guards", ... (the enumerator's name).
std::string_view category_name(Category c);

namespace detail {
// Bit 31 set: KILN_LOGS has not been read yet. The mask starts all-ones, so the first
// enabled() call of any category takes the slow path that reads the environment.
inline constexpr uint32_t kUnread = 1u << 31;
inline std::atomic<uint32_t> mask{0xFFFFFFFFu};
bool read_env_and_check(Category c);
}  // namespace detail

inline bool enabled(Category c) {
  uint32_t m = detail::mask.load(std::memory_order_relaxed);
  if (!(m & (1u << static_cast<unsigned>(c)))) return false;
  if (m & detail::kUnread) [[unlikely]]
    return detail::read_env_and_check(c);
  return true;
}

// Writes text with "[kiln:<category>] " before each line, whether or not c is enabled
// (KILN_LOG checks). Lines from concurrent writers do not interleave.
void write(Category c, std::string_view text);
// Always written, each line prefixed "[kiln warning] ".
void warn(std::string_view text);

// Parses a KILN_LOGS-style spec and makes it the active set of categories (the environment
// is then not read until reset_for_testing). Unknown names give one warning, never an error.
void set_categories_for_testing(std::string_view spec);
// Sends all output to fn instead of stderr / KILN_LOG_FILE; an empty fn restores them.
// fn receives whole formatted blocks (prefixed lines, each ending in '\n') and must not log.
void set_sink_for_testing(std::function<void(std::string_view)> fn);
// Forgets the categories and the log file, so KILN_LOGS and KILN_LOG_FILE are read again.
void reset_for_testing();

}  // namespace kiln::logs

// KILN_LOG(graph, "captured ", n, " nodes"): formats and writes only when the category is on.
#define KILN_LOG(cat, ...)                                      \
  do {                                                          \
    if (::kiln::logs::enabled(::kiln::logs::Category::cat))     \
      ::kiln::logs::write(::kiln::logs::Category::cat,          \
                          ::kiln::detail::concat(__VA_ARGS__)); \
  } while (0)
