// Type promotion (torch's result_type) and numpy broadcasting.
#include "helpers.h"

using namespace kiln;
using kiln_test::G;
using kiln_test::meta;

namespace {
DType rt(std::initializer_list<TensorMeta> ms) {
  std::vector<const TensorMeta*> ptrs;
  for (const TensorMeta& m : ms) ptrs.push_back(&m);
  return result_type(ptrs);
}
std::string bc(SymShape a, SymShape b) {
  ShapeEnv env;
  return shape_str(broadcast_shapes(a, b, env, "test"));
}
}  // namespace

BOOST_AUTO_TEST_SUITE(promotion)

BOOST_AUTO_TEST_CASE(result_type_table) {
  using D = DType;
  BOOST_TEST((rt({meta(D::i32, {3}), meta(D::f16, {3})}) == D::f16));
  BOOST_TEST((rt({meta(D::bool_, {3}), meta(D::i64, {3})}) == D::i64));
  BOOST_TEST((rt({meta(D::f16, {3}), meta(D::bf16, {3})}) == D::f32));
  BOOST_TEST((rt({meta(D::i32, {3}), meta(D::i64, {3})}) == D::i64));
  BOOST_TEST((rt({meta(D::f32, {3}), meta(D::f64, {3})}) == D::f64));
  BOOST_TEST((rt({meta(D::bool_, {3}), meta(D::bool_, {3})}) == D::bool_));
  // 0-d operands only lift the type when they are of a higher category.
  BOOST_TEST((rt({meta(D::i32, {3}), meta(D::f64, {})}) == D::f64));
  BOOST_TEST((rt({meta(D::f32, {3}), meta(D::f64, {})}) == D::f32));
  BOOST_TEST((rt({meta(D::i32, {3}), meta(D::i64, {})}) == D::i32));
  BOOST_TEST((rt({meta(D::bool_, {3}), meta(D::i32, {})}) == D::i32));
  BOOST_TEST((rt({meta(D::f16, {3}), meta(D::f32, {})}) == D::f16));
  BOOST_TEST((rt({meta(D::bf16, {3}), meta(D::f16, {})}) == D::bf16));
  // All 0-d: plain promotion.
  BOOST_TEST((rt({meta(D::i32, {}), meta(D::f64, {})}) == D::f64));
  BOOST_TEST((rt({meta(D::f16, {}), meta(D::bf16, {})}) == D::f32));
  // A size-0 or size-1 dim still counts as dimensioned.
  BOOST_TEST((rt({meta(D::f16, {0}), meta(D::f64, {})}) == D::f16));
  BOOST_TEST((rt({meta(D::i64, {1}), meta(D::i32, {3})}) == D::i64));
}

BOOST_AUTO_TEST_CASE(result_type_through_add) {
  G t;
  BOOST_TEST(t.out(OpId::add, {t.in(DType::i32, {3}), t.in(DType::f16, {3})}) == "f16[3]");
  BOOST_TEST(t.out(OpId::add, {t.in(DType::bool_, {3}), t.in(DType::i64, {3})}) == "i64[3]");
  BOOST_TEST(t.out(OpId::add, {t.in(DType::f16, {3}), t.in(DType::bf16, {3})}) == "f32[3]");
  BOOST_TEST(t.out(OpId::add, {t.in(DType::i32, {3}), t.in(DType::f64, {})}) == "f64[3]");
  BOOST_TEST(t.out(OpId::add, {t.in(DType::f32, {3}), t.in(DType::f64, {})}) == "f32[3]");
  BOOST_TEST(t.out(OpId::mul, {t.in(DType::f64, {}), t.in(DType::f32, {2, 2})}) == "f32[2, 2]");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(broadcasting)

BOOST_AUTO_TEST_CASE(numpy_rules) {
  BOOST_TEST(bc({3, 1}, {1, 4}) == "[3, 4]");
  BOOST_TEST(bc({2, 3, 4}, {4}) == "[2, 3, 4]");
  BOOST_TEST(bc({4}, {2, 3, 4}) == "[2, 3, 4]");
  BOOST_TEST(bc({5, 1, 7}, {6, 1}) == "[5, 6, 7]");
  BOOST_TEST(bc({}, {2, 3}) == "[2, 3]");
  BOOST_TEST(bc({}, {}) == "[]");
  BOOST_TEST(bc({1}, {}) == "[1]");
  BOOST_TEST(bc({1, 1}, {1}) == "[1, 1]");
  // Size 0 broadcasts against 1 and stays 0.
  BOOST_TEST(bc({0}, {1}) == "[0]");
  BOOST_TEST(bc({1}, {0}) == "[0]");
  BOOST_TEST(bc({0, 3}, {1, 3}) == "[0, 3]");
  BOOST_TEST(bc({5, 0}, {5, 1}) == "[5, 0]");
  BOOST_TEST(bc({2, 0}, {0}) == "[2, 0]");
}

BOOST_AUTO_TEST_CASE(mismatches_name_the_op_and_the_dim) {
  ShapeEnv env;
  CHECK_KILN_ERROR(broadcast_shapes(SymShape{2, 3}, SymShape{4}, env, "add"),
                   "add: shapes [2, 3] and [4] do not broadcast at dim 1 (sizes 3 and 4)");
  CHECK_KILN_ERROR(broadcast_shapes(SymShape{0}, SymShape{2}, env, "mul"), "mul: shapes [0] and [2]",
                   "(sizes 0 and 2)");
  CHECK_KILN_ERROR(broadcast_shapes(SymShape{2, 5, 3}, SymShape{4, 3}, env, "where"), "where", "at dim 1");
  G t;
  CHECK_KILN_ERROR(t.op(OpId::add, {t.in(DType::f32, {3}), t.in(DType::f32, {4})}),
                   "add: shapes [3] and [4] do not broadcast at dim 0 (sizes 3 and 4)");
  CHECK_KILN_ERROR(t.op(OpId::eq, {t.in(DType::f32, {2, 3}), t.in(DType::f32, {3, 2})}), "eq: shapes");
}

BOOST_AUTO_TEST_CASE(rank_differences_through_ops) {
  G t;
  BOOST_TEST(t.out(OpId::add, {t.in(DType::f32, {8, 1, 6, 1}), t.in(DType::f32, {7, 1, 5})}) == "f32[8, 7, 6, 5]");
  BOOST_TEST(t.out(OpId::sub, {t.in(DType::f32, {}), t.in(DType::f32, {2, 0})}) == "f32[2, 0]");
  BOOST_TEST(t.out(OpId::where, {t.in(DType::bool_, {3, 1}), t.in(DType::f32, {4}), t.in(DType::f32, {})}) ==
             "f32[3, 4]");
}

BOOST_AUTO_TEST_SUITE_END()
