// Each op's dtype and shape rule, on static shapes.
#include <limits>

#include "helpers.h"

using namespace kiln;
using kiln_test::dims;
using kiln_test::G;

namespace {
constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();
using D = DType;
}  // namespace

BOOST_AUTO_TEST_SUITE(op_rules)

BOOST_AUTO_TEST_CASE(sources) {
  G t;
  auto c = std::make_shared<const ConstantData>(ConstantData{D::i64, {2, 3}, std::vector<std::byte>(48)});
  BOOST_TEST(t.out(OpId::constant, {}, {c}) == "i64[2, 3]");
  auto scalar = std::make_shared<const ConstantData>(ConstantData{D::f16, {}, std::vector<std::byte>(2)});
  BOOST_TEST(t.out(OpId::constant, {}, {scalar}) == "f16[]");
  BOOST_TEST(t.out(OpId::full, {}, {SymShape{2, 0}, 1.5, D::bf16}) == "bf16[2, 0]");
  BOOST_TEST(t.out(OpId::full, {}, {SymShape{}, 0.0, D::bool_}) == "bool[]");
  BOOST_TEST(t.out(OpId::arange, {}, {0.0, 10.0, 3.0, D::i64}) == "i64[4]");
  BOOST_TEST(t.out(OpId::arange, {}, {0.0, 1.0, 0.25, D::f32}) == "f32[4]");
  BOOST_TEST(t.out(OpId::arange, {}, {5.0, 0.0, -2.0, D::i32}) == "i32[3]");
  BOOST_TEST(t.out(OpId::arange, {}, {3.0, 3.0, 1.0, D::f32}) == "f32[0]");
  BOOST_TEST(t.out(OpId::randn, {}, {SymShape{4, 5}, int64_t{42}, D::f16}) == "f16[4, 5]");
  BOOST_TEST(t.out(OpId::rand, {t.in(D::i32, {})}, {SymShape{3}, int64_t{1}, D::bf16}) == "bf16[3]");
  BOOST_TEST(t.out(OpId::philox, {t.in(D::i32, {}), t.in(D::i64, {2, 1})}, {int64_t{1}, int64_t{7}}) == "i64[2, 1]");
}

BOOST_AUTO_TEST_CASE(unary_float_ops_lift_integers_to_f32) {
  G t;
  const NodeId i = t.in(D::i32, {2, 3});
  const NodeId b = t.in(D::bool_, {4});
  const NodeId h = t.in(D::f16, {2});
  const NodeId d = t.in(D::f64, {});
  for (OpId op : {OpId::exp, OpId::log, OpId::sqrt, OpId::rsqrt, OpId::reciprocal, OpId::sin, OpId::cos, OpId::tanh,
                  OpId::sigmoid, OpId::silu, OpId::erf}) {
    BOOST_TEST(t.out(op, {i}) == "f32[2, 3]", op_name(op));
    BOOST_TEST(t.out(op, {b}) == "f32[4]", op_name(op));
    BOOST_TEST(t.out(op, {h}) == "f16[2]", op_name(op));
    BOOST_TEST(t.out(op, {d}) == "f64[]", op_name(op));
  }
  BOOST_TEST(t.out(OpId::gelu, {i}, {std::string("none")}) == "f32[2, 3]");
  BOOST_TEST(t.out(OpId::gelu, {h}, {std::string("tanh")}) == "f16[2]");
}

BOOST_AUTO_TEST_CASE(unary_ops_that_keep_the_dtype) {
  G t;
  const NodeId i = t.in(D::i64, {5});
  const NodeId f = t.in(D::bf16, {1, 2});
  const NodeId b = t.in(D::bool_, {3});
  for (OpId op : {OpId::neg, OpId::abs, OpId::relu, OpId::floor, OpId::ceil, OpId::round, OpId::sign}) {
    BOOST_TEST(t.out(op, {i}) == "i64[5]", op_name(op));
    BOOST_TEST(t.out(op, {f}) == "bf16[1, 2]", op_name(op));
  }
  BOOST_TEST(t.out(OpId::sign, {b}) == "bool[3]");
  BOOST_TEST(t.out(OpId::abs, {b}) == "bool[3]");
}

