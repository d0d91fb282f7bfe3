// Differential testing: random graphs (random_graph.h) compiled for the cpu and compared with the
// reference interpreter on the same random inputs, at the example sizes and at other values of
// their symbolic sizes (2, primes, one large). A fixed set of seeds runs in CI; any number by hand:
//   KILN_DIFF_SEEDS=5000 KILN_DIFF_FIRST_SEED=1 test_cpu_target --run_test=differential
// Seeds cycle through compile modes (compile_options_for_seed): default, small launch grains
// (kernels run in many slices), emulate_precision_casts, keep_buffers, max-autotune. A failure prints the
// seed (to replay: KILN_DIFF_FIRST_SEED=<seed> KILN_DIFF_SEEDS=1), the graph as text and JSON, the
// inputs, the worst error, and the smallest prefix of the graph that already fails.
// KILN_DIFF_AVOID_KNOWN_BUGS=1 does not generate the patterns of the bugs found so far
// (test_known_bugs.cpp), for hunting others while they are open.
// KILN_DIFF_GRAPH=file.json runs one graph file (e.g. a printed failure) the same way, in every
// compile mode, at its example sizes or at KILN_DIFF_SYMBOLS=7,2 (the values of s0, s1, ...).
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "kiln/format/graph_json.h"
#include "random_graph.h"

using namespace cpu_test;

namespace {

uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

constexpr uint64_t kCiSeeds = 250;

}  // namespace

BOOST_AUTO_TEST_SUITE(differential)

BOOST_AUTO_TEST_CASE(random_graphs_match_the_reference) {
  const uint64_t first = env_u64("KILN_DIFF_FIRST_SEED", 1), count = env_u64("KILN_DIFF_SEEDS", kCiSeeds);
  RandomGraphOptions go;
  go.avoid_known_bugs = env_u64("KILN_DIFF_AVOID_KNOWN_BUGS", 0) != 0;
  const auto start = std::chrono::steady_clock::now();
  int failed = 0, symbolic = 0, runs = 0, nodes = 0, kernels = 0;
  const CompileStats before = compile_stats();
  for (uint64_t seed = first; seed < first + count; ++seed) {
    const RandomCase c = random_graph(seed, go);
    symbolic += !c.graph.shapes().empty();
    runs += static_cast<int>(c.symbol_runs.size());
    nodes += static_cast<int>(c.graph.op_count());
    DiffOptions o;
    o.compile = compile_options_for_seed(seed);
    const std::string report = differential_check(c, seed, o);
    if (!report.empty()) {
      ++failed;
      BOOST_ERROR(report);
    }
  }
  kernels = static_cast<int>(compile_stats().kernels - before.kernels);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  BOOST_TEST_MESSAGE("random graphs: seeds " << first << ".." << first + count - 1 << ", " << failed << " failed, "
                                             << symbolic << " symbolic, " << runs << " runs, " << nodes << " ops, "
                                             << kernels << " kernels compiled, " << secs << " s");
}

// PlanExecutable::run may be called from several threads at once (slots and outputs per call;
// with keep_buffers, kept slots only for the caller that holds them).
BOOST_AUTO_TEST_CASE(concurrent_calls) {
  const uint64_t first = env_u64("KILN_DIFF_FIRST_SEED", 1);
  int checked = 0;
  for (uint64_t seed = first; checked < 12 && seed < first + 200; ++seed) {
    const RandomCase c = random_graph(seed);
    if (c.graph.op_count() < 6) continue;
    ++checked;
    CompileOptions o = compile_options_for_seed(seed);
    o.autotune = false;  // tuning times kernels on the first call; covered by random_graphs_match_the_reference
    o.keep_buffers = seed % 2 == 0;
    const std::string report = concurrent_check(c, seed, o, 3, 4);
    BOOST_TEST(report.empty(), report);
  }
  BOOST_TEST(checked == 12);
}

BOOST_AUTO_TEST_CASE(graph_file) {
  const char* path = std::getenv("KILN_DIFF_GRAPH");
  if (!path || !*path) {
    BOOST_TEST_MESSAGE("KILN_DIFF_GRAPH not set: nothing to replay");
    return;
  }
  RandomCase c;
  c.graph = format::load_graph(path);
  c.layouts.assign(c.graph.inputs().size(), Layout::contiguous);
  c.symbol_runs = {c.graph.shapes().examples()};
  if (const char* v = std::getenv("KILN_DIFF_SYMBOLS"); v && *v) {  // e.g. "7,2": the values of s0, s1
    std::vector<int64_t> syms;
    std::stringstream ss(v);
    for (std::string x; std::getline(ss, x, ',');) syms.push_back(std::stoll(x));
    c.symbol_runs = {syms};
  }
  for (uint64_t mode = 0; mode < 5; ++mode) {
    DiffOptions o;
    o.compile = compile_options_for_seed(mode);
    const std::string report = differential_check(c, env_u64("KILN_DIFF_FIRST_SEED", 1), o);
    BOOST_TEST(report.empty(), report);
  }
}

// A chain of 1,200 pointwise ops (deeper than a kernel computes without storing: the scheduler
// cuts it every Options::max_inline_depth ops) matches the reference on every target. Before
// the cut, a 10k-op chain took minutes in LLVM's optimisers on the cpu target and a 100k-op one
// overflowed the stack in fusion, lowering and every codegen (tests/schedule: deep_graphs).
BOOST_AUTO_TEST_CASE(a_deep_chain_matches_the_reference) {
  Graph g;
  NodeId x = g.add_input(TensorMeta{DType::f32, Device::cpu(), {3, 50}, {}}, "x");
  const OpId ops[] = {OpId::tanh, OpId::sigmoid, OpId::neg, OpId::abs, OpId::exp};
  for (int i = 0; i < 1200; ++i) x = g.add(ops[i % 5], {x});
  g.set_outputs({x});
  const Compiled c = compile(g);
  BOOST_REQUIRE_MESSAGE(c.error.empty(), c.error);
  BOOST_TEST(c.plan.kernels.size() >= 4u);
  std::mt19937_64 rng(3);
  const std::vector<TensorData> in{tensor(DType::f32, {3, 50}, random_values(DType::f32, 150, Domain::normal, rng))};
  const std::string report = run_and_compare(c, in, {tolerance_for(DType::f32, true)});
  BOOST_TEST(report.empty(), report);
}

BOOST_AUTO_TEST_SUITE_END()
