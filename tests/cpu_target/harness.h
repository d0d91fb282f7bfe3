// Shared by the target tests (test_cpu_target, test_cuda_target): input values in chosen domains
// and layouts, compiling a graph for the target under test (passes, then the target's schedule ->
// codegen -> runtime, see Target below), running it and the reference interpreter on the same
// inputs, comparing with per-dtype tolerances, and reporting a failure so it can be replayed (the
// graph as JSON, the inputs, the symbol values, the worst elements).
#pragma once

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kiln/graph/graph.h"
#include "kiln/plan/plan.h"
#include "kiln/eval/interpreter.h"

namespace cpu_test {

using namespace kiln;

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- values ---------------------------------------------------------------------------------

// Where random input values come from (floats / integers / bools).
enum class Domain {
  normal,    // N(0, 1) / [-4, 4] / fair
  positive,  // U[0.1, 4] / [1, 5] / true
  nonzero,   // N(0, 1) with |x| >= 0.1 / [-4, 4] without 0 / true
  near_one,  // U[0.75, 1.3] / {-1, 1, 1, 2} / mostly true
  exponent,  // U[-2, 2] / [0, 3] / fair
  grid,      // multiples of 1/2 in [-2, 2] (ties, exact in every float type) / [-2, 2] / fair
  special,   // N(0, 1) with 1 in 5 of NaN, inf, -inf, 0, -0 (floats only) / [-4, 4] / fair
  wide,      // N(0, 100) / the whole i32 range (wrapping arithmetic) / fair
  unit,      // U(-0.95, 0.95) / [-1, 1] / fair
  tiny,      // magnitudes 1e-3 .. 1e-8, and subnormals of f16, bf16 / f32 and f64 / [-1, 1] / fair
  halfway,   // f32 values halfway between two f16 or two bf16 values (rounding ties) / normal / fair
};
std::string_view domain_name(Domain d);

double read(const TensorData& t, int64_t element_offset);  // at an element offset from t.data()
void write(const TensorData& t, int64_t element_offset, double v);
// Logical elements in row-major order (any strides).
std::vector<double> elements(const TensorData& t);
// A contiguous host tensor holding `values` (plain C++ conversions, f16/bf16 rounded).
TensorData tensor(DType t, std::vector<int64_t> sizes, const std::vector<double>& values);
std::vector<double> random_values(DType t, int64_t n, Domain d, std::mt19937_64& rng);

// How an input is laid out in memory.
enum class Layout {
  contiguous,
  permuted,  // storage in reversed dim order (a transposed view); rank >= 2
  sliced,    // every other element of a larger storage along the last dim, offset 1, NaN between
  expanded,  // the first dim of size > 1 has stride 0 (values repeat along it)
  reversed,  // the last dim walked backwards: stride -1, offset at its end
};
std::string_view layout_name(Layout l);

// A tensor of the given sizes and layout holding `values` (row-major logical order). For
// `expanded` the values along the broadcast dim are taken from its index 0.
TensorData laid_out(DType t, const std::vector<int64_t>& sizes, const std::vector<double>& values, Layout l);

// ---- compile, run, compare ------------------------------------------------------------------

struct Tolerance {
  double rtol = 0, atol = 0;
  // Each element may also be off by rtol * scale, where scale is (when set) the corresponding
  // element of a second reference run on |inputs| (sums, means, matmuls: the error bound of a
  // sum is relative to the sum of magnitudes) or the largest magnitude in the output tensor.
  bool scale_by_abs_run = false;
  bool scale_by_max = false;
};
// Per-dtype tolerance for one op; `loose` for transcendental ops (library vs polynomial).
Tolerance tolerance_for(DType t, bool loose = false);
// Absolute slack of a few subnormal units of the dtype (results near zero compared relatively).
double subnormal_atol(DType t);

// Set by a target whose device may flush f32 subnormals to zero (Vulkan without
// shaderDenormPreserveFloat32: NVIDIA's driver does; lavapipe may): f32 and bf16 (computed in f32) test
// inputs in the subnormal range become signed zeros, so the target and the reference see the
// same values, and compare() treats f32/bf16 results below the smallest normal as zero on both
// sides. Off for the cpu and CUDA targets, which keep subnormals.
bool& flushes_f32_subnormals();

// A compiled plan that runs (the cpu PlanExecutable, the CUDA executable): host tensors in,
// host tensors out. May be called from several threads at once.
struct Runner {
  virtual ~Runner() = default;
  virtual std::vector<TensorData> run(std::span<const TensorData> inputs) = 0;
};

struct Compiled {
  Graph graph;      // as given
  Graph optimized;  // after passes::run_default_pipeline
  plan::KernelPlan plan;
  // Null when the target only compiles here (CUDA without a device): then nothing is run and
  // run_and_compare / the differential check compare nothing after a successful compile.
  std::shared_ptr<Runner> exe;
  std::string error;  // compile error (empty when compiled)
};

// Options the tests compile with: the config's, or small grains so kernels run in many
// [begin, end) slices (8 chunks on 2 threads) even for tiny tensors.
struct CompileOptions {
  bool small_grains = false;
  bool emulate_precision_casts = false;
  bool keep_buffers = false;  // mode reduce-overhead: intermediate slots kept between calls
  bool autotune = false;      // mode max-autotune: variants emitted, timed and chosen on the first call
  // With autotune: instead of timing, every kernel that has this variant (its entry name plus
  // this suffix, e.g. "_u4") runs it; pinned_variants() counts those kernels.
  std::string variant;
  std::string str() const;
};
Compiled compile(const Graph& g, const CompileOptions& o = {});
int64_t& pinned_variants();

// The target under test: the suite's main sets it before any test runs.
struct Target {
  std::string name;  // "cpu", "cuda"
  // From c.optimized, fills c.plan and c.exe (left null when the target can only compile here);
  // throws kiln::Error when the graph does not compile. Adds its compile time to
  // compile_stats().jit_seconds.
  std::function<void(Compiled& c, const CompileOptions& o)> compile;
};
Target& target();

// Totals over the process (the suite prints them).
struct CompileStats {
  int64_t compiles = 0, kernels = 0;
  double seconds = 0, jit_seconds = 0;
};
CompileStats& compile_stats();

// The worst mismatch of one output.
struct OutputDiff {
  bool ok = true;
  std::string what;  // first problem, readable
  double max_abs = 0, max_rel = 0;
  int64_t bad = 0;   // elements out of tolerance
};
OutputDiff compare(const TensorData& got, const TensorData& want, const Tolerance& tol,
                   const TensorData* scale = nullptr);

// Everything a failure report prints. `inputs` are printed in full when small.
std::string describe_inputs(std::span<const TensorData> inputs);
std::string failure_report(const std::string& title, const Graph& g, std::span<const TensorData> inputs,
                           const std::vector<int64_t>& symbols, const std::string& details);

// Runs the reference and the compiled graph on `inputs` and compares output `k` with
// `tols[k]` (or tols[0] for every output when there is one). Returns "" when all agree, else
// the details (one line per bad output); `bad_outputs` lists them.
std::string run_and_compare(const Compiled& c, std::span<const TensorData> inputs, const std::vector<Tolerance>& tols,
                            std::vector<size_t>* bad_outputs = nullptr);

std::string join(const std::vector<int64_t>& v);

}  // namespace cpu_test