BOOST_AUTO_TEST_CASE(unary_predicates_and_cast) {
  G t;
  const NodeId f = t.in(D::f32, {2, 2});
  BOOST_TEST(t.out(OpId::logical_not, {f}) == "bool[2, 2]");
  BOOST_TEST(t.out(OpId::isnan, {f}) == "bool[2, 2]");
  BOOST_TEST(t.out(OpId::isnan, {t.in(D::i32, {})}) == "bool[]");
  BOOST_TEST(t.out(OpId::cast, {f}, {D::i32}) == "i32[2, 2]");
  BOOST_TEST(t.out(OpId::cast, {t.in(D::bool_, {0})}, {D::f16}) == "f16[0]");
}

BOOST_AUTO_TEST_CASE(binary_arithmetic) {
  G t;
  const NodeId i = t.in(D::i32, {2, 3});
  const NodeId l = t.in(D::i64, {3});
  const NodeId f = t.in(D::f32, {2, 1});
  const NodeId b = t.in(D::bool_, {3});
  BOOST_TEST(t.out(OpId::add, {i, l}) == "i64[2, 3]");
  BOOST_TEST(t.out(OpId::sub, {i, f}) == "f32[2, 3]");
  BOOST_TEST(t.out(OpId::sub, {i, b}) == "i32[2, 3]");  // only bool - bool is refused
  BOOST_TEST(t.out(OpId::mul, {b, b}) == "bool[3]");
  BOOST_TEST(t.out(OpId::add, {b, b}) == "bool[3]");
  BOOST_TEST(t.out(OpId::pow, {i, l}) == "i64[2, 3]");
  BOOST_TEST(t.out(OpId::pow, {f, t.in(D::f64, {})}) == "f32[2, 1]");
  BOOST_TEST(t.out(OpId::maximum, {b, b}) == "bool[3]");
  BOOST_TEST(t.out(OpId::minimum, {i, f}) == "f32[2, 3]");
}

BOOST_AUTO_TEST_CASE(div_is_true_division) {
  G t;
  BOOST_TEST(t.out(OpId::div, {t.in(D::i32, {4}), t.in(D::i64, {4})}) == "f32[4]");
  BOOST_TEST(t.out(OpId::div, {t.in(D::bool_, {4}), t.in(D::bool_, {1})}) == "f32[4]");
  BOOST_TEST(t.out(OpId::div, {t.in(D::i32, {4}), t.in(D::f64, {})}) == "f64[4]");
  BOOST_TEST(t.out(OpId::div, {t.in(D::f16, {4}), t.in(D::i32, {4})}) == "f16[4]");
  BOOST_TEST(t.out(OpId::div, {t.in(D::f64, {4}), t.in(D::f32, {4})}) == "f64[4]");
}

BOOST_AUTO_TEST_CASE(comparisons_and_logical_ops_give_bool) {
  G t;
  const NodeId a = t.in(D::f32, {2, 3});
  const NodeId b = t.in(D::i64, {3});
  for (OpId op : {OpId::eq, OpId::ne, OpId::lt, OpId::le, OpId::gt, OpId::ge, OpId::logical_and, OpId::logical_or})
    BOOST_TEST(t.out(op, {a, b}) == "bool[2, 3]", op_name(op));
}

BOOST_AUTO_TEST_CASE(where_promotes_the_branches) {
  G t;
  const NodeId c = t.in(D::bool_, {2, 1});
  BOOST_TEST(t.out(OpId::where, {c, t.in(D::i32, {3}), t.in(D::f16, {1})}) == "f16[2, 3]");
  BOOST_TEST(t.out(OpId::where, {c, t.in(D::i32, {3}), t.in(D::f64, {})}) == "f64[2, 3]");
  BOOST_TEST(t.out(OpId::where, {c, t.in(D::f32, {3}), t.in(D::f64, {})}) == "f32[2, 3]");
}

