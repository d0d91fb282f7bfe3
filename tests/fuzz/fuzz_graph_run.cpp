// libFuzzer target for the graph format and the reference interpreter together: from_json on
// arbitrary bytes, then, for a graph that loads and whose inputs and nodes are all small at its
// symbols' example values (or their minimum, when an example is large), run_graph on
// deterministic inputs of those sizes. Loading and running may throw kiln::Error; any other
// exception (kiln::InternalError, a bug in Kiln, included: it escapes and libFuzzer reports the
// abort), a crash or a sanitizer report is a finding. An output must have its node's dtype and
// the sizes its node's type gives at those symbol values.
// In a build with the CPU target (KILN_FUZZ_JIT: tests/fuzz/CMakeLists.txt compiles the graph
// passes, the scheduler, the cpu code generator and targets/cpu/runtime in, instrumented; LLVM
// and OpenBLAS are the system's), the same small graphs are also compiled for the cpu target as
// `kiln run G.json --target cpu` compiles them (passes::run_default_pipeline, the scheduler and
// the cpu codegen for an empty request, as the cpu runtime asks) and run on cpu::PlanExecutable
// (one thread) on copies of the same inputs in memory with guard pages (KILN_CPU_GUARD_PAGES=1,
// as fuzz_plan_json sets it: the generated kernels are not instrumented, so a read or write past
// a buffer's end faults instead). Then:
// - where the reference ran the graph, a kiln::Error from compile or run is a finding (the cpu
//   target refusing what the reference runs; none is a documented limitation yet for graphs this
//   small), and so is an output that differs from the reference's beyond tests/cpu_target's
//   loose tolerances (tolerance_for(dtype, true): f32 rtol 4e-5, atol 4e-6; f64, f16, bf16 alike)
//   scaled by the output's largest magnitude (scale_by_max), integers and bool exact, NaN and
//   infinities where the reference has them (not compared where the graph's values come within
//   overflow's reach: near_overflow; nor where the reference itself, its computed floating values
//   nudged by a few units in the last place, leaves the tolerance: nudged_reference, an
//   ill-conditioned graph); and an input the kernels wrote into;
// - where the reference refused the inputs (an index out of range, a violated fact), the cpu
//   target may refuse them too or run: only a crash, a fault or a sanitizer report is a finding.
// A finding aborts with the graph and its JSON. Compiles are slow (the 28 seeds: 14 compiles in
// ~6.7 s at O3, ~4.3 s at O1, on a 2-core machine; the passes and codegen are instrumented too),
// so not every graph is compiled: the scheduled graph (its JSON) keys up to
// 64 executables, a graph seen before runs again on its executable, and of new ones only the
// first 48 and then 1 in 16 (by the hash of the scheduled graph, so that a reproducer that was
// compiled in the run is compiled on its own too) are compiled. KILN_FUZZ_GRAPH_OPT sets the JIT's
// opt level (default 3, as `kiln run`). At exit the fuzzer prints how many graphs reached the
// cpu target, were compiled, ran and were compared.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/eval/interpreter.h"
#include "kiln/format/graph_json.h"
#include "kiln/graph/error.h"
#include "fuzz_util.h"

#if KILN_FUZZ_JIT
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>

#include "kiln/cpu/executable.h"
#include "kiln/passes/passes.h"
#include "kiln/target/target.h"

void kiln_register_cpu_codegen();  // targets/cpu/target/codegen.cpp
#endif

