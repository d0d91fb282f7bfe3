// Shared by the capture tests: a clean process state per test (no compiled entries, default
// stance, no config overrides, logging back to normal), a backend that records the graphs it
// is given, and small helpers for values and error messages.
#pragma once

#include "kiln_test_util.h"

#include <kiln/kiln.h>

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

// How Boost.Test prints Kiln's enums in failed checks.
namespace kiln {
inline std::ostream& boost_test_print_type(std::ostream& out, DType t) { return out << dtype_name(t); }
inline std::ostream& boost_test_print_type(std::ostream& out, Stance s) { return out << stance_name(s); }
inline std::ostream& boost_test_print_type(std::ostream& out, const Device& d) { return out << d.str(); }
inline std::ostream& boost_test_print_type(std::ostream& out, const SymInt& s) { return out << s.str(); }
}  // namespace kiln

namespace capture_test {

inline void clear_option_env() {
  for (const auto& option : kiln::config::list_options()) ::unsetenv(option.env_var.c_str());
}

// Every test starts and ends with: no compiled entries anywhere (and the process-wide
// recompile count at 0), the default stance, no config::set values, default logging.
struct Clean {
  Clean() { restore(); }
  ~Clean() { restore(); }
  static void restore() {
    kiln::reset();
    kiln::set_stance(kiln::Stance::default_);
    clear_option_env();
    kiln::config::reset_for_testing();
    kiln::logs::set_sink_for_testing({});
    kiln::logs::set_categories_for_testing("");
  }
};

// Captures everything logged (warnings and enabled categories) while alive.
struct LogCapture {
  std::shared_ptr<std::string> text = std::make_shared<std::string>();
  explicit LogCapture(std::string_view categories = "") {
    kiln::logs::set_categories_for_testing(categories);
    auto t = text;
    kiln::logs::set_sink_for_testing([t](std::string_view s) { t->append(s); });
  }
  ~LogCapture() {
    kiln::logs::set_sink_for_testing({});
    kiln::logs::set_categories_for_testing("");
  }
  const std::string& str() const { return *text; }
};

using kiln_test_util::contains;
using kiln_test_util::count_of;
using kiln_test_util::error_of;

// A backend that records every graph it compiles (a copy) and how often its executables
// ran, then runs the graph with the "eager" backend.
struct Recorder {
  std::mutex mutex;
  std::vector<kiln::Graph> graphs;
  int64_t runs = 0;
};
inline Recorder& recorder() {
  static Recorder r;
  return r;
}
inline void use_recorder() {
  static const bool registered = [] {
    kiln::register_backend("recorder", [](const kiln::Graph& g, std::span<const kiln::TensorMeta> metas) {
      kiln::Executable inner = kiln::BackendRegistry::get("eager")(g, metas);
      {
        std::lock_guard lock(recorder().mutex);
        recorder().graphs.push_back(g);
      }
      return kiln::Executable([inner](std::span<const kiln::TensorData* const> in) {
        {
          std::lock_guard lock(recorder().mutex);
          ++recorder().runs;
        }
        return inner(in);
      });
    });
    return true;
  }();
  (void)registered;
  std::lock_guard lock(recorder().mutex);
  recorder().graphs.clear();
  recorder().runs = 0;
}

// The meta of graph input k.
inline const kiln::TensorMeta& input_meta(const kiln::Graph& g, size_t k) { return g.node(g.inputs().at(k)).meta; }

inline kiln::Tensor iota_f32(int64_t n, double start = 1.0) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(start + static_cast<double>(i));
  return kiln::from_vector(v);
}

inline void check_values(const kiln::Tensor& t, const std::vector<double>& expected, double tol = 1e-5) {
  const std::vector<double> got = t.to_vector<double>();
  BOOST_REQUIRE_EQUAL(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    BOOST_CHECK_MESSAGE(std::abs(got[i] - expected[i]) <= tol * (1 + std::abs(expected[i])),
                        "element " << i << ": got " << got[i] << ", expected " << expected[i]);
}

// The values of f applied elementwise to 1..n (or start..).
inline std::vector<double> mapped(int64_t n, const std::function<double(double)>& f, double start = 1.0) {
  std::vector<double> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(f(start + static_cast<double>(i)));
  return out;
}

inline std::vector<int64_t> sizes_of(const kiln::Tensor& t) { return kiln::shape_hints(t.shape()); }

}  // namespace capture_test
