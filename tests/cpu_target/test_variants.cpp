// max-autotune's variants: each kernel's other vector widths, unroll factors, column block
// sizes and gemm tile heights is pinned in turn (instead of timed) and must compute what the
// reference computes on the op cases of pointwise ops, row and column reductions, softmax,
// layer_norm and matmul. A variant no kernel had fails the test, so a renamed variant cannot
// pass unseen.
#include "op_cases.h"

using namespace cpu_test;

BOOST_AUTO_TEST_SUITE(autotune_variants)

namespace {

// Runs `batches` with `variant` pinned; the variant must have been in some kernel.
void check_pinned(const std::string& variant, const std::vector<Batch>& batches) {
  pinned_variants() = 0;
  int cases = 0, failures = 0;
  for (size_t i = 0; i < batches.size(); ++i) {
    Batch pinned = batches[i];
    pinned.options.autotune = true;
    pinned.options.variant = variant;
    const BatchStats st = run_batch(pinned, 5 + i);
    cases += st.cases;
    failures += st.failures;
  }
  BOOST_TEST(cases > 0);
  BOOST_TEST(pinned_variants() > 0, "variant " << variant << ": no kernel had it");
  BOOST_TEST_MESSAGE("variant " << variant << ": " << cases << " cases, " << pinned_variants()
                                << " kernels pinned to it, " << failures << " failing");
}

std::vector<Batch> f32_batches(std::initializer_list<OpId> ops) {
  std::vector<Batch> out;
  for (OpId op : ops)
    for (const Batch& b : op_case_table().at(op)(op))
      if (!b.cases.empty() && !b.cases[0].args.empty() && b.cases[0].args[0].dtype == DType::f32) out.push_back(b);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(pointwise_and_reduction_variants_match_the_reference) {
  const std::vector<Batch> batches = f32_batches({OpId::exp, OpId::sum, OpId::layer_norm});
  for (const std::string variant : {"_u1", "_u4", "_w256", "_w512", "_host", "_b64", "_b256"})
    check_pinned(variant, batches);
}

BOOST_AUTO_TEST_CASE(gemm_tile_variants_match_the_reference) {
  std::vector<Batch> batches = f32_batches({OpId::matmul});
  // Every remainder of 8-, 4- and 2-row tiles, and columns around the 32-wide tiles.
  batches.push_back(matmul_shape_cases("gemm tile remainders", {1, 2, 3, 5, 7, 8, 9, 15, 17}, {1, 17, 33}));
  for (const std::string variant : {"_tiled", "_tiled_r2", "_tiled_r8"}) check_pinned(variant, batches);
}

BOOST_AUTO_TEST_SUITE_END()
