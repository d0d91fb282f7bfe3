// The layer machinery behind kiln/config/config.h.
//
// Layers and where they live:
//   default, env, set  -> process-wide, folded into one immutable Snapshot under a mutex.
//                         Each thread keeps a shared_ptr to the snapshot it last saw and only
//                         takes the mutex when the snapshot's version moved, so a plain get()
//                         is a name lookup, one atomic load and a copy.
//   mode, options      -> thread_local stack of CompileScope frames (only the top one applies).
//   patch              -> thread_local stack of Patch frames (searched innermost first).
#include "registry.h"

#include "kiln/graph/memory_budget.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>

namespace kiln {

void ConfigValue::fail_wrong_type(config::OptionType wanted) const {
  auto an = [](config::OptionType t) { return t == config::OptionType::Int ? "an " : "a "; };
  fail("config value ", config::to_string(*this), " is ", an(type()), config::type_name(type()),
       ", not ", an(wanted), config::type_name(wanted), ".");
}

std::ostream& operator<<(std::ostream& out, const ConfigValue& value) {
  return out << config::to_string(value);
}

namespace config {

namespace {
// sdk/graph's memory budget (kiln/graph/memory_budget.h) is this option; read when it is checked.
const bool kMemoryBudgetInstalled =
    (set_memory_budget_source([] { return get<int64_t>("memory_budget_mb"); }), true);
}  // namespace

using internal::ModeDef;
using internal::option_defs;
using internal::OptionDef;

std::string_view type_name(OptionType type) {
  switch (type) {
    case OptionType::Bool: return "Bool";
    case OptionType::Int: return "Int";
    case OptionType::Float: return "Float";
    case OptionType::String: return "String";
  }
  return "?";
}

std::string_view layer_name(Layer layer) {
  switch (layer) {
    case Layer::Default: return "default";
    case Layer::Env: return "env";
    case Layer::Set: return "set";
    case Layer::Mode: return "mode";
    case Layer::Options: return "options";
    case Layer::Patch: return "patch";
  }
  return "?";
}

namespace {

// std::to_chars(first, last, double)'s shortest round-trip form (the fewest significant digits
// that read back to the same double; fixed or scientific notation, whichever is shorter, fixed
// on a tie), built from printf's correctly rounded %.*e and strtod so that it is the same text
// on every standard library (Emscripten's libc++ has no floating-point to_chars).
std::string shortest_double(double v) {
  // The fewest significant digits P whose P-digit decimal reads back as v: printf's correctly
  // rounded P digits, or (next to a rounding boundary) the P-digit neighbour above or below.
  char buf[64];
  const std::string sign = std::signbit(v) ? "-" : "";
  const double a = std::fabs(v);
  auto reads_back = [&](const std::string& d, int e) {
    const std::string text = d.substr(0, 1) + "." + d.substr(1) + "e" + std::to_string(e);
    return std::strtod(text.c_str(), nullptr) == a;
  };
  std::string digits;
  int exponent = 0;
  for (int precision = 0; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*e", precision, a);
    const std::string sci(buf);
    const size_t e = sci.find('e');
    std::string d = sci.substr(0, e);
    d.erase(std::remove(d.begin(), d.end(), '.'), d.end());
    const int ex = std::atoi(sci.c_str() + e + 1);
    if (reads_back(d, ex)) {
      digits = d, exponent = ex;
      break;
    }
    std::string up = d;  // d + 1 in the last place
    int up_ex = ex;
    size_t i = up.size();
    while (i > 0 && up[i - 1] == '9') up[--i] = '0';
    if (i == 0) up.insert(up.begin(), '1'), up.pop_back(), ++up_ex;
    else ++up[i - 1];
    if (reads_back(up, up_ex)) {
      digits = up, exponent = up_ex;
      break;
    }
    std::string down = d;  // d - 1 in the last place (d is never all zeros here: 0 reads back)
    int down_ex = ex;
    i = down.size();
    while (i > 0 && down[i - 1] == '0') down[--i] = '9';
    if (i > 0) --down[i - 1];
    if (down.size() > 1 && down[0] == '0') down.erase(0, 1), down.push_back('9'), --down_ex;  // 1000 - 1 = 9999e-1
    if (reads_back(down, down_ex)) {
      digits = down, exponent = down_ex;
      break;
    }
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int n = static_cast<int>(digits.size());
  // Scientific: d[.ddd]e+XX (at least two exponent digits).
  std::string scientific = digits.substr(0, 1);
  if (n > 1) scientific += "." + digits.substr(1);
  char exp_buf[8];
  std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exponent < 0 ? '-' : '+', exponent < 0 ? -exponent : exponent);
  scientific += exp_buf;
  // Fixed: the same digits with the point moved.
  std::string fixed;
  if (exponent >= n - 1) {
    // A whole number: to_chars writes it exactly (not the shortest digits padded with zeros).
    std::snprintf(buf, sizeof buf, "%.0f", a);
    fixed = buf;
  } else if (exponent >= 0) fixed = digits.substr(0, static_cast<size_t>(exponent) + 1) + "." + digits.substr(static_cast<size_t>(exponent) + 1);
  else fixed = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  return sign + (scientific.size() < fixed.size() ? scientific : fixed);
}

// std::from_chars(first, last, double) with the general format: the whole text must be a
// decimal number (no leading space or '+', no hex), "inf", "infinity" or "nan" in any case.
std::optional<double> parse_double(std::string_view text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front())) || text.front() == '+' ||
      text.find_first_of("xX") != std::string_view::npos)
    return std::nullopt;
  const std::string copy(text);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size()) return std::nullopt;
  if (errno == ERANGE && (std::isinf(v) || v == 0)) return std::nullopt;
  return v;
}

}  // namespace

