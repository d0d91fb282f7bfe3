#include "harness.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <cstring>
#include <numeric>
#include <sstream>

#include "kiln/format/graph_json.h"
#include "kiln/graph/error.h"
#include "kiln/passes/passes.h"
#include "kiln/schedule/schedule.h"

namespace cpu_test {

std::string_view domain_name(Domain d) {
  switch (d) {
    case Domain::normal: return "normal";
    case Domain::positive: return "positive";
    case Domain::nonzero: return "nonzero";
    case Domain::near_one: return "near_one";
    case Domain::exponent: return "exponent";
    case Domain::grid: return "grid";
    case Domain::special: return "special";
    case Domain::wide: return "wide";
    case Domain::unit: return "unit";
    case Domain::tiny: return "tiny";
    case Domain::halfway: return "halfway";
  }
  return "?";
}

std::string_view layout_name(Layout l) {
  switch (l) {
    case Layout::contiguous: return "contiguous";
    case Layout::permuted: return "permuted";
    case Layout::sliced: return "sliced";
    case Layout::expanded: return "expanded";
    case Layout::reversed: return "reversed";
  }
  return "?";
}

std::string join(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

double read(const TensorData& t, int64_t k) {
  const std::byte* p = static_cast<const std::byte*>(t.data()) + k * dtype_size(t.dtype);
  switch (t.dtype) {
    case DType::bool_: return *reinterpret_cast<const uint8_t*>(p) != 0;
    case DType::i32: return *reinterpret_cast<const int32_t*>(p);
    case DType::i64: return static_cast<double>(*reinterpret_cast<const int64_t*>(p));
    case DType::f16: return half_bits_to_float(*reinterpret_cast<const uint16_t*>(p));
    case DType::bf16: return bf16_bits_to_float(*reinterpret_cast<const uint16_t*>(p));
    case DType::f32: return *reinterpret_cast<const float*>(p);
    case DType::f64: return *reinterpret_cast<const double*>(p);
  }
  return 0;
}

void write(const TensorData& t, int64_t k, double v) {
  std::byte* p = static_cast<std::byte*>(t.data()) + k * dtype_size(t.dtype);
  switch (t.dtype) {
    case DType::bool_: *reinterpret_cast<uint8_t*>(p) = v != 0; break;
    case DType::i32: *reinterpret_cast<int32_t*>(p) = static_cast<int32_t>(static_cast<int64_t>(v)); break;
    case DType::i64: *reinterpret_cast<int64_t*>(p) = static_cast<int64_t>(v); break;
    case DType::f16: *reinterpret_cast<uint16_t*>(p) = float_to_half_bits(static_cast<float>(v)); break;
    case DType::bf16: *reinterpret_cast<uint16_t*>(p) = float_to_bf16_bits(static_cast<float>(v)); break;
    case DType::f32: *reinterpret_cast<float*>(p) = static_cast<float>(v); break;
    case DType::f64: *reinterpret_cast<double*>(p) = v; break;
  }
}

namespace {
// Calls fn(logical flat index, element offset) for every element of t in row-major order.
template <class Fn>
void for_each_element(const TensorData& t, Fn&& fn) {
  const int64_t n = t.numel();
  if (n == 0) return;
  std::vector<int64_t> idx(t.sizes.size(), 0);
  int64_t off = 0;
  for (int64_t k = 0; k < n; ++k) {
    fn(k, off);
    for (int64_t d = t.rank() - 1; d >= 0; --d) {
      const size_t u = static_cast<size_t>(d);
      if (++idx[u] < t.sizes[u]) {
        off += t.strides[u];
        break;
      }
      off -= (t.sizes[u] - 1) * t.strides[u];
      idx[u] = 0;
    }
  }
}
}  // namespace

std::vector<double> elements(const TensorData& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for_each_element(t, [&](int64_t k, int64_t off) { v[static_cast<size_t>(k)] = read(t, off); });
  return v;
}

TensorData tensor(DType t, std::vector<int64_t> sizes, const std::vector<double>& values) {
  TensorData d = TensorData::empty_host(t, std::move(sizes));
  for (int64_t k = 0; k < d.numel() && k < static_cast<int64_t>(values.size()); ++k)
    write(d, k, values[static_cast<size_t>(k)]);
  return d;
}

std::vector<double> random_values(DType t, int64_t n, Domain d, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  auto uniform = [&](double a, double b) { return a + (b - a) * u01(rng); };
  auto int_in = [&](int64_t a, int64_t b) {
    return static_cast<double>(a + static_cast<int64_t>(rng() % static_cast<uint64_t>(b - a + 1)));
  };
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) {
    if (t == DType::bool_) {
      x = d == Domain::positive ? 1 : d == Domain::near_one ? (rng() % 4 != 0) : (rng() % 2);
      continue;
    }
    if (is_integral(t)) {
      switch (d) {
        case Domain::positive: x = int_in(1, 5); break;
        case Domain::nonzero: x = int_in(1, 4) * (rng() % 2 ? 1 : -1); break;
        case Domain::near_one: { static const double k[] = {-1, 1, 1, 2}; x = k[rng() % 4]; break; }
        case Domain::exponent: x = int_in(0, 3); break;
        case Domain::grid: x = int_in(-2, 2); break;
        case Domain::unit: x = int_in(-1, 1); break;
        case Domain::wide:
          x = t == DType::i32 ? int_in(-2147483648LL, 2147483647LL) : int_in(-(int64_t{1} << 40), int64_t{1} << 40);
          break;
        default: x = int_in(-4, 4); break;
      }
      continue;
    }
    switch (d) {
      case Domain::positive: x = uniform(0.1, 4); break;
      case Domain::nonzero: x = normal(rng); if (std::fabs(x) < 0.1) x = x < 0 ? -0.1 - x : 0.1 + x; break;
      case Domain::near_one: x = uniform(0.75, 1.3); break;
      case Domain::exponent: x = uniform(-2, 2); break;
      case Domain::grid: x = 0.5 * int_in(-4, 4); break;
      case Domain::unit: x = uniform(-0.95, 0.95); break;
      case Domain::wide: x = 100 * normal(rng); break;
      case Domain::tiny: {
        static const double sub[] = {1e-5, 3e-7, 1e-39, 5e-41, 1e-310, 2e-45};
        x = (rng() % 4 == 0 ? sub[rng() % 6] * uniform(1, 2) : std::pow(10.0, -uniform(3, 8))) * (rng() % 2 ? 1 : -1);
        break;
      }
      case Domain::halfway: {
        // An f32 whose low bits are exactly half an f16 (13 bits) or bf16 (16 bits) unit.
        uint32_t u;
        const float f = static_cast<float>(normal(rng));
        std::memcpy(&u, &f, sizeof u);
        u = rng() % 2 ? (u & 0xFFFF0000u) | 0x8000u : (u & 0xFFFFE000u) | 0x1000u;
        float h;
        std::memcpy(&h, &u, sizeof h);
        x = h;
        break;
      }
      case Domain::special: {
        x = normal(rng);
        if (rng() % 5 == 0) {
          static const double s[] = {kNaN, kInf, -kInf, 0.0, -0.0};
          x = s[rng() % 5];
        }
        break;
      }
      default: x = normal(rng); break;
    }
    if (flushes_f32_subnormals() && (t == DType::f32 || t == DType::bf16) && x != 0 &&
        std::fabs(x) < std::numeric_limits<float>::min())
      x = std::copysign(0.0, x);
  }
  return v;
}

bool& flushes_f32_subnormals() {
  static bool flush = false;
  return flush;
}

TensorData laid_out(DType t, const std::vector<int64_t>& sizes, const std::vector<double>& values, Layout l) {
  const int64_t rank = static_cast<int64_t>(sizes.size());
  if (l == Layout::permuted && rank >= 2) {
    std::vector<int64_t> rev(sizes.rbegin(), sizes.rend());
    TensorData s = TensorData::empty_host(t, rev);
    TensorData v = s;
    v.sizes = sizes;
    v.strides.assign(s.strides.rbegin(), s.strides.rend());
    for_each_element(v, [&](int64_t k, int64_t off) { write(v, off, values[static_cast<size_t>(k)]); });
    return v;
  }
  if (l == Layout::sliced && rank >= 1) {
    std::vector<int64_t> big = sizes;
    big.back() = 2 * big.back() + 1;
    TensorData s = TensorData::empty_host(t, big);
    for (int64_t k = 0; k < s.numel(); ++k) write(s, k, is_floating(t) ? kNaN : 77);
    TensorData v = s;
    v.sizes = sizes;
    v.strides = s.strides;
    v.strides.back() = 2;
    v.offset = 1;
    for_each_element(v, [&](int64_t k, int64_t off) { write(v, off, values[static_cast<size_t>(k)]); });
    return v;
  }
  if (l == Layout::reversed && rank >= 1) {
    TensorData s = TensorData::empty_host(t, sizes);
    TensorData v = s;
    v.strides.back() = -1;
    v.offset = sizes.back() - 1;
    for_each_element(v, [&](int64_t k, int64_t off) { write(v, off, values[static_cast<size_t>(k)]); });
    return v;
  }
  if (l == Layout::expanded) {
    int64_t d = -1;
    for (int64_t k = 0; k < rank && d < 0; ++k)
      if (sizes[static_cast<size_t>(k)] > 1) d = k;
    if (d >= 0) {
      std::vector<int64_t> small = sizes;
      small[static_cast<size_t>(d)] = 1;
      TensorData s = TensorData::empty_host(t, small);
      TensorData v = s;
      v.sizes = sizes;
      v.strides[static_cast<size_t>(d)] = 0;
      for_each_element(v, [&](int64_t k, int64_t off) { write(v, off, values[static_cast<size_t>(k)]); });
      return v;  // the last write at each offset wins: values along d come from the last index
    }
  }
  return tensor(t, sizes, values);
}

Tolerance tolerance_for(DType t, bool loose) {
  switch (t) {
    case DType::f32: return loose ? Tolerance{4e-5, 4e-6} : Tolerance{1e-5, 1e-6};
    case DType::f64: return loose ? Tolerance{1e-11, 1e-13} : Tolerance{1e-12, 1e-14};
    case DType::f16: return loose ? Tolerance{2e-3, 1e-4} : Tolerance{1e-3, 1e-5};
    case DType::bf16: return loose ? Tolerance{1.6e-2, 1e-3} : Tolerance{1e-2, 1e-4};
    default: return {};
  }
}

std::string CompileOptions::str() const {
  std::string s;
  if (small_grains) s += " small-grains";
  if (emulate_precision_casts) s += " emulate-precision-casts";
  if (keep_buffers) s += " keep-buffers";
  if (autotune) s += " max-autotune";
  if (!variant.empty()) s += " variant " + variant;
  return s.empty() ? "default" : s.substr(1);
}

int64_t& pinned_variants() {
  static int64_t n = 0;
  return n;
}

CompileStats& compile_stats() {
  static CompileStats s;
  return s;
}

double subnormal_atol(DType t) {
  switch (t) {
    case DType::f32: return 1e-44;
    case DType::f64: return 2e-322;
    case DType::f16: return 2.4e-7;
    case DType::bf16: return 1e-39;
    default: return 0;
  }
}

Target& target() {
  static Target t;
  return t;
}

Compiled compile(const Graph& g, const CompileOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  struct Count {
    std::chrono::steady_clock::time_point start;
    ~Count() {
      compile_stats().seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      ++compile_stats().compiles;
    }
  } count{start};
  Compiled c;
  c.graph = g;
  try {
    KILN_CHECK(target().compile, "tests: no target set (the suite's main sets target())");
    c.optimized = passes::run_default_pipeline(g);
    target().compile(c, o);
    compile_stats().kernels += static_cast<int64_t>(c.plan.kernels.size());
  } catch (const std::exception& e) {
    c.error = e.what();
  }
  return c;
}

OutputDiff compare(const TensorData& got, const TensorData& want, const Tolerance& tol, const TensorData* scale) {
  OutputDiff r;
  if (got.dtype != want.dtype) {
    r.ok = false;
    r.what = "dtype " + std::string(dtype_name(got.dtype)) + ", want " + std::string(dtype_name(want.dtype));
    return r;
  }
  if (got.sizes != want.sizes) {
    r.ok = false;
    r.what = "sizes " + join(got.sizes) + ", want " + join(want.sizes);
    return r;
  }
  const std::vector<double> g = elements(got), w = elements(want);
  std::vector<double> sc;
  if (scale && scale->sizes == want.sizes) sc = elements(*scale);
  double max_w = 0;
  for (double x : w)
    if (std::isfinite(x)) max_w = std::max(max_w, std::fabs(x));
  const bool exact = !is_floating(want.dtype);
  const bool flush = flushes_f32_subnormals() && (want.dtype == DType::f32 || want.dtype == DType::bf16);
  auto flushed = [&](double x) { return flush && std::fabs(x) < std::numeric_limits<float>::min() ? 0.0 : x; };
  for (size_t k = 0; k < w.size(); ++k) {
    const double a = flushed(g[k]), b = flushed(w[k]);
    bool ok;
    double err = 0;
    if (exact) {
      ok = a == b;
      err = std::fabs(a - b);
    } else if (std::isnan(b) || std::isnan(a)) {
      ok = std::isnan(a) && std::isnan(b);
      err = ok ? 0 : kInf;
    } else if (std::isinf(b) || std::isinf(a)) {
      ok = a == b;
      err = ok ? 0 : kInf;
    } else {
      err = std::fabs(a - b);
      double mag = std::fabs(b);
      if (tol.scale_by_max) mag = std::max(mag, max_w);
      if (!sc.empty() && std::isfinite(sc[k])) mag = std::max(mag, std::fabs(sc[k]));
      ok = err <= tol.atol + tol.rtol * mag;
    }
    r.max_abs = std::max(r.max_abs, err);
    if (std::isfinite(err) && b != 0) r.max_rel = std::max(r.max_rel, err / std::fabs(b));
    if (!std::isfinite(err)) r.max_rel = kInf;
    if (!ok) {
      if (r.ok) {
        // Multi-index of the first bad element.
        std::vector<int64_t> idx(want.sizes.size());
        int64_t rest = static_cast<int64_t>(k);
        for (int64_t d = want.rank() - 1; d >= 0; --d) {
          idx[static_cast<size_t>(d)] = rest % want.sizes[static_cast<size_t>(d)];
          rest /= want.sizes[static_cast<size_t>(d)];
        }
        std::ostringstream os;
        os.precision(10);
        os << "element " << join(idx) << " (flat " << k << "): got " << a << ", want " << b;
        r.what = os.str();
      }
      r.ok = false;
      ++r.bad;
    }
  }
  return r;
}

std::string describe_inputs(std::span<const TensorData> inputs) {
  std::ostringstream os;
  os.precision(9);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorData& t = inputs[i];
    os << "  input " << i << ": " << dtype_name(t.dtype) << join(t.sizes);
    if (!t.is_contiguous()) os << " strides " << join(t.strides) << " offset " << t.offset;
    if (t.numel() <= 64) {
      os << " = [";
      const std::vector<double> v = elements(t);
      for (size_t k = 0; k < v.size(); ++k) os << (k ? ", " : "") << v[k];
      os << "]";
    }
    os << "\n";
  }
  return os.str();
}