namespace {

constexpr int64_t kMaxSymbol = 64;           // symbols are bound to values at most this
constexpr int64_t kMaxElements = 1 << 16;    // per tensor, and all inputs together
constexpr int64_t kMaxAllElements = 1 << 20; // every node together

bool verbose_jit() {
  static const bool on = std::getenv("KILN_FUZZ_VERBOSE") != nullptr;
  return on;
}

// The sizes of a type at the symbol values, nullopt when one is negative, overflows, or the
// element count passes `cap`.
std::optional<std::vector<int64_t>> small_sizes(const kiln::SymShape& shape, std::span<const int64_t> values,
                                                int64_t cap, int64_t* count) {
  std::vector<int64_t> sizes;
  int64_t n = 1;
  for (const kiln::SymInt& s : shape) {
    const std::optional<int64_t> v = kiln::fuzz::checked_evaluate(s, values);
    if (!v || *v < 0) return std::nullopt;
    sizes.push_back(*v);
    if (__builtin_mul_overflow(n, std::max<int64_t>(*v, 1), &n) || n > cap) return std::nullopt;
  }
  *count = n;
  return sizes;
}

// Deterministic values: small integers and halves for floats (some negative, some zero), 0..3
// for integers (valid indices into small dims), alternating for bool.
void fill(kiln::TensorData& t, uint64_t salt) {
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t h = (static_cast<uint64_t>(i) + salt) * 0x9E3779B97F4A7C15ull;
    const int64_t k = static_cast<int64_t>((h >> 33) % 9) - 4;  // -4..4
    switch (t.dtype) {
      case kiln::DType::f32: t.data_as<float>()[i] = static_cast<float>(k) / 2; break;
      case kiln::DType::f64: t.data_as<double>()[i] = static_cast<double>(k) / 2; break;
      case kiln::DType::f16:
      case kiln::DType::bf16: {
        // +-k/2 in both 16-bit formats: exact small values (0, 0.5, 1, 1.5, 2 and negatives).
        static const uint16_t f16[] = {0x0000, 0x3800, 0x3C00, 0x3E00, 0x4000};
        static const uint16_t bf16[] = {0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000};
        const uint16_t mag = (t.dtype == kiln::DType::f16 ? f16 : bf16)[k < 0 ? -k : k];
        const uint16_t bits = static_cast<uint16_t>(mag | (k < 0 ? 0x8000 : 0));
        std::memcpy(static_cast<char*>(t.data()) + 2 * i, &bits, 2);
        break;
      }
      case kiln::DType::i32: t.data_as<int32_t>()[i] = static_cast<int32_t>(k < 0 ? -k - 1 : k) % 4; break;
      case kiln::DType::i64: t.data_as<int64_t>()[i] = (k < 0 ? -k - 1 : k) % 4; break;
      case kiln::DType::bool_: static_cast<unsigned char*>(t.data())[i] = static_cast<unsigned char>(k > 0); break;
    }
  }
}


#if KILN_FUZZ_JIT
// ---- the cpu target: the graph compiled as `kiln run --target cpu` does, and run ----------------

constexpr int64_t kJitFirst = 48;  // new graphs compiled: all of the first ones, then 1 in kJitEvery
constexpr uint64_t kJitEvery = 16;
constexpr size_t kJitCache = 64;   // executables kept, by their scheduled graph

struct JitStats {
  int64_t reached = 0, sampled_out = 0, compiled = 0, reused = 0, compile_refused = 0, ran = 0, run_refused = 0,
          compared = 0, ran_where_reference_refused = 0, near_overflow = 0, ill_conditioned = 0;
  int64_t elements = 0;
};
JitStats stats;
void print_stats() {
  std::fprintf(stderr,
               "fuzz_graph_run: cpu target: %lld graphs reached it, %lld left out by the sample; %lld compiled, %lld "
               "reused; %lld refused by compile, %lld by run; %lld ran (%lld compared with the reference, %lld "
               "elements; %lld where the reference refused the inputs; %lld not compared, near overflow; %lld outputs "
               "that differed where the reference itself is ill-conditioned)\n",
               static_cast<long long>(stats.reached), static_cast<long long>(stats.sampled_out),
               static_cast<long long>(stats.compiled), static_cast<long long>(stats.reused),
               static_cast<long long>(stats.compile_refused), static_cast<long long>(stats.run_refused),
               static_cast<long long>(stats.ran), static_cast<long long>(stats.compared),
               static_cast<long long>(stats.elements), static_cast<long long>(stats.ran_where_reference_refused),
               static_cast<long long>(stats.near_overflow), static_cast<long long>(stats.ill_conditioned));
}

int jit_opt_level() {
  static const int level = [] {
    const char* e = std::getenv("KILN_FUZZ_GRAPH_OPT");
    return e && *e ? std::atoi(e) : 3;
  }();
  return level;
}

[[noreturn]] void finding(const std::string& what, const kiln::Graph& g) {
  std::string json;
  try {
    json = kiln::format::to_json(g);
  } catch (const std::exception& e) {
    json = std::string("(to_json failed: ") + e.what() + ")";
  }
  std::fprintf(stderr, "fuzz_graph_run: cpu target: %s\ngraph:\n%s\ngraph JSON:\n%s\n", what.c_str(), g.str().c_str(),
               json.c_str());
  std::abort();
}