std::string to_string(const ConfigValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<V, int64_t>) {
          return std::to_string(v);
        } else if constexpr (std::is_same_v<V, double>) {
          if (std::isnan(v)) return "nan";
          if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
          std::string s = shortest_double(v);  // shortest round-trip form
          // Keep Floats visibly distinct from Ints: 2.0 prints "2.0", not "2".
          if (s.find_first_of(".e") == std::string::npos) s += ".0";
          return s;
        } else {
          std::string s = "\"";
          for (char c : v) {
            if (c == '"' || c == '\\') s += '\\';
            s += c;
          }
          return s + "\"";
        }
      },
      value.variant());
}

namespace {

const char* article(OptionType t) { return t == OptionType::Int ? "an" : "a"; }

// ---- name lookup and suggestions -------------------------------------------------------

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                  std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (same ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string_view last_segment(std::string_view name) {
  size_t dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

// Up to 3 declared names close to `name`, nearest first. A name whose last dotted segment
// matches counts as distance 1, so "max_fusion_size" finds "fusion.max_fusion_size".
std::vector<std::string> nearest_names(std::string_view name) {
  std::vector<std::pair<size_t, std::string>> scored;
  const size_t limit = std::max<size_t>(3, name.size() / 3);
  for (const OptionDef& d : option_defs()) {
    size_t dist = edit_distance(name, d.info.name);
    if (dist > 1 && edit_distance(last_segment(name), last_segment(d.info.name)) == 0) dist = 1;
    if (dist <= limit) scored.emplace_back(dist, d.info.name);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < 3; ++i) out.push_back(scored[i].second);
  return out;
}

// "'a'", "'a' or 'b'", "'a', 'b' or 'c'".
std::string quoted_list(const std::vector<std::string>& names, std::string_view last_join) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? std::string(last_join) : std::string(", ");
    out += "'" + names[i] + "'";
  }
  return out;
}

// Name -> option index. get() looks a name up on every call, so this is a small open-addressing
// table with a cheap hash rather than std::unordered_map (several times slower here).
struct Index {
  std::vector<int32_t> slots;  // option index, or -1; size a power of two >= 4x the options
  size_t mask = 0;
  std::vector<size_t> codegen_by_name;  // affects_codegen options, sorted by name

