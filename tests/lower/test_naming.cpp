// lower::name_by_content: a generated kernel's entry becomes a hash of its source without its
// name, so kernels that differ only in name (a model's repeated layers) become identical.
#include <boost/test/unit_test.hpp>

#include "kiln/lower/skeleton.h"

namespace kiln {

BOOST_AUTO_TEST_SUITE(naming)

plan::PlanKernel kernel(const std::string& name, const std::string& body, const std::string& buffer = "p0") {
  plan::PlanKernel k;
  k.name = k.entry = name;
  k.source = "extern \"C\" __global__ void " + name + "(float* " + buffer + ") { " + body + " }\n";
  return k;
}

BOOST_AUTO_TEST_CASE(kernels_differing_only_in_name_get_one_name) {
  plan::PlanKernel a = kernel("k1", "p0[0] = 1.0f; int k12 = 3; // k1"), b = kernel("k7", "p0[0] = 1.0f; int k12 = 3; // k7");
  lower::name_by_content(a);
  lower::name_by_content(b);
  BOOST_TEST(a.entry == b.entry);
  BOOST_TEST(a.source == b.source);
  BOOST_TEST(a.entry.rfind("kiln_", 0) == 0, a.entry);
  BOOST_TEST(a.name == "k1");  // the kernel's name in the plan stays
  // Whole identifiers only: k12 is another one, left as it is.
  BOOST_TEST(a.source.find("int k12 = 3") != std::string::npos, a.source);
  BOOST_TEST(a.source.find("k1(") == std::string::npos, a.source);

  plan::PlanKernel c = kernel("k2", "p0[0] = 2.0f;");
  lower::name_by_content(c);
  BOOST_TEST(c.entry != a.entry);
  // Stable: the same source is named alike in every process (the hash is not std::hash).
  plan::PlanKernel again = kernel("k2", "p0[0] = 2.0f;");
  lower::name_by_content(again);
  BOOST_TEST(again.entry == c.entry);
}

// Buffer names differ between layers: renamed to their parameter positions, the kernels match.
BOOST_AUTO_TEST_CASE(renamed_buffers_make_layers_identical) {
  plan::PlanKernel a = kernel("k3", "b3[0] = 1.0f; float b31 = 0x1b3;", "b3"), b = kernel("k9", "b9[0] = 1.0f; float b31 = 0x1b3;", "b9");
  lower::name_by_content(a, {{"b3", "arg0"}});
  lower::name_by_content(b, {{"b9", "arg0"}});
  BOOST_TEST(a.source == b.source);
  BOOST_TEST(a.source.find("float* arg0) { arg0[0] = 1.0f; float b31 = 0x1b3;") != std::string::npos, a.source);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace kiln