// Element `flat` (row-major) of a host tensor, as a double.
double element(const kiln::TensorData& t, int64_t flat) {
  int64_t offset = 0;
  for (size_t d = t.sizes.size(); d-- > 0;) {
    const int64_t size = t.sizes[d];
    offset += (flat % size) * t.strides[d];
    flat /= size;
  }
  const char* p = static_cast<const char*>(t.data()) + (t.offset + offset) * kiln::dtype_size(t.dtype);
  switch (t.dtype) {
    case kiln::DType::bool_: return *reinterpret_cast<const uint8_t*>(p) != 0;
    case kiln::DType::i32: return *reinterpret_cast<const int32_t*>(p);
    case kiln::DType::i64: return static_cast<double>(*reinterpret_cast<const int64_t*>(p));
    case kiln::DType::f16: { uint16_t b; std::memcpy(&b, p, 2); return kiln::half_bits_to_float(b); }
    case kiln::DType::bf16: { uint16_t b; std::memcpy(&b, p, 2); return kiln::bf16_bits_to_float(b); }
    case kiln::DType::f32: return *reinterpret_cast<const float*>(p);
    case kiln::DType::f64: return *reinterpret_cast<const double*>(p);
  }
  return 0;
}

// tests/cpu_target/harness.cpp's compare with its loose (transcendental) tolerance_for, every
// element's slack scaled by the largest magnitude of the reference output (scale_by_max: a graph
// chains ops, sums and matmuls, whose rounding is relative to the magnitudes summed); integers
// and bool exact; NaN where the reference has NaN, the same infinity where it has one. "" when
// the outputs agree, else what differs.
std::string compare(const kiln::TensorData& got, const kiln::TensorData& want) {
  if (got.dtype != want.dtype || got.sizes != want.sizes)
    return std::string("output is ") + std::string(kiln::dtype_name(got.dtype)) +
           kiln::shape_str(kiln::static_shape(got.sizes)) + ", the reference's " + std::string(kiln::dtype_name(want.dtype)) +
           kiln::shape_str(kiln::static_shape(want.sizes));
  double rtol = 0, atol = 0;
  switch (want.dtype) {
    case kiln::DType::f32: rtol = 4e-5, atol = 4e-6; break;
    case kiln::DType::f64: rtol = 1e-11, atol = 1e-13; break;
    case kiln::DType::f16: rtol = 2e-3, atol = 1e-4; break;
    case kiln::DType::bf16: rtol = 1.6e-2, atol = 1e-3; break;
    default: break;
  }
  const int64_t n = want.numel();
  double max_w = 0;
  for (int64_t k = 0; k < n; ++k)
    if (const double w = element(want, k); std::isfinite(w)) max_w = std::max(max_w, std::fabs(w));
  const bool exact = !kiln::is_floating(want.dtype);
  int64_t bad = 0;
  std::string first;
  for (int64_t k = 0; k < n; ++k) {
    const double a = element(got, k), b = element(want, k);
    bool ok;
    if (exact) ok = a == b;
    else if (std::isnan(a) || std::isnan(b)) ok = std::isnan(a) && std::isnan(b);
    else if (std::isinf(a) || std::isinf(b)) ok = a == b;
    else ok = std::fabs(a - b) <= atol + rtol * std::max(std::fabs(b), max_w);
    if (!ok && bad++ == 0) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "element %lld: got %.9g, want %.9g", static_cast<long long>(k), a, b);
      first = buf;
    }
  }
  ++stats.compared;
  stats.elements += n;
  if (!bad) return "";
  return first + " (" + std::to_string(bad) + " of " + std::to_string(n) + " elements outside rtol " + std::to_string(rtol) +
         " of max(|want|, " + std::to_string(max_w) + "), atol " + std::to_string(atol) + ")";
}