  // Mixes the length and the first and last (up to) 8 bytes: enough to spread ~40 names,
  // and a few cycles instead of a byte-at-a-time loop. Collisions are resolved by probing.
  static uint64_t hash(std::string_view s) {
    uint64_t front = 0, back = 0;
    size_t n = std::min<size_t>(s.size(), 8);
    if (n > 0) {
      std::memcpy(&front, s.data(), n);
      std::memcpy(&back, s.data() + s.size() - n, n);
    }
    uint64_t h = front ^ (back * 0x9E3779B97F4A7C15ull) ^ s.size();
    h ^= h >> 33;  // murmur3's finalizer: every input bit reaches the low (table) bits
    h *= 0xFF51AFD7ED558CCDull;
    return h ^ (h >> 33);
  }
  int32_t find(std::string_view name) const {
    const auto& defs = option_defs();
    for (size_t i = hash(name) & mask;; i = (i + 1) & mask) {
      int32_t idx = slots[i];
      if (idx < 0 || defs[static_cast<size_t>(idx)].info.name == name) return idx;
    }
  }
};

const Index& index() {
  static const Index idx = [] {
    Index out;
    const auto& defs = option_defs();
    size_t size = 16;
    while (size < 4 * defs.size()) size *= 2;
    out.slots.assign(size, -1);
    out.mask = size - 1;
    for (size_t i = 0; i < defs.size(); ++i) {
      size_t s = Index::hash(defs[i].info.name) & out.mask;
      while (out.slots[s] >= 0) s = (s + 1) & out.mask;
      out.slots[s] = static_cast<int32_t>(i);
    }
    for (size_t i = 0; i < defs.size(); ++i)
      if (defs[i].info.affects_codegen) out.codegen_by_name.push_back(i);
    std::sort(out.codegen_by_name.begin(), out.codegen_by_name.end(),
              [&](size_t a, size_t b) { return defs[a].info.name < defs[b].info.name; });
    return out;
  }();
  return idx;
}

size_t lookup(std::string_view name) {
  int32_t found = index().find(name);
  if (found >= 0) return static_cast<size_t>(found);
  std::vector<std::string> near = nearest_names(name);
  if (near.empty())
    fail("unknown config option '", name,
         "'; kiln::config::list_options() and docs/config.md list the valid names.");
  fail("unknown config option '", name, "'; did you mean ", quoted_list(near, " or "), "?");
}

// ---- typing and validation --------------------------------------------------------------

}  // namespace