BOOST_AUTO_TEST_CASE(reduction_shapes) {
  G t;
  const NodeId x = t.in(D::f32, {2, 3, 4});
  BOOST_TEST(t.out(OpId::sum, {x}, {dims({1}), false}) == "f32[2, 4]");
  BOOST_TEST(t.out(OpId::sum, {x}, {dims({1}), true}) == "f32[2, 1, 4]");
  BOOST_TEST(t.out(OpId::sum, {x}, {dims({0, 2}), false}) == "f32[3]");
  BOOST_TEST(t.out(OpId::sum, {x}, {dims({}), false}) == "f32[]");
  BOOST_TEST(t.out(OpId::sum, {x}, {dims({}), true}) == "f32[1, 1, 1]");
  BOOST_TEST(t.out(OpId::sum, {x}, {dims({0, 1, 2}), false}) == "f32[]");
  const NodeId s = t.in(D::f32, {});
  BOOST_TEST(t.out(OpId::sum, {s}, {dims({}), true}) == "f32[]");
  BOOST_TEST(t.out(OpId::max, {s}, {dims({}), false}) == "f32[]");
}

BOOST_AUTO_TEST_CASE(reduction_dtypes) {
  G t;
  const NodeId b = t.in(D::bool_, {4});
  const NodeId i = t.in(D::i32, {4});
  const NodeId l = t.in(D::i64, {4});
  const NodeId h = t.in(D::f16, {4});
  const Attrs all{dims({}), false};
  for (OpId op : {OpId::sum, OpId::prod}) {
    BOOST_TEST(t.out(op, {b}, all) == "i64[]", op_name(op));
    BOOST_TEST(t.out(op, {i}, all) == "i64[]", op_name(op));
    BOOST_TEST(t.out(op, {l}, all) == "i64[]", op_name(op));
    BOOST_TEST(t.out(op, {h}, all) == "f16[]", op_name(op));
  }
  for (OpId op : {OpId::mean, OpId::logsumexp}) {
    BOOST_TEST(t.out(op, {b}, all) == "f32[]", op_name(op));
    BOOST_TEST(t.out(op, {i}, all) == "f32[]", op_name(op));
    BOOST_TEST(t.out(op, {h}, all) == "f16[]", op_name(op));
  }
  BOOST_TEST(t.out(OpId::var, {i}, {dims({0}), true, int64_t{1}}) == "f32[1]");
  BOOST_TEST(t.out(OpId::var, {h}, {dims({}), false, int64_t{0}}) == "f16[]");
  for (OpId op : {OpId::max, OpId::min}) {
    BOOST_TEST(t.out(op, {b}, all) == "bool[]", op_name(op));
    BOOST_TEST(t.out(op, {i}, all) == "i32[]", op_name(op));
    BOOST_TEST(t.out(op, {h}, all) == "f16[]", op_name(op));
  }
}

BOOST_AUTO_TEST_CASE(argmax_and_argmin) {
  G t;
  const NodeId x = t.in(D::f16, {2, 3, 4});
  for (OpId op : {OpId::argmax, OpId::argmin}) {
    BOOST_TEST(t.out(op, {x}, {dims({1}), false}) == "i64[2, 4]", op_name(op));
    BOOST_TEST(t.out(op, {x}, {dims({2}), true}) == "i64[2, 3, 1]", op_name(op));
    // No dim: over the flattened tensor; keepdim gives all ones.
    BOOST_TEST(t.out(op, {x}, {dims({}), false}) == "i64[]", op_name(op));
    BOOST_TEST(t.out(op, {x}, {dims({}), true}) == "i64[1, 1, 1]", op_name(op));
  }
  BOOST_TEST(t.out(OpId::argmax, {t.in(D::bool_, {3})}, {dims({0}), false}) == "i64[]");
}

BOOST_AUTO_TEST_CASE(empty_reductions_with_an_identity_are_allowed) {
  G t;
  const NodeId x = t.in(D::f32, {0, 3});
  BOOST_TEST(t.out(OpId::sum, {x}, {dims({0}), false}) == "f32[3]");
  BOOST_TEST(t.out(OpId::prod, {x}, {dims({}), false}) == "f32[]");
  BOOST_TEST(t.out(OpId::mean, {x}, {dims({0}), true}) == "f32[1, 3]");
  // Reducing the non-empty dim of an empty tensor is fine for max too.
  BOOST_TEST(t.out(OpId::max, {x}, {dims({1}), false}) == "f32[0]");
}