// Whether the reference's values come within overflow's reach: some floating node (the
// interpreter computes them all again, every one an output) holds a finite value above the
// square root of its type's largest over 256, where a product, or a sum of up to 2^16 of them,
// can overflow. There the order and width of accumulation decide between a finite result, an
// infinity and NaN (the reference sums a matmul in f64, the cpu target in f32: a sum of +inf and
// -inf products is NaN there, the f64 sum rounds to inf), so the outputs are not compared; the
// run must still not crash, fault or write into an input. Explicit infinities and NaN (constants,
// exp of a large value) do not count: their results are IEEE's, the same on every path.
bool near_overflow(const kiln::Graph& g, const std::vector<kiln::TensorData>& inputs) {
  kiln::Graph every = g;
  std::vector<kiln::NodeId> ids;
  for (kiln::NodeId id = 0; id < static_cast<kiln::NodeId>(g.size()); ++id)
    if (kiln::is_floating(g.node(id).meta.dtype)) ids.push_back(id);
  every.set_outputs(ids);
  const std::vector<kiln::TensorData> values = kiln::eval::run_graph(every, inputs);
  for (const kiln::TensorData& v : values) {
    double reach = 0;
    switch (v.dtype) {
      case kiln::DType::f16: reach = std::sqrt(65504.0); break;  // f16 math is f32's on both sides; its results round
      case kiln::DType::f64: reach = std::sqrt(std::numeric_limits<double>::max()) / 256; break;
      default: reach = std::sqrt(static_cast<double>(std::numeric_limits<float>::max())) / 256; break;  // f32, bf16
    }
    for (int64_t k = 0; k < v.numel(); ++k)
      if (const double x = element(v, k); std::isfinite(x) && std::fabs(x) > reach) return true;
  }
  return false;
}

// The reference's outputs again with every value the graph computes in a floating type nudged,
// element by element, by a few units in the last place of that type (times 1 + 2^-p·N(0,1),
// p = its mantissa's bits, f32's for randn, which is computed in f32: about the rounding error a
// kernel's other order of operations makes). Where these differ from the reference's own outputs beyond the tolerance,
// the graph is ill-conditioned at these inputs (a softmax over logits of 4e7 that differ by 1: a
// huge bias added to every key; a difference of nearly equal large values): rounding alone
// decides the output, so an output that differs there is not a finding. nullopt where the graph
// cannot be copied so (its inputs out of node order) or the nudged graph does not run.
std::optional<std::vector<kiln::TensorData>> nudged_reference(const kiln::Graph& g, const std::vector<kiln::TensorData>& inputs) {
  try {
    kiln::Graph n;
    n.shapes() = g.shapes();
    std::vector<kiln::NodeId> to(g.size(), -1);
    for (kiln::NodeId id = 0; id < static_cast<kiln::NodeId>(g.size()); ++id) {
      const kiln::Node& node = g.node(id);
      if (node.op == kiln::OpId::input) {
        if (node.attrs.i(0) != static_cast<int64_t>(n.inputs().size())) return std::nullopt;
        to[static_cast<size_t>(id)] = n.add_input(node.meta, node.name);
        continue;
      }
      std::vector<kiln::NodeId> in;
      for (kiln::NodeId i : node.inputs) in.push_back(to[static_cast<size_t>(i)]);
      kiln::NodeId v = n.add(node.op, std::move(in), node.attrs);
      const kiln::DType t = node.meta.dtype;
      if (node.op != kiln::OpId::constant && kiln::is_floating(t)) {
        int bits = t == kiln::DType::f64 ? 52 : t == kiln::DType::f32 ? 23 : t == kiln::DType::f16 ? 10 : 7;
        // randn is computed in f32 whatever its dtype (its logf and cosf may be an ulp apart).
        if (node.op == kiln::OpId::randn) bits = std::min(bits, 23);
        const kiln::NodeId noise = n.add(kiln::OpId::randn, {}, kiln::Attrs{node.meta.sizes, static_cast<int64_t>(7919 + id), t});
        const kiln::NodeId scale = n.add(kiln::OpId::full, {}, kiln::Attrs{kiln::SymShape{}, std::ldexp(1.0, -bits), t});
        const kiln::NodeId one = n.add(kiln::OpId::full, {}, kiln::Attrs{kiln::SymShape{}, 1.0, t});
        v = n.add(kiln::OpId::mul, {v, n.add(kiln::OpId::add, {one, n.add(kiln::OpId::mul, {noise, scale})})});
      }
      to[static_cast<size_t>(id)] = v;
    }
    std::vector<kiln::NodeId> outs;
    for (kiln::NodeId o : g.outputs()) outs.push_back(to[static_cast<size_t>(o)]);
    n.set_outputs(outs);
    return kiln::eval::run_graph(n, inputs);
  } catch (const kiln::Error&) {
    return std::nullopt;
  }
}