std::optional<ConfigValue> internal::coerce_type(OptionType type, const ConfigValue& value) {
  if (value.type() == type) return value;
  if (type == OptionType::Float && value.is<int64_t>())
    return static_cast<double>(value.as<int64_t>());
  if (type == OptionType::Int && value.is<double>()) {
    double d = value.as<double>();
    // 2^63 is exactly representable; anything >= it does not fit.
    if (std::isfinite(d) && std::trunc(d) == d && d >= -9223372036854775808.0 &&
        d < 9223372036854775808.0)
      return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

namespace {
using internal::coerce_type;
using internal::parse_text;

ConfigValue check_value(const OptionDef& def, const ConfigValue& value) {
  const OptionInfo& info = def.info;
  std::optional<ConfigValue> typed = coerce_type(info.type, value);
  if (!typed)
    fail("config option '", info.name, "' expects ", article(info.type), " ",
         type_name(info.type), ", but got the ", type_name(value.type()), " ", to_string(value),
         ".");
  if (def.check) {
    std::string rule = def.check(*typed);
    if (!rule.empty())
      fail("config option '", info.name, "' ", rule, ", but got ", to_string(*typed), ".");
  }
  return *typed;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

const char* expected_text(OptionType type) {
  switch (type) {
    case OptionType::Bool: return "1/0, true/false, yes/no or on/off";
    case OptionType::Int: return "an integer such as 8";
    case OptionType::Float: return "a number such as 0.5";
    case OptionType::String: return "any text";
  }
  return "";
}

}  // namespace

std::optional<ConfigValue> internal::parse_text(OptionType type, std::string_view raw) {
  if (type == OptionType::String) return ConfigValue(std::string(raw));
  std::string_view text = trim(raw);
  switch (type) {
    case OptionType::Bool:
      for (const char* t : {"1", "true", "yes", "on"})
        if (iequals(text, t)) return true;
      for (const char* f : {"0", "false", "no", "off"})
        if (iequals(text, f)) return false;
      return std::nullopt;
    case OptionType::Int: {
      if (!text.empty() && text.front() == '+') text.remove_prefix(1);
      int64_t v = 0;
      auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
      return v;
    }
    case OptionType::Float: {
      if (!text.empty() && text.front() == '+') text.remove_prefix(1);
      return parse_double(text);
    }
    case OptionType::String: break;
  }
  return std::nullopt;
}

namespace {

// ---- process-wide layers: default, env, set -----------------------------------------------

struct BaseEntry {
  ConfigValue value;
  Layer layer = Layer::Default;
  std::string error;  // non-empty: the env value is bad; thrown when this entry is read
};
using Snapshot = std::vector<BaseEntry>;

struct EnvEntry {
  std::optional<ConfigValue> value;
  std::string error;
};

struct Global {
  std::mutex mu;
  std::vector<std::optional<ConfigValue>> set_values;  // guarded by mu
  std::vector<EnvEntry> env;                           // guarded by mu
  bool env_loaded = false;                             // guarded by mu
  std::shared_ptr<const Snapshot> snapshot;            // guarded by mu
  std::atomic<uint64_t> snapshot_version{0};           // written under mu
};

// Leaked on purpose: Patches in static storage may be destroyed after any static Global.
Global& global() {
  static Global* g = new Global;
  return *g;
}

std::atomic<uint64_t> g_generation{1};

void bump_generation() { g_generation.fetch_add(1, std::memory_order_seq_cst); }

void load_env_locked(Global& g) {
  const auto& defs = option_defs();
  g.env.assign(defs.size(), EnvEntry{});
  for (size_t i = 0; i < defs.size(); ++i) {
    const OptionInfo& info = defs[i].info;
    const char* raw = std::getenv(info.env_var.c_str());
    if (!raw) continue;
    std::optional<ConfigValue> parsed = parse_text(info.type, raw);
    if (!parsed) {
      g.env[i].error = detail::concat("environment variable ", info.env_var, "='", raw,
                                      "' is not a valid ", type_name(info.type),
                                      " for config option '", info.name, "' (expected ",
                                      expected_text(info.type), ").");
      continue;
    }
    std::string rule = defs[i].check ? defs[i].check(*parsed) : "";
    if (!rule.empty()) {
      g.env[i].error = detail::concat("environment variable ", info.env_var, "='", raw,
                                      "' is invalid for config option '", info.name, "': it ",
                                      rule, ".");
      continue;
    }
    g.env[i].value = std::move(parsed);
  }
  g.env_loaded = true;
}

void rebuild_snapshot_locked(Global& g) {
  const auto& defs = option_defs();
  auto snap = std::make_shared<Snapshot>(defs.size());
  for (size_t i = 0; i < defs.size(); ++i) {
    BaseEntry& e = (*snap)[i];
    if (g.set_values[i]) {
      e.value = *g.set_values[i];
      e.layer = Layer::Set;
    } else if (g.env[i].value) {
      e.value = *g.env[i].value;
      e.layer = Layer::Env;
    } else if (!g.env[i].error.empty()) {
      e.value = defs[i].info.default_value;
      e.layer = Layer::Env;
      e.error = g.env[i].error;
    } else {
      e.value = defs[i].info.default_value;
    }
  }
  g.snapshot = std::move(snap);
  // The version moves before generation() does (callers bump after this), so a thread that
  // sees a new generation also sees the new snapshot.
  g.snapshot_version.fetch_add(1, std::memory_order_seq_cst);
}

void ensure_loaded_locked(Global& g) {
  if (g.env_loaded) return;
  g.set_values.assign(option_defs().size(), std::nullopt);
  load_env_locked(g);
  rebuild_snapshot_locked(g);
}

// ---- thread-local layers: CompileScope and Patch -----------------------------------------

using Values = std::vector<std::pair<size_t, ConfigValue>>;

struct PatchFrame {
  uint64_t id;
  Values values;
};
struct ScopeFrame {
  uint64_t id;
  Values options;
  Values mode;
};

struct Local {
  std::vector<PatchFrame> patches;
  std::vector<ScopeFrame> scopes;
  uint64_t next_id = 1;
  // The process-wide snapshot this thread last saw.
  std::shared_ptr<const Snapshot> snapshot;
  uint64_t snapshot_version = 0;
  // codegen_hash() cache.
  bool hash_valid = false;
  uint64_t hash_generation = 0;
  uint64_t hash = 0;
};

Local& local() {
  thread_local Local l;
  return l;
}

const Snapshot& base(Local& l) {
  Global& g = global();
  if (l.snapshot && l.snapshot_version == g.snapshot_version.load(std::memory_order_seq_cst))
    return *l.snapshot;
  std::lock_guard<std::mutex> lock(g.mu);
  ensure_loaded_locked(g);
  l.snapshot = g.snapshot;
  l.snapshot_version = g.snapshot_version.load(std::memory_order_relaxed);
  return *l.snapshot;
}

const ConfigValue* find(const Values& values, size_t idx) {
  for (const auto& [i, v] : values)
    if (i == idx) return &v;
  return nullptr;
}

struct Resolved {
  const ConfigValue* value;  // valid until the next base() call on this thread
  Layer layer;
};

Resolved resolve(size_t idx) {
  Local& l = local();
  for (auto it = l.patches.rbegin(); it != l.patches.rend(); ++it)
    if (const ConfigValue* v = find(it->values, idx)) return {v, Layer::Patch};
  if (!l.scopes.empty()) {
    const ScopeFrame& scope = l.scopes.back();
    if (const ConfigValue* v = find(scope.options, idx)) return {v, Layer::Options};
    if (const ConfigValue* v = find(scope.mode, idx)) return {v, Layer::Mode};
  }
  const BaseEntry& e = base(l)[idx];
  if (!e.error.empty()) throw Error(e.error);
  return {&e.value, e.layer};
}

Values check_values(const std::map<std::string, ConfigValue>& values) {
  Values out;
  out.reserve(values.size());
  for (const auto& [name, value] : values) {
    size_t idx = lookup(name);
    out.emplace_back(idx, check_value(option_defs()[idx], value));
  }
  return out;
}

const ModeDef& find_mode(std::string_view mode) {
  if (mode.empty()) mode = "default";
  for (const ModeDef& m : internal::mode_defs())
    if (m.name == mode) return m;
  fail("unknown compile mode '", mode, "'; valid modes are ", quoted_list(list_modes(), " and "),
       ".");
}

void remove_frame(auto& frames, uint64_t id) {
  // Scoped use destroys frames innermost first, so the match is almost always the last one.
  for (auto it = frames.end(); it != frames.begin();) {
    --it;
    if (it->id == id) {
      frames.erase(it);
      return;
    }
  }
}

// FNV-1a, fed explicit little-endian bytes so the hash is the same on every platform.
struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void byte(uint8_t b) { h = (h ^ b) * 1099511628211ull; }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) byte(static_cast<uint8_t>(v >> (8 * i)));
  }
  void bytes(std::string_view s) {
    u64(s.size());
    for (char c : s) byte(static_cast<uint8_t>(c));
  }
};

}  // namespace

}  // namespace config

