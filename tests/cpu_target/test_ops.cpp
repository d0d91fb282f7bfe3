// Every op of the op table on the cpu target against the reference interpreter: one test case
// per op (ops/<name>), registered from all_ops(), so an op added to the table without cases
// here fails. Each op runs over every dtype it accepts (a dtype the op or the reference rejects
// is skipped and listed), static shapes (rank 0, size 1, odd sizes, broadcasting, strided,
// sliced and stride-0 inputs, inputs declared contiguous but passed strided) and symbolic
// shapes run at several sizes with small launch grains (kernels run in many slices).
// f32 runs every case; the other dtypes run the core cases (a strided / broadcast / special-value
// case, a symbolic one, and what is dtype-specific), to keep the suite near 40 s on two cores.
// KILN_CPU_TARGET_FULL=1 runs every case for every dtype (about 9,400 kernels, a few minutes).
// A failing case is re-run alone (and, when it fails only together with others, reduced to the
// smallest set of cases that still fails), and printed with its graph as JSON and its inputs.
#include <chrono>
#include <set>

#include "op_cases.h"

using namespace cpu_test;

namespace {

void test_op(OpId op) {
  const auto& table = op_case_table();
  const auto it = table.find(op);
  if (it == table.end()) {
    BOOST_ERROR("op " << op_name(op) << " has no cases in tests/cpu_target/op_cases.cpp (op_case_table): add them");
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  int cases = 0, rejected = 0, runs = 0, failures = 0;
  std::set<std::string> rejected_notes;
  for (const Batch& b : it->second(op)) {
    const BatchStats st = run_batch(b, 1 + static_cast<uint64_t>(op));
    cases += st.cases;
    rejected += st.rejected;
    runs += st.runs;
    failures += st.failures;
    for (const std::string& r : st.rejected_notes) rejected_notes.insert(r);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  BOOST_TEST(cases > 0, "op " << op_name(op) << ": no case was accepted");
  std::string rej;
  for (const std::string& r : rejected_notes) rej += "\n    rejected " + r;
  const CompileStats cs = compile_stats();
  BOOST_TEST_MESSAGE("op " << op_name(op) << ": " << cases << " cases, " << runs << " batch runs, " << failures
                           << " failing outputs, " << rejected << " rejected by the op or the reference, " << secs
                           << " s" << rej << "\n    (so far: " << cs.compiles << " compiles, " << cs.kernels << " kernels, "
                           << cs.seconds << " s compiling, " << cs.jit_seconds << " s in the JIT)");
}

struct RegisterOpTests {
  RegisterOpTests() {
    namespace ut = boost::unit_test;
    ut::test_suite* suite = BOOST_TEST_SUITE("ops");
    for (const OpDef& d : all_ops()) {
      const OpId op = d.id;
      suite->add(ut::make_test_case([op] { test_op(op); }, std::string(d.name), __FILE__, __LINE__));
    }
    ut::framework::master_test_suite().add(suite);
  }
} const register_op_tests;

}  // namespace
