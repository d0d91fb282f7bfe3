// frontends/cpp: the user's call site of a traced op (call_sites.h).
#include "call_sites.h"

#include <cxxabi.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>

#if KILN_HAVE_BACKTRACE
#include <backtrace.h>
#endif

namespace kiln::detail {

namespace {

constexpr int kMaxFrames = 64;  // past this the stack is the program's outer frames

std::string demangle(const char* name) {
  if (!name) return {};
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
  return status == 0 && out ? std::string(out.get()) : std::string(name);
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// Kiln's own source: the library's folders in this source tree (KILN_SOURCE_ROOT), or its
// headers wherever they are installed.
bool kiln_file(std::string_view file) {
  static constexpr std::string_view kRoot = KILN_SOURCE_ROOT;
  if (file.find("/include/kiln/") != std::string_view::npos) return true;
  if (!starts_with(file, kRoot) || file.size() <= kRoot.size() || file[kRoot.size()] != '/') return false;
  const std::string_view rest = file.substr(kRoot.size() + 1);
  for (std::string_view dir : {"frontends/", "sdk/", "targets/", "native/", "web/src/"})
    if (starts_with(rest, dir)) return true;
  return false;
}

bool system_file(std::string_view file) { return starts_with(file, "/usr/include/") || starts_with(file, "/usr/lib/"); }

// A frame without line tables: the user's where its function is neither Kiln's nor the
// standard library's (or the C runtime's).
bool user_function(std::string_view f) {
  return !f.empty() && f[0] != '_' && !starts_with(f, "kiln::") && !starts_with(f, "std::") &&
         !starts_with(f, "void std::") && f.find(" kiln::") == std::string_view::npos;
}

#if KILN_HAVE_BACKTRACE
void ignore_error(void*, const char*, int) {}

backtrace_state* state() {
  // One state for the process (libbacktrace never frees one), safe across threads.
  static backtrace_state* s = backtrace_create_state(nullptr, 1, ignore_error, nullptr);
  return s;
}

struct Entry {
  std::string file;
  int line;
  const char* function;  // libbacktrace's own string, valid for the process
};

// One return address's entries: the inlined functions innermost first, the function holding the
// code last.
int on_pcinfo(void* data, uintptr_t, const char* file, int line, const char* function) {
  static_cast<std::vector<Entry>*>(data)->push_back(Entry{file ? file : "", line, function});
  return 0;
}

void on_syminfo(void* data, uintptr_t, const char* symname, uintptr_t, uintptr_t) {
  *static_cast<std::string*>(data) = demangle(symname);
}

// The demangled symbol holding `pc` ("" where the symbol table has none).
std::string symbol_at(backtrace_state* s, uintptr_t pc) {
  std::string name;
  backtrace_syminfo(s, pc, on_syminfo, ignore_error, &name);
  return name;
}

std::optional<SourceLine> lookup(backtrace_state* s, uintptr_t pc) {
  std::vector<Entry> entries;
  backtrace_pcinfo(s, pc, on_pcinfo, ignore_error, &entries);
  bool any_file = false;
  for (size_t k = 0; k < entries.size(); ++k) {
    const Entry& e = entries[k];
    if (e.file.empty()) continue;
    any_file = true;
    if (kiln_file(e.file) || system_file(e.file)) continue;
    SourceLine l{e.file, e.line, demangle(e.function)};
    // Line tables name a lambda's body "operator()": the symbol says whose (the outermost entry
    // only: an inlined entry's code sits in another function's symbol).
    if (k + 1 == entries.size() && l.function.find("::") == std::string::npos)
      if (std::string sym = symbol_at(s, pc); !sym.empty()) l.function = std::move(sym);
    return l;
  }
  if (any_file) return std::nullopt;
  // No line tables: the symbol's name alone.
  if (std::string sym = symbol_at(s, pc); user_function(sym)) return SourceLine{"", 0, std::move(sym)};
  return std::nullopt;
}

// The user's entry of one return address, cached by address (a model's ops share most frames).
std::optional<SourceLine> resolve(uintptr_t pc) {
  static std::mutex mutex;
  static std::map<uintptr_t, std::optional<SourceLine>> cache;
  std::lock_guard lock(mutex);
  if (auto it = cache.find(pc); it != cache.end()) return it->second;
  std::optional<SourceLine> found;
  if (backtrace_state* st = state()) found = lookup(st, pc);
  cache.emplace(pc, found);
  return found;
}

int on_pc(void* data, uintptr_t pc) {
  auto* s = static_cast<CallStack*>(data);
  s->pcs.push_back(pc);
  return s->pcs.size() >= kMaxFrames ? 1 : 0;
}
#endif

}  // namespace

bool call_sites_supported() {
#if KILN_HAVE_BACKTRACE
  return state() != nullptr;
#else
  return false;
#endif
}

CallStack capture_call_stack() {
  CallStack s;
#if KILN_HAVE_BACKTRACE
  if (backtrace_state* st = state()) {
    s.pcs.reserve(kMaxFrames);
    backtrace_simple(st, 1, on_pc, ignore_error, &s);  // skip this function's own frame
  }
#endif
  return s;
}

std::optional<SourceLine> user_source_line(const CallStack& stack) {
#if KILN_HAVE_BACKTRACE
  for (uintptr_t pc : stack.pcs)
    if (std::optional<SourceLine> l = resolve(pc)) return l;
#else
  (void)stack;
#endif
  return std::nullopt;
}

std::string user_call_site_now() {
  const std::optional<SourceLine> l = user_source_line(capture_call_stack());
  if (!l) return "";
  if (l->file.empty()) return l->function;
  return l->file + (l->line > 0 ? ":" + std::to_string(l->line) : "");
}

}  // namespace kiln::detail