BOOST_AUTO_TEST_CASE(reshape_permute_transpose) {
  G t;
  const NodeId x = t.in(D::f32, {2, 3, 4});
  BOOST_TEST(t.out(OpId::reshape, {x}, {SymShape{6, 4}}) == "f32[6, 4]");
  BOOST_TEST(t.out(OpId::reshape, {x}, {SymShape{24}}) == "f32[24]");
  BOOST_TEST(t.out(OpId::reshape, {t.in(D::i32, {1, 1})}, {SymShape{}}) == "i32[]");
  BOOST_TEST(t.out(OpId::reshape, {t.in(D::i32, {0, 5})}, {SymShape{5, 0, 2}}) == "i32[5, 0, 2]");
  BOOST_TEST(t.out(OpId::permute, {x}, {dims({2, 0, 1})}) == "f32[4, 2, 3]");
  BOOST_TEST(t.out(OpId::permute, {t.in(D::f32, {})}, {dims({})}) == "f32[]");
  BOOST_TEST(t.out(OpId::transpose, {x}, {int64_t{0}, int64_t{2}}) == "f32[4, 3, 2]");
  BOOST_TEST(t.out(OpId::transpose, {x}, {int64_t{1}, int64_t{1}}) == "f32[2, 3, 4]");
}

BOOST_AUTO_TEST_CASE(expand_squeeze_unsqueeze) {
  G t;
  const NodeId x = t.in(D::f32, {3, 1});
  BOOST_TEST(t.out(OpId::expand, {x}, {SymShape{3, 5}}) == "f32[3, 5]");
  BOOST_TEST(t.out(OpId::expand, {x}, {SymShape{2, 3, 0}}) == "f32[2, 3, 0]");
  BOOST_TEST(t.out(OpId::expand, {t.in(D::i64, {})}, {SymShape{4, 4}}) == "i64[4, 4]");
  BOOST_TEST(t.out(OpId::squeeze, {x}, {dims({1})}) == "f32[3]");
  BOOST_TEST(t.out(OpId::squeeze, {t.in(D::f32, {1, 2, 1})}, {dims({0, 2})}) == "f32[2]");
  BOOST_TEST(t.out(OpId::squeeze, {x}, {dims({})}) == "f32[3, 1]");
  BOOST_TEST(t.out(OpId::unsqueeze, {x}, {int64_t{0}}) == "f32[1, 3, 1]");
  BOOST_TEST(t.out(OpId::unsqueeze, {x}, {int64_t{2}}) == "f32[3, 1, 1]");
  BOOST_TEST(t.out(OpId::unsqueeze, {t.in(D::f32, {})}, {int64_t{0}}) == "f32[1]");
}

BOOST_AUTO_TEST_CASE(slice_follows_python) {
  G t;
  const NodeId x = t.in(D::f32, {10, 4});
  auto sl = [&](int64_t d, int64_t s, int64_t e, int64_t st) {
    return t.out(OpId::slice, {x}, {d, s, e, st});
  };
  BOOST_TEST(sl(0, 2, 5, 1) == "f32[3, 4]");
  BOOST_TEST(sl(0, 0, kEnd, 1) == "f32[10, 4]");
  BOOST_TEST(sl(0, 0, kEnd, 3) == "f32[4, 4]");  // 0 3 6 9
  BOOST_TEST(sl(0, 1, 10, 3) == "f32[3, 4]");    // 1 4 7
  BOOST_TEST(sl(0, -3, kEnd, 1) == "f32[3, 4]");
  BOOST_TEST(sl(0, 0, -1, 1) == "f32[9, 4]");
  BOOST_TEST(sl(0, -100, 100, 1) == "f32[10, 4]");
  BOOST_TEST(sl(0, 7, 3, 1) == "f32[0, 4]");
  BOOST_TEST(sl(0, 20, 30, 1) == "f32[0, 4]");
  BOOST_TEST(sl(1, 1, 2, 1) == "f32[10, 1]");
  BOOST_TEST(sl(1, std::numeric_limits<int64_t>::min(), kEnd, kEnd) == "f32[10, 1]");
}

