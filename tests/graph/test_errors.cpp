// kiln::Error and kiln::InternalError (error.h): a broken invariant throws InternalError, which
// names the file:line of its check and which no `catch (const kiln::Error&)` recovery path
// catches; bad input keeps giving kiln::Error.
#include <string>

#include "helpers.h"
#include "kiln/graph/memory_budget.h"
#include "kiln/graph/tensor_data.h"

using namespace kiln;
using kiln_test::G;

namespace {

// Runs f, which must throw; says whether a `catch (const kiln::Error&)` took the exception.
template <class F>
bool caught_as_kiln_error(F&& f) {
  try {
    try {
      f();
    } catch (const Error&) {
      return true;
    }
  } catch (const InternalError&) {
    return false;
  }
  BOOST_FAIL("no exception");
  return false;
}

std::string internal_message(void (*f)()) {
  try {
    f();
  } catch (const InternalError& e) {
    return e.what();
  }
  return "";
}

int check_line = 0;
void failing_check() {
  const int two = 2;
  check_line = __LINE__ + 1;
  KILN_INTERNAL_CHECK(two == 3, "the scheduler lost buffer b", 7);
}

int fail_line = 0;
void failing_fail() {
  fail_line = __LINE__ + 1;
  internal_fail("unknown kernel kind ", 42);
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_SUITE(errors)

BOOST_AUTO_TEST_CASE(internal_check_throws_internal_error_with_file_and_line) {
  const std::string msg = internal_message(failing_check);
  BOOST_TEST(msg.starts_with("internal error: "), msg);
  // The path is relative to the repository root where the compiler has -fmacro-prefix-map.
  BOOST_TEST(contains(msg, "tests/graph/test_errors.cpp:" + std::to_string(check_line) + ": "), msg);
  BOOST_TEST(contains(msg, "check `two == 3` failed: the scheduler lost buffer b7"), msg);
  BOOST_TEST(contains(msg, "a bug in Kiln"), msg);
  BOOST_TEST(!caught_as_kiln_error(failing_check));
  // A check that holds throws nothing.
  BOOST_CHECK_NO_THROW(KILN_INTERNAL_CHECK(1 + 1 == 2, "arithmetic"));
}

BOOST_AUTO_TEST_CASE(internal_fail_throws_internal_error_with_file_and_line) {
  const std::string msg = internal_message(failing_fail);
  BOOST_TEST(msg.starts_with("internal error: tests/graph/test_errors.cpp:" + std::to_string(fail_line) +
                             ": unknown kernel kind 42 (this is a bug in Kiln)"),
             msg);
  BOOST_TEST(!caught_as_kiln_error(failing_fail));
  // Not a runtime_error either: it is a std::logic_error.
  BOOST_CHECK_THROW(failing_fail(), std::logic_error);
}

BOOST_AUTO_TEST_CASE(bad_input_still_gives_kiln_error) {
  G t;
  const NodeId x = t.in(DType::f32, {2, 3});
  BOOST_TEST(caught_as_kiln_error([&] { t.op(OpId::matmul, {x, x}); }));
  BOOST_TEST(caught_as_kiln_error([&] { t.op(OpId::add, {x}); }));
  BOOST_TEST(caught_as_kiln_error([] { (void)parse_dtype("f33"); }));
  BOOST_TEST(caught_as_kiln_error([] { fail("a user mistake"); }));
}

// Sizes that wrap or exceed the largest tensor give a kiln::Error naming the shape, never a small
// allocation that writes run past, nor std::bad_alloc (issue 31: an expand to [2^31, 2^31]).
BOOST_AUTO_TEST_CASE(tensor_sizes_that_wrap_or_exceed_the_limit_are_refused) {
  const int64_t big = int64_t{1} << 31;
  const std::string wrapped = kiln_test_util::error_of([&] { TensorData::empty_host(DType::f32, {big, big}); });
  BOOST_TEST(contains(wrapped, "f32 tensor of shape [2147483648, 2147483648]"));
  BOOST_TEST(contains(wrapped, "overflows 64-bit integers"));
  BOOST_TEST(contains(kiln_test_util::error_of([&] { TensorData::empty_host(DType::f32, {big, big, big}); }),
                      "overflows 64-bit integers"));
  const std::string huge = kiln_test_util::error_of([&] { TensorData::empty_host(DType::bool_, {big, big}); });
  BOOST_TEST(contains(huge, "needs 4611686018427387904 bytes, more than a tensor may have (2^48)"));
  BOOST_TEST(contains(kiln_test_util::error_of([&] { TensorData::empty_host(DType::f32, {-1}); }), "negative size -1"));
  BOOST_TEST(caught_as_kiln_error([&] { TensorData::empty_host(DType::f64, {big, big}); }));
  // An empty tensor of a huge other dimension is fine (no element), and so is an ordinary one;
  // one whose strides wrap is not (fuzz_npy: a .npy file of shape (0, 10000, 80000, 10000010000,
  // 702) overflowed in contiguous_strides).
  BOOST_TEST(TensorData::empty_host(DType::f32, {0, int64_t{1} << 62}).numel() == 0);
  BOOST_TEST(TensorData::empty_host(DType::f32, {big, big, big, 0}).numel() == 0);
  BOOST_TEST(contains(kiln_test_util::error_of([&] { TensorData::empty_host(DType::f32, {0, big * 2, big * 2, 4}); }),
                      "one of its strides overflows 64-bit integers"));
  BOOST_TEST(TensorData::empty_host(DType::f32, {4, 4}).storage->nbytes() == 64u);
}

// A node whose static sizes need more than a tensor may have (an input, an expand) is refused
// where the graph is built, naming it (issue 31: inputs and expands to 2^62 elements).
BOOST_AUTO_TEST_CASE(nodes_larger_than_a_tensor_may_be_are_refused_where_they_are_made) {
  Graph g;
  const std::string input = kiln_test_util::error_of([&] {
    g.add_input(TensorMeta{DType::f32, Device::cpu(), {int64_t{1} << 62, 2}, {}}, "x");
  });
  BOOST_TEST(contains(input, "node %0 (input 'x'): its f32[4611686018427387904, 2] output would need more bytes than a "
                             "tensor may have (2^48)"), input);
  const NodeId x = g.add_input(TensorMeta{DType::f32, Device::cpu(), {1, 1}, {}}, "x");
  const int64_t big = int64_t{1} << 31;
  const std::string expand = kiln_test_util::error_of([&] { g.add(OpId::expand, {x}, Attrs{std::vector<SymInt>{big, big}}); });
  BOOST_TEST(contains(expand, "node %1 (expand): its f32[2147483648, 2147483648] output would need more bytes"), expand);
  // Empty and ordinary ones are fine.
  g.add(OpId::expand, {x}, Attrs{std::vector<SymInt>{0, big * big}});
  g.add(OpId::expand, {x}, Attrs{std::vector<SymInt>{1 << 20, 1 << 20}});
}

// Under the 2^48-byte limit but over the memory budget (the host's physical memory, or
// memory_budget_mb, which sdk/config installs as the source): refused before anything is
// allocated, in a sentence saying how much and what the budget is.
BOOST_AUTO_TEST_CASE(allocations_past_the_memory_budget_are_refused) {
  BOOST_TEST(memory_budget_bytes() == physical_memory_bytes());  // no source here: physical memory
  BOOST_TEST(physical_memory_bytes() > (int64_t{1} << 20));
  const std::string tib = kiln_test_util::error_of([] { TensorData::empty_host(DType::f32, {int64_t{1} << 20, int64_t{1} << 20}); });
  BOOST_TEST(contains(tib, "cannot allocate a f32 tensor of shape [1048576, 1048576]: it needs 4.0 TiB, more than the memory "
                           "budget of "), tib);
  BOOST_TEST(contains(tib, "(the host's physical memory; memory_budget_mb sets another)"), tib);
  set_memory_budget_source([] { return int64_t{1}; });  // 1 MiB
  BOOST_TEST(memory_budget_bytes() == int64_t{1} << 20);
  BOOST_TEST(TensorData::empty_host(DType::f32, {512, 512}).numel() == 512 * 512);  // exactly 1 MiB
  const std::string mib = kiln_test_util::error_of([] { TensorData::empty_host(DType::f32, {513, 512}); });
  BOOST_TEST(contains(mib, "it needs 1.0 MiB, more than the memory budget of 1.0 MiB (memory_budget_mb)"), mib);
  set_memory_budget_source(nullptr);
  BOOST_TEST(bytes_str(512) == "512 bytes");
  BOOST_TEST(bytes_str(int64_t{3} << 29) == "1.5 GiB");
}

BOOST_AUTO_TEST_SUITE_END()