void detail::fail_config_get_type(std::string_view name, const ConfigValue& held,
                                  config::OptionType asked) {
  using namespace config;
  static constexpr const char* cpp_type[] = {"bool", "int64_t", "double", "std::string"};
  fail("config option '", name, "' is ", article(held.type()), " ", type_name(held.type()),
       " option; read it with get<", cpp_type[static_cast<int>(held.type())], ">, not get<",
       cpp_type[static_cast<int>(asked)], ">.");
}

namespace config {

void set(std::string_view name, ConfigValue value) {
  size_t idx = lookup(name);
  ConfigValue checked = check_value(option_defs()[idx], value);
  Global& g = global();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    ensure_loaded_locked(g);
    g.set_values[idx] = std::move(checked);
    rebuild_snapshot_locked(g);
  }
  bump_generation();
}

ConfigValue get_value(std::string_view name) { return *resolve(lookup(name)).value; }

Layer layer_of(std::string_view name) { return resolve(lookup(name)).layer; }

std::vector<OptionInfo> list_options() {
  std::vector<OptionInfo> out;
  for (const OptionDef& d : option_defs()) out.push_back(d.info);
  return out;
}

OptionInfo option_info(std::string_view name) { return option_defs()[lookup(name)].info; }

ConfigValue parse_value(std::string_view name, std::string_view text) {
  const OptionDef& def = option_defs()[lookup(name)];
  std::optional<ConfigValue> parsed = parse_text(def.info.type, text);
  if (!parsed)
    fail("'", text, "' is not a valid ", type_name(def.info.type), " for config option '",
         def.info.name, "' (expected ", expected_text(def.info.type), ").");
  return check_value(def, *parsed);
}