BOOST_AUTO_TEST_CASE(cat_pad_index_select) {
  G t;
  const NodeId a = t.in(D::i32, {2, 3});
  const NodeId b = t.in(D::f16, {4, 3});
  const NodeId e = t.in(D::i64, {0, 3});
  BOOST_TEST(t.out(OpId::cat, {a, b, e}, {int64_t{0}}) == "f16[6, 3]");
  BOOST_TEST(t.out(OpId::cat, {a}, {int64_t{1}}) == "i32[2, 3]");
  BOOST_TEST(t.out(OpId::cat, {a, a}, {int64_t{1}}) == "i32[2, 6]");
  BOOST_TEST(t.out(OpId::cat, {a, e}, {int64_t{0}}) == "i64[2, 3]");
  const NodeId x = t.in(D::f32, {2, 3, 4});
  BOOST_TEST(t.out(OpId::pad, {x}, {dims({1, 2}), 0.0}) == "f32[2, 3, 7]");
  BOOST_TEST(t.out(OpId::pad, {x}, {dims({0, 0, 1, 1, 2, 0}), 1.0}) == "f32[4, 5, 4]");
  BOOST_TEST(t.out(OpId::pad, {x}, {dims({-1, -1}), 0.0}) == "f32[2, 3, 2]");
  BOOST_TEST(t.out(OpId::pad, {x}, {dims({-4, 0}), 0.0}) == "f32[2, 3, 0]");
  BOOST_TEST(t.out(OpId::pad, {x}, {dims({}), 0.0}) == "f32[2, 3, 4]");
  BOOST_TEST(t.out(OpId::index_select, {x, t.in(D::i64, {5})}, {int64_t{1}}) == "f32[2, 5, 4]");
  BOOST_TEST(t.out(OpId::index_select, {x, t.in(D::i32, {0})}, {int64_t{2}}) == "f32[2, 3, 0]");
  BOOST_TEST(t.out(OpId::gather, {x, t.in(D::i64, {2, 7, 4})}, {int64_t{1}}) == "f32[2, 7, 4]");
  BOOST_TEST(t.out(OpId::gather, {x, t.in(D::i32, {1, 2, 9})}, {int64_t{2}}) == "f32[1, 2, 9]");
}

BOOST_AUTO_TEST_CASE(flatten) {
  G t;
  const NodeId x = t.in(D::bf16, {2, 3, 4, 5});
  BOOST_TEST(t.out(OpId::flatten, {x}, {int64_t{0}, int64_t{3}}) == "bf16[120]");
  BOOST_TEST(t.out(OpId::flatten, {x}, {int64_t{1}, int64_t{2}}) == "bf16[2, 12, 5]");
  BOOST_TEST(t.out(OpId::flatten, {x}, {int64_t{3}, int64_t{3}}) == "bf16[2, 3, 4, 5]");
  BOOST_TEST(t.out(OpId::flatten, {t.in(D::f32, {})}, {int64_t{0}, int64_t{0}}) == "f32[1]");
}

BOOST_AUTO_TEST_CASE(softmax_family) {
  G t;
  const NodeId i = t.in(D::i32, {2, 5});
  const NodeId h = t.in(D::f16, {2, 5});
  for (OpId op : {OpId::softmax, OpId::log_softmax}) {
    BOOST_TEST(t.out(op, {i}, {int64_t{1}}) == "f32[2, 5]", op_name(op));
    BOOST_TEST(t.out(op, {h}, {int64_t{0}}) == "f16[2, 5]", op_name(op));
  }
  BOOST_TEST(t.out(OpId::logsumexp, {h}, {dims({1}), false}) == "f16[2]");
  BOOST_TEST(t.out(OpId::logsumexp, {i}, {dims({1}), true}) == "f32[2, 1]");
}