// Whether every input has the strides its graph input declares. The inputs are made contiguous:
// a graph input declared with other strides (a view's) runs on the reference, which reads values
// by position, while a plan is made for the declared strides and refuses others (a clean
// rejection, not a finding).
bool inputs_as_declared(const kiln::Graph& g, const std::vector<kiln::TensorData>& inputs) {
  std::vector<int64_t> bound;
  try {
    bound = kiln::eval::bind_symbols(g, inputs);
  } catch (const kiln::Error&) {
    return false;
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    const kiln::TensorMeta& m = g.node(g.inputs()[k]).meta;
    const std::vector<int64_t> contiguous = kiln::contiguous_strides(inputs[k].sizes);
    for (size_t d = 0; d < m.strides.size() && d < contiguous.size(); ++d)
      if (inputs[k].sizes[d] > 1 && m.strides[d].evaluate(bound) != contiguous[d]) return false;
  }
  return true;
}

// Whether this graph's cpu path runs: graphs compiled before always (the executable is kept),
// new ones for the first kJitFirst and then 1 in kJitEvery by the hash of the scheduled graph
// (so an input that reproduces a finding runs it again on its own).
bool sampled(const std::string& key) {
  static int64_t seen = 0;
  return ++seen <= kJitFirst || std::hash<std::string>{}(key) % kJitEvery == 0;
}

// `g` compiled for the cpu target as `kiln run --target cpu` compiles it (the default passes,
// the scheduler, the cpu codegen for any host: an empty request, as the cpu runtime gives;
// cpu::PlanExecutable at KILN_FUZZ_GRAPH_OPT, default O3, one thread), run on copies of the
// inputs in guarded memory (KILN_CPU_GUARD_PAGES: the generated kernels are not instrumented),
// its outputs compared with the reference's (`want`; nullptr where the reference refused the
// inputs: then only a crash is a finding). A kiln::Error of compile or run is a finding where the
// reference ran the graph, a clean rejection where it refused it.
void run_cpu(const kiln::Graph& g, const std::vector<kiln::TensorData>& inputs, const std::vector<kiln::TensorData>* want,
             const std::string& reference_error) {
  ++stats.reached;
  static std::map<std::string, std::shared_ptr<kiln::cpu::PlanExecutable>> exes;  // by scheduled graph
  std::shared_ptr<kiln::cpu::PlanExecutable> exe;
  std::string stage = "the default passes";
  try {
    const kiln::Graph scheduled = kiln::passes::run_default_pipeline(g);
    std::string key = kiln::format::to_json(scheduled, -1);
    if (auto it = exes.find(key); it != exes.end()) {
      ++stats.reused;
      exe = it->second;
    } else {
      if (!sampled(key)) {
        ++stats.sampled_out;
        return;
      }
      ++stats.compiled;
      stage = "the cpu codegen";
      kiln::plan::KernelPlan p =
          kiln::target::compile_graph(kiln::target::codegen("cpu"), scheduled, kiln::target::CodegenRequest{}).generated.plan;
      stage = "the cpu JIT";
      kiln::cpu::ExecutableOptions o;
      o.threads = 1;
      o.opt_level = jit_opt_level();
      exe = kiln::cpu::PlanExecutable::load(std::move(p), o);
      if (exes.size() >= kJitCache) exes.clear();
      exes.emplace(std::move(key), exe);
    }
  } catch (const kiln::Error& e) {
    ++stats.compile_refused;
    kiln::fuzz::rejected(e);
    if (want) finding(stage + " refused a graph the reference ran: " + e.what(), g);
    return;
  }
  const std::vector<kiln::TensorData> guarded = kiln::fuzz::guarded_copies(inputs);
  std::vector<kiln::TensorData> outs;
  try {
    outs = exe->run(std::span<const kiln::TensorData>(guarded));
  } catch (const kiln::Error& e) {
    ++stats.run_refused;
    kiln::fuzz::rejected(e);
    if (want) finding(std::string("the cpu runtime refused inputs the reference ran: ") + e.what(), g);
    return;
  }
  ++stats.ran;
  for (size_t k = 0; k < inputs.size(); ++k)
    if (std::memcmp(guarded[k].data(), inputs[k].data(), static_cast<size_t>(inputs[k].numel() * kiln::dtype_size(inputs[k].dtype))) != 0)
      finding("the cpu target's kernels wrote into input " + std::to_string(k), g);
  if (!want) {
    ++stats.ran_where_reference_refused;
    if (verbose_jit()) std::fprintf(stderr, "note: the cpu target ran inputs the reference refused (%s)\n", reference_error.c_str());
    return;
  }
  if (outs.size() != want->size())
    finding("the cpu target gave " + std::to_string(outs.size()) + " outputs, the reference " + std::to_string(want->size()), g);
  if (near_overflow(g, inputs)) {
    ++stats.near_overflow;
    return;
  }
  std::optional<std::optional<std::vector<kiln::TensorData>>> nudged;  // made when an output differs
  for (size_t k = 0; k < outs.size(); ++k) {
    const std::string d = compare(outs[k], (*want)[k]);
    if (d.empty()) continue;
    if (kiln::is_floating((*want)[k].dtype)) {
      if (!nudged) nudged = nudged_reference(g, inputs);
      if (*nudged && !compare((**nudged)[k], (*want)[k]).empty()) {
        ++stats.ill_conditioned;
        continue;
      }
    }
    finding("output " + std::to_string(k) + " differs from the reference's: " + d, g);
  }
}
#endif

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
#if KILN_FUZZ_JIT
  ::setenv("KILN_CPU_GUARD_PAGES", "1", 1);  // before the runtime's first allocation reads it
  kiln_register_cpu_codegen();
  std::atexit(print_stats);
