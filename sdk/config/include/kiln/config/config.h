// sdk/config: Kiln's typed options.
// Takes: option values from six layers, highest first: scoped Patch (innermost first), a
//   compile's per-compile options and its mode preset (CompileScope), config::set(), the
//   environment (KILN_<NAME>, read lazily), and each option's declared default.
// Gives: the validated effective value of every declared option (get<T>, get_value), the
//   option catalogue (list_options), and a generation counter plus a hash of the options
//   that change generated code, so guards and cache keys can tell when configuration moved.
// The docs with every option: docs/config.md.
#pragma once

#include <kiln/graph/error.h>

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace kiln {

namespace config {
enum class OptionType { Bool, Int, Float, String };
// "Bool", "Int", "Float" or "String".
std::string_view type_name(OptionType type);
}  // namespace config

namespace detail {
// The OptionType that stores a T (T is bool, int64_t, double or std::string).
template <class T>
constexpr config::OptionType option_type_of() {
  if constexpr (std::is_same_v<T, bool>) return config::OptionType::Bool;
  else if constexpr (std::is_same_v<T, int64_t>) return config::OptionType::Int;
  else if constexpr (std::is_same_v<T, double>) return config::OptionType::Float;
  else {
    static_assert(std::is_same_v<T, std::string>,
                  "a config value type is bool, int64_t, double or std::string");
    return config::OptionType::String;
  }
}

template <class T>
inline constexpr bool is_char_type_v =
    std::is_same_v<T, char> || std::is_same_v<T, signed char> ||
    std::is_same_v<T, unsigned char> || std::is_same_v<T, wchar_t> ||
    std::is_same_v<T, char8_t> || std::is_same_v<T, char16_t> || std::is_same_v<T, char32_t>;
}  // namespace detail

// One option value: bool, int64_t, double or std::string. It converts implicitly from any
// integer, floating-point, bool, const char* or string, so config::set("recompile_limit", 4)
// and Patch p({{"cache_dir", "/tmp/k"}}) read naturally. The constructors are constrained so
// that a pointer never becomes a bool and a char never becomes an integer.
class ConfigValue {
 public:
  using Variant = std::variant<bool, int64_t, double, std::string>;

  ConfigValue() = default;  // holds false

  template <class B>
    requires std::same_as<B, bool>
  ConfigValue(B b) : v_(b) {}

  template <std::integral I>
    requires(!std::same_as<I, bool> && !detail::is_char_type_v<I>)
  ConfigValue(I i) : v_(to_int64(i)) {}

  template <std::floating_point F>
  ConfigValue(F f) : v_(static_cast<double>(f)) {}

  ConfigValue(const char* s) : v_(std::string(s ? s : "")) {}
  ConfigValue(std::string s) : v_(std::move(s)) {}
  ConfigValue(std::string_view s) : v_(std::string(s)) {}

  config::OptionType type() const { return static_cast<config::OptionType>(v_.index()); }

  template <class T>
  bool is() const {
    return std::holds_alternative<T>(v_);
  }
  // The held value; throws kiln::Error when it holds another type.
  template <class T>
  const T& as() const {
    if (const T* p = std::get_if<T>(&v_)) return *p;
    fail_wrong_type(detail::option_type_of<T>());
  }

  const Variant& variant() const& { return v_; }
  Variant&& variant() && { return std::move(v_); }

  friend bool operator==(const ConfigValue&, const ConfigValue&) = default;

 private:
  template <class I>
  static int64_t to_int64(I i) {
    if constexpr (std::is_unsigned_v<I> && sizeof(I) >= sizeof(int64_t)) {
      KILN_CHECK(i <= static_cast<I>(std::numeric_limits<int64_t>::max()), "config value ", i,
                 " does not fit in a 64-bit signed integer.");
    }
    return static_cast<int64_t>(i);
  }
  [[noreturn]] void fail_wrong_type(config::OptionType wanted) const;

  Variant v_;
};

namespace detail {
[[noreturn]] void fail_config_get_type(std::string_view name, const ConfigValue& held,
                                       config::OptionType asked);
}  // namespace detail

// Prints like config::to_string (strings double-quoted), so test frameworks can show values.
std::ostream& operator<<(std::ostream& out, const ConfigValue& value);

namespace config {

// The layer an effective value came from, lowest precedence first.
enum class Layer { Default, Env, Set, Mode, Options, Patch };
std::string_view layer_name(Layer layer);  // "default", "env", "set", "mode", "options", "patch"

struct OptionInfo {
  std::string name;           // e.g. "fusion.max_fusion_size"
  OptionType type;
  ConfigValue default_value;
  std::string doc;            // one line; options not read yet say which stage will read them
  std::string env_var;        // "KILN_" + upper-cased name with '.' -> '_'
  bool affects_codegen;       // part of codegen_hash(): changing it changes generated code
  bool used;                  // false: declared for a later stage, "not yet used"
};

// Sets an option process-wide (the `set` layer). Throws kiln::Error for an unknown name, a
// value of the wrong type, or one that breaks the option's constraint (limits >= 1, ...).
// An Int option takes a double with no fractional part; a Float option takes an integer.
void set(std::string_view name, ConfigValue value);

// The effective value: the highest layer that sets it. Throws for an unknown name, and for an
// environment value that does not parse when the environment is the layer that decides.
ConfigValue get_value(std::string_view name);

// Which layer get_value(name) would take its value from.
Layer layer_of(std::string_view name);

// Typed read. T is bool, int64_t, double or std::string, matching the option's declared type
// exactly; another T throws kiln::Error naming the option, its type and the get<T> to use.
template <class T>
T get(std::string_view name) {
  static_assert(std::is_same_v<T, bool> || std::is_same_v<T, int64_t> ||
                    std::is_same_v<T, double> || std::is_same_v<T, std::string>,
                "kiln::config::get<T>: T must be bool, int64_t, double or std::string");
  ConfigValue value = get_value(name);
  if (value.is<T>()) return std::get<T>(std::move(value).variant());
  kiln::detail::fail_config_get_type(name, value, kiln::detail::option_type_of<T>());
}

// Every declared option, in declaration order (grouped by stage).
std::vector<OptionInfo> list_options();
// One option's declaration; unknown name -> kiln::Error with suggestions.
OptionInfo option_info(std::string_view name);

// Parses text the way the environment layer does (bools: 1/0/true/false/yes/no/on/off, any
// case), then validates it; for command lines and config files. Throws kiln::Error.
ConfigValue parse_value(std::string_view name, std::string_view text);

// The values a compile mode sets: "default", "reduce-overhead", "max-autotune",
// "max-autotune-no-cudagraphs" ("" means "default"). Unknown mode -> kiln::Error listing them.
std::map<std::string, ConfigValue> mode_options(std::string_view mode);
// The valid mode names, in the order above.
std::vector<std::string> list_modes();

// Scoped override on this thread: values apply until the Patch is destroyed, above every
// other layer; nested Patches stack (innermost wins). Validated before anything changes.
// Destroy it on the thread that created it (scoped use does that by construction).
class Patch {
 public:
  explicit Patch(std::map<std::string, ConfigValue> values);
  // Makes Patch p({{"cache_dir", "/tmp/k"}}) unambiguous: without it a pair of string
  // literals also reads as a map iterator range feeding the (deleted) copy constructor.
  Patch(std::initializer_list<std::pair<const std::string, ConfigValue>> values)
      : Patch(std::map<std::string, ConfigValue>(values)) {}
  ~Patch();
  Patch(const Patch&) = delete;
  Patch& operator=(const Patch&) = delete;

 private:
  uint64_t id_;
};

// The per-compile layers of one compiled function on this thread: its mode preset below its
// `options`, both above config::set. Validates the mode and every option (throws like set).
// Only the innermost CompileScope applies: a compiled function called while another one is
// compiling sees its own mode and options, not the outer function's.
class CompileScope {
 public:
  CompileScope(std::string_view mode, const std::map<std::string, ConfigValue>& options);
  ~CompileScope();
  CompileScope(const CompileScope&) = delete;
  CompileScope& operator=(const CompileScope&) = delete;

 private:
  uint64_t id_;
};

// Bumps on every change of any layer on any thread (set, Patch and CompileScope construction
// and destruction, reset_for_testing). Equal generations mean equal configuration, so a guard
// can skip rehashing; a different generation only means "maybe changed".
uint64_t generation();

// Hash of the effective values of every affects_codegen option on this thread (cached per
// generation). Deterministic across platforms and builds, for cache keys and guards.
uint64_t codegen_hash();

// The effective (name, value) of every affects_codegen option, sorted by name.
std::vector<std::pair<std::string, ConfigValue>> codegen_values();

// Clears the `set` layer and re-reads the environment. Patches and scopes are left alone.
void reset_for_testing();

// Renders a value: true/false, 42, 0.5 (a Float always shows a '.', 'e', inf or nan), and
// strings double-quoted with '"' and '\' escaped.
std::string to_string(const ConfigValue& value);

}  // namespace config
}  // namespace kiln