std::map<std::string, ConfigValue> mode_options(std::string_view mode) {
  const ModeDef& m = find_mode(mode);
  return {m.values.begin(), m.values.end()};
}

std::vector<std::string> list_modes() {
  std::vector<std::string> out;
  for (const ModeDef& m : internal::mode_defs()) out.push_back(m.name);
  return out;
}

Patch::Patch(std::map<std::string, ConfigValue> values) {
  Values checked = check_values(values);  // throws before anything changes
  Local& l = local();
  id_ = l.next_id++;
  l.patches.push_back(PatchFrame{id_, std::move(checked)});
  bump_generation();
}

Patch::~Patch() {
  remove_frame(local().patches, id_);
  bump_generation();
}

CompileScope::CompileScope(std::string_view mode,
                           const std::map<std::string, ConfigValue>& options) {
  const ModeDef& m = find_mode(mode);
  Values mode_values;
  for (const auto& [name, value] : m.values) {
    size_t idx = lookup(name);
    mode_values.emplace_back(idx, check_value(option_defs()[idx], value));
  }
  Values checked = check_values(options);
  Local& l = local();
  id_ = l.next_id++;
  l.scopes.push_back(ScopeFrame{id_, std::move(checked), std::move(mode_values)});
  bump_generation();
}

CompileScope::~CompileScope() {
  remove_frame(local().scopes, id_);
  bump_generation();
}

uint64_t generation() { return g_generation.load(std::memory_order_seq_cst); }

std::vector<std::pair<std::string, ConfigValue>> codegen_values() {
  std::vector<std::pair<std::string, ConfigValue>> out;
  const auto& defs = option_defs();
  for (size_t idx : index().codegen_by_name) out.emplace_back(defs[idx].info.name, *resolve(idx).value);
  return out;
}

uint64_t codegen_hash() {
  // Read the generation before the values: if something changes meanwhile, the cached entry
  // is keyed by the older generation and the next call recomputes.
  uint64_t gen = generation();
  Local& l = local();
  if (l.hash_valid && l.hash_generation == gen) return l.hash;
  Fnv fnv;
  for (const auto& [name, value] : codegen_values()) {
    fnv.bytes(name);
    fnv.byte(static_cast<uint8_t>(value.type()));
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, bool>) fnv.byte(v ? 1 : 0);
          else if constexpr (std::is_same_v<V, int64_t>) fnv.u64(static_cast<uint64_t>(v));
          else if constexpr (std::is_same_v<V, double>) fnv.u64(std::bit_cast<uint64_t>(v));
          else fnv.bytes(v);
        },
        value.variant());
  }
  l.hash = fnv.h;
  l.hash_generation = gen;
  l.hash_valid = true;
  return l.hash;
}

void reset_for_testing() {
  Global& g = global();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    g.set_values.assign(option_defs().size(), std::nullopt);
    load_env_locked(g);
    rebuild_snapshot_locked(g);
  }
  bump_generation();
}

}  // namespace config
}  // namespace kiln