BOOST_AUTO_TEST_CASE(norms) {
  G t;
  const NodeId x = t.in(D::f16, {2, 3, 4});
  const NodeId w = t.in(D::f16, {3, 4});
  const NodeId b = t.in(D::f16, {3, 4});
  BOOST_TEST(t.out(OpId::layer_norm, {x}, {int64_t{1}, 1e-5}) == "f16[2, 3, 4]");
  BOOST_TEST(t.out(OpId::layer_norm, {x, w, b}, {int64_t{2}, 1e-5}) == "f16[2, 3, 4]");
  BOOST_TEST(t.out(OpId::layer_norm, {x, t.in(D::f32, {4})}, {int64_t{1}, 1e-5}) == "f32[2, 3, 4]");
  BOOST_TEST(t.out(OpId::layer_norm, {t.in(D::i32, {3})}, {int64_t{1}, 1e-5}) == "f32[3]");
  BOOST_TEST(t.out(OpId::rms_norm, {x, t.in(D::f16, {4})}, {int64_t{1}, 1e-6}) == "f16[2, 3, 4]");
  BOOST_TEST(t.out(OpId::rms_norm, {x}, {int64_t{3}, 1e-6}) == "f16[2, 3, 4]");
}

BOOST_AUTO_TEST_CASE(linear) {
  G t;
  const NodeId w = t.in(D::f32, {5, 3});
  const NodeId b = t.in(D::f32, {5});
  BOOST_TEST(t.out(OpId::linear, {t.in(D::f32, {2, 7, 3}), w}) == "f32[2, 7, 5]");
  BOOST_TEST(t.out(OpId::linear, {t.in(D::f32, {4, 3}), w, b}) == "f32[4, 5]");
  BOOST_TEST(t.out(OpId::linear, {t.in(D::f32, {3}), w, b}) == "f32[5]");
  BOOST_TEST(t.out(OpId::linear, {t.in(D::f16, {4, 3}), t.in(D::f16, {5, 3})}) == "f16[4, 5]");
}

BOOST_AUTO_TEST_CASE(matmul_follows_numpy) {
  G t;
  auto mm = [&](SymShape a, SymShape b, D da = D::f32, D db = D::f32) {
    return t.out(OpId::matmul, {t.in(da, std::move(a)), t.in(db, std::move(b))});
  };
  BOOST_TEST(mm({2, 3}, {3, 4}) == "f32[2, 4]");
  BOOST_TEST(mm({3}, {3}) == "f32[]");
  BOOST_TEST(mm({2, 3}, {3}) == "f32[2]");
  BOOST_TEST(mm({3}, {3, 4}) == "f32[4]");
  BOOST_TEST(mm({3}, {5, 3, 4}) == "f32[5, 4]");
  BOOST_TEST(mm({5, 2, 3}, {3}) == "f32[5, 2]");
  BOOST_TEST(mm({5, 2, 3}, {3, 4}) == "f32[5, 2, 4]");
  BOOST_TEST(mm({7, 1, 2, 3}, {6, 3, 4}) == "f32[7, 6, 2, 4]");
  BOOST_TEST(mm({2, 0}, {0, 4}) == "f32[2, 4]");
  BOOST_TEST(mm({2, 3}, {3, 4}, D::i32, D::f16) == "f16[2, 4]");
  BOOST_TEST(mm({2, 3}, {3, 4}, D::i32, D::i64) == "i64[2, 4]");
}

BOOST_AUTO_TEST_CASE(devices) {
  G t;
  const Device gpu = Device::cuda(1);
  const NodeId x = t.in(D::f32, {2, 3}, gpu);
  BOOST_TEST(t.out(OpId::exp, {x}) == "f32[2, 3] @cuda:1");
  BOOST_TEST(t.out(OpId::add, {x, t.in(D::f32, {3}, gpu)}) == "f32[2, 3] @cuda:1");
  // A 0-d CPU tensor (a scalar) may join tensors on any device, as in torch.
  BOOST_TEST(t.out(OpId::mul, {x, t.in(D::f32, {})}) == "f32[2, 3] @cuda:1");
  BOOST_TEST(t.out(OpId::mul, {t.in(D::f32, {}), t.in(D::f32, {})}) == "f32[]");
  BOOST_TEST(t.out(OpId::sum, {x}, {dims({}), false}) == "f32[] @cuda:1");
  BOOST_TEST(t.out(OpId::full, {}, {SymShape{2}, 0.0, D::f32}) == "f32[2]");
}

BOOST_AUTO_TEST_SUITE_END()
