// Op cases for the cpu target: a case is a small graph (usually one op over graph inputs) with
// the domain and layout of each input. Cases of one op and dtype are compiled together as one
// graph with one output per case (one JIT compile for many cases); a batch that fails is split
// and each failing case re-run alone, so the report shows the smallest graph.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "harness.h"

namespace cpu_test {

// One input of a case. Negative sizes are symbols: -1 is s0, -2 is s1, ...
struct Arg {
  DType dtype = DType::f32;
  std::vector<int64_t> sizes;
  Domain domain = Domain::normal;
  Layout layout = Layout::contiguous;
  // The graph input's meta states the layout's strides (the kernels index through them);
  // otherwise the input is declared contiguous and the runtime copies a strided tensor.
  bool declare_strides = true;
  int64_t index_bound = 0;  // > 0: integer values in [0, index_bound) (index_select, gather)
};

using BuildFn = std::function<NodeId(Graph& g, const std::vector<NodeId>& inputs, const std::vector<SymInt>& syms)>;

struct OpCase {
  std::string note;  // what the case is about, beyond its graph
  std::vector<Arg> args;
  BuildFn build;     // the value to compare (added to g over the inputs)
  Tolerance tol;
  bool tol_set = false;
  DType out = DType::f32;  // the result dtype (known after building it once)
  bool core = false;  // run for every dtype; the other cases run for f32 (all with KILN_CPU_TARGET_FULL=1)
};

// Cases compiled as one graph; symbolic batches run at every set of symbol values.
struct Batch {
  std::string name;
  std::vector<OpCase> cases;
  std::vector<std::vector<int64_t>> runs;  // symbol values per run (empty: one static run)
  CompileOptions options;
};

struct BatchStats {
  int cases = 0, rejected = 0, runs = 0, failures = 0;
  std::vector<std::string> rejected_notes;
};

// KILN_CPU_TARGET_FULL=1: every case for every dtype (several minutes), not just the core ones.
bool full_mode();

// Builds, compiles and runs a batch, reporting every failing case through BOOST_ERROR.
BatchStats run_batch(const Batch& b, uint64_t seed);

// f32 matmuls of every [m, k] @ [k, n] for m in `ms`, n in `ns`: the tile remainders of the
// generated gemms.
Batch matmul_shape_cases(const std::string& name, const std::vector<int64_t>& ms, const std::vector<int64_t>& ns,
                         int64_t k = 5);

// The tolerance the op cases give an output of `op` of dtype `out` (sums scaled by a run on
// |inputs|, normalisations by the output's largest magnitude).
Tolerance op_tolerance(OpId op, DType out);

// The ops' cases: for each op of the op table, the batches that test it.
using OpCaseFn = std::function<std::vector<Batch>(OpId)>;
const std::map<OpId, OpCaseFn>& op_case_table();

}  // namespace cpu_test
