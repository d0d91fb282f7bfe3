// Random graphs for differential testing of the cpu target against the reference interpreter:
// chains of pointwise ops with broadcasting and type promotion, views (reshape, permute,
// transpose, expand, slice, squeeze, unsqueeze, flatten), reductions over random dims
// (softmax / layer_norm / rms_norm shaped patterns, hand-written and as composites), matmul
// and linear, cat / pad / index_select, over inputs with static sizes (1, small, primes) and
// symbolic sizes, some of them strided.
//
// The generator evaluates every node on the reference as it builds (at the example sizes), so
// it keeps values in sensible domains: log / sqrt / rsqrt / div / pow get positive or bounded
// operands, exp a bounded argument, and values stay far from overflow (f16 / bf16 included).
// Ops that are discontinuous (floor, round, sign, comparisons, casts to integers, argmax) only
// read "exact" values: inputs and what exact ops (views, neg, abs, max, where, integer math, ...)
// make of them, so a last-bit difference between targets (fused f32 math, f16 rounded once
// instead of after every op) cannot flip their result.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "harness.h"

namespace cpu_test {

struct RandomGraphOptions {
  // Do not generate the patterns of the cpu-target bugs found so far (test_known_bugs.cpp: 2c/d
  // broadcast values in reductions, 7 size-1 gemm operands, 8 mixed-dtype matmuls), so that
  // random testing finds other ones while those are open (KILN_DIFF_AVOID_KNOWN_BUGS=1). They are
  // fixed now, so by default everything is generated.
  bool avoid_known_bugs = false;
};

struct RandomCase {
  Graph graph;
  std::vector<Layout> layouts;                    // per graph input
  std::vector<std::vector<int64_t>> symbol_runs;  // symbol values to run at (the first: the examples)
};

RandomCase random_graph(uint64_t seed, const RandomGraphOptions& options = {});

// Inputs for `c` at symbol values `symbols`: floats N(0, 1) (integers in [-4, 4], bools fair),
// laid out as the case says.
std::vector<TensorData> random_case_inputs(const RandomCase& c, const std::vector<int64_t>& symbols, uint64_t seed);

// The differential check of one graph: compiled once, run at every symbol run on the same random
// inputs as the reference; each output compared with the tolerance of the least precise float
// type among the values it depends on, relative to the largest magnitude among them (fused
// kernels round differently than op-by-op evaluation, and errors scale with the values summed).
// Returns "" when everything agrees, else a report naming the seed, the run, the graph (text and
// JSON), the inputs and the worst error, and the smallest prefix of the graph that already fails.
struct DiffOptions {
  CompileOptions compile;
  bool minimize = true;
};
// The compile options seed `seed` runs with: default, small grains (kernels run in many slices),
// emulate_precision_casts, keep_buffers (each run twice), max-autotune (the first run tunes).
CompileOptions compile_options_for_seed(uint64_t seed);
std::string differential_check(const RandomCase& c, uint64_t seed, const DiffOptions& options);

// The graph compiled once and run from `threads` threads at once (`calls` calls each, at the
// case's symbol runs in turn); every result compared with the reference afterwards.
std::string concurrent_check(const RandomCase& c, uint64_t seed, const CompileOptions& co, int threads, int calls);

}  // namespace cpu_test