std::string failure_report(const std::string& title, const Graph& g, std::span<const TensorData> inputs,
                           const std::vector<int64_t>& symbols, const std::string& details) {
  std::ostringstream os;
  os << "\n==== " << title << "\n" << details;
  if (!symbols.empty()) os << "symbol values: " << join(symbols) << "\n";
  os << "inputs:\n" << describe_inputs(inputs) << "graph:\n" << g.str() << "graph JSON:\n";
  try {
    os << format::to_json(g) << "\n";
  } catch (const std::exception& e) {
    os << "(to_json failed: " << e.what() << ")\n";
  }
  return os.str();
}

std::string run_and_compare(const Compiled& c, std::span<const TensorData> inputs, const std::vector<Tolerance>& tols,
                            std::vector<size_t>* bad_outputs) {
  if (c.error.empty() && !c.exe) return "";  // compile-only target: nothing to compare
  std::vector<TensorData> want;
  try {
    want = eval::run_graph(c.graph, inputs);
  } catch (const std::exception& e) {
    return std::string("the reference failed: ") + e.what() + "\n";
  }
  if (!c.error.empty()) {
    if (bad_outputs)
      for (size_t k = 0; k < want.size(); ++k) bad_outputs->push_back(k);
    return "compile failed: " + c.error + "\n";
  }
  std::vector<TensorData> got;
  try {
    got = c.exe->run(inputs);
  } catch (const std::exception& e) {
    if (bad_outputs)
      for (size_t k = 0; k < want.size(); ++k) bad_outputs->push_back(k);
    return std::string("run failed: ") + e.what() + "\n";
  }
  if (got.size() != want.size()) return "got " + std::to_string(got.size()) + " outputs, want " + std::to_string(want.size()) + "\n";
  // The same graph on |inputs| where a tolerance wants it (error bounds of sums).
  bool need_abs = false;
  for (const Tolerance& t : tols) need_abs = need_abs || t.scale_by_abs_run;
  std::vector<TensorData> abs_run;
  if (need_abs) {
    std::vector<TensorData> a;
    for (const TensorData& t : inputs) {
      std::vector<double> v = elements(t);
      for (double& x : v) x = std::fabs(x);
      a.push_back(tensor(t.dtype, t.sizes, v));
    }
    try {
      abs_run = eval::run_graph(c.graph, a);
    } catch (const std::exception&) {
      abs_run.clear();
    }
  }
  std::ostringstream os;
  os.precision(6);
  for (size_t k = 0; k < want.size(); ++k) {
    const Tolerance& tol = tols.size() == 1 ? tols[0] : tols.at(k);
    const TensorData* scale = tol.scale_by_abs_run && k < abs_run.size() ? &abs_run[k] : nullptr;
    const OutputDiff d = compare(got[k], want[k], tol, scale);
    if (!d.ok) {
      os << "output " << k << " (" << dtype_name(want[k].dtype) << join(want[k].sizes) << ", node %"
         << c.graph.outputs()[k] << " " << op_name(c.graph.node(c.graph.outputs()[k]).op) << "): " << d.what << "; "
         << d.bad << " bad of " << want[k].numel() << ", max abs err " << d.max_abs << ", max rel err " << d.max_rel
         << " (rtol " << tol.rtol << ", atol " << tol.atol << ")\n";
      if (want[k].numel() <= 64 && got[k].sizes == want[k].sizes) {
        os << "    got:  ";
        for (double x : elements(got[k])) os << x << " ";
        os << "\n    want: ";
        for (double x : elements(want[k])) os << x << " ";
        os << "\n";
      }
      if (bad_outputs) bad_outputs->push_back(k);
    }
  }
  return os.str();
}

}  // namespace cpu_test