#endif
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::Graph g;
  try {
    g = kiln::format::from_json(text, "fuzz.json");
  } catch (const kiln::Error& e) {
    kiln::fuzz::rejected(e);
    return 0;  // rejected with a message: fine (only kiln::Error: an InternalError must escape)
  }
  // Symbol values: the example where it is small and in range, else the minimum where that is.
  std::vector<int64_t> values;
  for (const kiln::SymbolInfo& s : g.shapes().symbols()) {
    int64_t v = s.example;
    if (v < s.min || v > s.max || v > kMaxSymbol) v = s.min;
    if (v < 0 || v > kMaxSymbol || v > s.max) return 0;
    values.push_back(v);
  }
  // Every node small at those values (the interpreter computes each one), the inputs too.
  int64_t all = 0;
  for (const kiln::Node& n : g.nodes()) {
    int64_t count = 0;
    if (!small_sizes(n.meta.sizes, values, kMaxElements, &count)) return 0;
    all += count;
    if (all > kMaxAllElements) return 0;
  }
  std::vector<kiln::TensorData> inputs;
  int64_t in_total = 0;
  for (kiln::NodeId i : g.inputs()) {
    const kiln::Node& n = g.node(i);
    int64_t count = 0;
    std::vector<int64_t> sizes = *small_sizes(n.meta.sizes, values, kMaxElements, &count);
    in_total += count;
    if (in_total > kMaxElements) return 0;
    inputs.push_back(kiln::TensorData::empty_host(n.meta.dtype, std::move(sizes)));
    fill(inputs.back(), static_cast<uint64_t>(i) * 1000003u);
  }
  std::vector<kiln::TensorData> outs;
  try {
    outs = kiln::eval::run_graph(g, inputs);
  } catch (const kiln::Error& e) {
    kiln::fuzz::rejected(e);
#if KILN_FUZZ_JIT
    run_cpu(g, inputs, nullptr, e.what());  // may refuse too, or run: it must not crash
#endif
    return 0;  // e.g. an index out of range, a violated shape fact: fine
  }
  // What ran must be what the graph says: one output per graph output, of its node's type.
  if (outs.size() != g.outputs().size()) {
    std::fprintf(stderr, "run_graph gave %zu outputs for a graph of %zu\n", outs.size(), g.outputs().size());
    std::abort();
  }
  std::vector<int64_t> bound;
  try {
    bound = kiln::eval::bind_symbols(g, inputs);
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "run_graph ran, but bind_symbols refuses the same inputs: %s\n", e.what());
    std::abort();
  }
  for (size_t o = 0; o < outs.size(); ++o) {
    const kiln::TensorMeta& m = g.node(g.outputs()[o]).meta;
    int64_t count = 0;
    const std::optional<std::vector<int64_t>> want = small_sizes(m.sizes, bound, kMaxElements, &count);
    if (outs[o].dtype != m.dtype || !want || outs[o].sizes != *want) {
      std::fprintf(stderr, "output %zu is %s%s, its node says %s%s\n", o, std::string(kiln::dtype_name(outs[o].dtype)).c_str(),
                   kiln::shape_str(kiln::static_shape(outs[o].sizes)).c_str(), std::string(kiln::dtype_name(m.dtype)).c_str(),
                   kiln::shape_str(m.sizes).c_str());
      std::abort();
    }
  }
#if KILN_FUZZ_JIT
  run_cpu(g, inputs, inputs_as_declared(g, inputs) ? &outs : nullptr, "");
#endif
  return 0;
}
