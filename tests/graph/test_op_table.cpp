// The op table itself: order, names, arities, attribute specs, composites; and Attrs.
#include <limits>
#include <set>

#include "helpers.h"

using namespace kiln;

BOOST_AUTO_TEST_SUITE(op_table)

BOOST_AUTO_TEST_CASE(table_order_matches_enum) {
  const auto ops = all_ops();
  BOOST_TEST(ops.size() == static_cast<size_t>(kNumOps));
  for (size_t i = 0; i < ops.size(); ++i) {
    BOOST_TEST(static_cast<size_t>(ops[i].id) == i);
    BOOST_TEST(&op_def(static_cast<OpId>(i)) == &ops[i]);
    BOOST_TEST((ops[i].infer != nullptr));
  }
}

BOOST_AUTO_TEST_CASE(find_op_round_trips_every_name) {
  std::set<std::string_view> names;
  for (const OpDef& d : all_ops()) {
    BOOST_TEST(!d.name.empty());
    BOOST_TEST(names.insert(d.name).second, "duplicate op name " << d.name);
    const auto found = find_op(d.name);
    BOOST_REQUIRE(found.has_value());
    BOOST_TEST(static_cast<int>(*found) == static_cast<int>(d.id));
    BOOST_TEST(op_name(d.id) == d.name);
  }
  BOOST_TEST(!find_op("softmaxx").has_value());
  BOOST_TEST(!find_op("").has_value());
  BOOST_TEST(!find_op("Add").has_value());
}

BOOST_AUTO_TEST_CASE(names_are_the_enum_names) {
  BOOST_TEST(op_name(OpId::add) == "add");
  BOOST_TEST(op_name(OpId::log_softmax) == "log_softmax");
  BOOST_TEST(op_name(OpId::index_select) == "index_select");
  BOOST_TEST(op_name(OpId::logical_not) == "logical_not");
  BOOST_TEST(op_name(OpId::input) == "input");
  BOOST_TEST(op_name(OpId::matmul) == "matmul");
  BOOST_TEST(op_name(OpId::rms_norm) == "rms_norm");
}

BOOST_AUTO_TEST_CASE(composites_have_decompositions) {
  const std::set<OpId> composites = {OpId::transpose, OpId::flatten,    OpId::softmax, OpId::log_softmax,
                                     OpId::layer_norm, OpId::rms_norm, OpId::linear,  OpId::logsumexp, OpId::scaled_dot_product_attention,
                                     OpId::convolution, OpId::convolution_channels_last, OpId::convolution_input_grad,
                                     OpId::convolution_weight_grad, OpId::max_pool, OpId::avg_pool, OpId::batch_norm,
                                     OpId::group_norm, OpId::cumsum, OpId::cumprod, OpId::tril, OpId::triu,
                                     OpId::sort, OpId::argsort,
                                     OpId::randn, OpId::rand};  // random sources made of philox
  for (const OpDef& d : all_ops())
    BOOST_TEST((d.decompose != nullptr) == composites.contains(d.id), d.name);
  for (OpId op : {OpId::softmax, OpId::log_softmax, OpId::layer_norm, OpId::rms_norm, OpId::linear})
    BOOST_TEST((op_def(op).category == OpCategory::composite), op_name(op));
}

BOOST_AUTO_TEST_CASE(categories_and_arity) {
  BOOST_TEST((op_def(OpId::full).category == OpCategory::source));
  BOOST_TEST((op_def(OpId::exp).category == OpCategory::unary));
  BOOST_TEST((op_def(OpId::pow).category == OpCategory::binary));
  BOOST_TEST((op_def(OpId::where).category == OpCategory::ternary));
  BOOST_TEST((op_def(OpId::argmax).category == OpCategory::reduction));
  BOOST_TEST((op_def(OpId::slice).category == OpCategory::layout));
  BOOST_TEST((op_def(OpId::matmul).category == OpCategory::matmul));
  BOOST_TEST(op_def(OpId::arange).min_inputs == 0);
  BOOST_TEST(op_def(OpId::arange).max_inputs == 0);
  BOOST_TEST(op_def(OpId::where).min_inputs == 3);
  BOOST_TEST(op_def(OpId::cat).min_inputs == 1);
  BOOST_TEST(op_def(OpId::cat).max_inputs == -1);
  BOOST_TEST(op_def(OpId::index_select).max_inputs == 2);
  BOOST_TEST(op_def(OpId::layer_norm).min_inputs == 1);
  BOOST_TEST(op_def(OpId::layer_norm).max_inputs == 3);
  BOOST_TEST(op_def(OpId::rms_norm).max_inputs == 2);
  BOOST_TEST(op_def(OpId::linear).min_inputs == 2);
  BOOST_TEST(op_def(OpId::linear).max_inputs == 3);
}

// Names and kinds as the comments in ops.h give them.
BOOST_AUTO_TEST_CASE(attribute_specs) {
  auto spec = [](OpId op) {
    std::string s;
    for (const AttrSpec& a : op_def(op).attrs) s += std::string(a.name) + ":" + std::string(attr_kind_name(a.kind)) + " ";
    return s;
  };
  BOOST_TEST(spec(OpId::input) == "index:int ");
  BOOST_TEST(spec(OpId::constant) == "value:tensor ");
  BOOST_TEST(spec(OpId::full) == "shape:symints value:float dtype:dtype ");
  BOOST_TEST(spec(OpId::arange) == "start:float end:float step:float dtype:dtype ");
  BOOST_TEST(spec(OpId::randn) == "shape:symints seed:int dtype:dtype ");
  BOOST_TEST(spec(OpId::exp) == "");
  BOOST_TEST(spec(OpId::gelu) == "approximate:string ");
  BOOST_TEST(spec(OpId::cast) == "dtype:dtype ");
  BOOST_TEST(spec(OpId::add) == "");
  BOOST_TEST(spec(OpId::where) == "");
  for (OpId op : {OpId::sum, OpId::mean, OpId::max, OpId::min, OpId::prod, OpId::argmax, OpId::argmin, OpId::logsumexp})
    BOOST_TEST(spec(op) == "dims:ints keepdim:bool ", op_name(op));
  BOOST_TEST(spec(OpId::var) == "dims:ints keepdim:bool correction:int ");
  BOOST_TEST(spec(OpId::reshape) == "shape:symints ");
  BOOST_TEST(spec(OpId::permute) == "dims:ints ");
  BOOST_TEST(spec(OpId::transpose) == "dim0:int dim1:int ");
  BOOST_TEST(spec(OpId::expand) == "shape:symints ");
  BOOST_TEST(spec(OpId::squeeze) == "dims:ints ");
  BOOST_TEST(spec(OpId::unsqueeze) == "dim:int ");
  BOOST_TEST(spec(OpId::slice) == "dim:int start:int end:int step:int ");
  BOOST_TEST(spec(OpId::cat) == "dim:int ");
  BOOST_TEST(spec(OpId::pad) == "pads:ints value:float ");
  BOOST_TEST(spec(OpId::index_select) == "dim:int ");
  BOOST_TEST(spec(OpId::flatten) == "start_dim:int end_dim:int ");
  BOOST_TEST(spec(OpId::softmax) == "dim:int ");
  BOOST_TEST(spec(OpId::log_softmax) == "dim:int ");
  BOOST_TEST(spec(OpId::layer_norm) == "normalized_ndim:int eps:float ");
  BOOST_TEST(spec(OpId::rms_norm) == "normalized_ndim:int eps:float ");
  BOOST_TEST(spec(OpId::linear) == "");
  BOOST_TEST(spec(OpId::matmul) == "");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(attrs)

BOOST_AUTO_TEST_CASE(kinds_and_names) {
  BOOST_TEST(attr_kind_name(AttrKind::int_) == "int");
  BOOST_TEST(attr_kind_name(AttrKind::float_) == "float");
  BOOST_TEST(attr_kind_name(AttrKind::bool_) == "bool");
  BOOST_TEST(attr_kind_name(AttrKind::ints) == "ints");
  BOOST_TEST(attr_kind_name(AttrKind::symints) == "symints");
  BOOST_TEST(attr_kind_name(AttrKind::dtype) == "dtype");
  BOOST_TEST(attr_kind_name(AttrKind::string) == "string");
  BOOST_TEST(attr_kind_name(AttrKind::tensor) == "tensor");
  BOOST_TEST((attr_kind_of(int64_t{3}) == AttrKind::int_));
  BOOST_TEST((attr_kind_of(0.5) == AttrKind::float_));
  BOOST_TEST((attr_kind_of(true) == AttrKind::bool_));
  BOOST_TEST((attr_kind_of(std::vector<int64_t>{1}) == AttrKind::ints));
  BOOST_TEST((attr_kind_of(SymShape{2, 3}) == AttrKind::symints));
  BOOST_TEST((attr_kind_of(DType::f16) == AttrKind::dtype));
  BOOST_TEST((attr_kind_of(std::string("tanh")) == AttrKind::string));
  BOOST_TEST((attr_kind_of(std::make_shared<const ConstantData>()) == AttrKind::tensor));
}

BOOST_AUTO_TEST_CASE(typed_access) {
  auto c = std::make_shared<const ConstantData>(ConstantData{DType::i32, {2}, std::vector<std::byte>(8)});
  const Attrs a{int64_t{7}, 1.5, true, std::vector<int64_t>{1, 2}, SymShape{4}, DType::bf16, std::string("none"), c};
  BOOST_TEST(a.size() == 8u);
  BOOST_TEST(a.i(0) == 7);
  BOOST_TEST(a.f(1) == 1.5);
  BOOST_TEST(a.b(2));
  BOOST_TEST(a.ints(3) == std::vector<int64_t>({1, 2}));
  BOOST_TEST(a.symints(4).size() == 1u);
  BOOST_TEST((a.symints(4)[0] == 4));
  BOOST_TEST((a.dtype(5) == DType::bf16));
  BOOST_TEST(a.s(6) == "none");
  BOOST_TEST(a.tensor(7).sizes == std::vector<int64_t>({2}));
}

BOOST_AUTO_TEST_CASE(misuse_throws) {
  const Attrs a{int64_t{7}, 1.5};
  CHECK_KILN_ERROR(a.f(0), "attribute 0", "int", "float");
  CHECK_KILN_ERROR(a.i(1), "attribute 1", "float", "int");
  CHECK_KILN_ERROR(a.i(2), "attribute 2", "missing");
  CHECK_KILN_ERROR(a.ints(0), "ints");
  CHECK_KILN_ERROR(a.s(0), "string");
  const Attrs null_tensor{std::shared_ptr<const ConstantData>()};
  CHECK_KILN_ERROR(null_tensor.tensor(0), "attribute 0");
}

BOOST_AUTO_TEST_CASE(equality_compares_tensors_by_value) {
  auto c1 = std::make_shared<const ConstantData>(ConstantData{DType::f32, {1}, std::vector<std::byte>(4)});
  auto c2 = std::make_shared<const ConstantData>(ConstantData{DType::f32, {1}, std::vector<std::byte>(4)});
  auto c3 = std::make_shared<const ConstantData>(ConstantData{DType::f32, {1}, std::vector<std::byte>(4, std::byte{1})});
  BOOST_TEST((Attrs{c1} == Attrs{c2}));
  BOOST_TEST(!(Attrs{c1} == Attrs{c3}));
  BOOST_TEST(!(Attrs{c1} == Attrs{std::shared_ptr<const ConstantData>()}));
  BOOST_TEST((Attrs{int64_t{1}, SymShape{2, 3}} == Attrs{int64_t{1}, SymShape{2, 3}}));
  BOOST_TEST(!(Attrs{int64_t{1}} == Attrs{1.0}));  // same number, different kind
  BOOST_TEST(!(Attrs{int64_t{1}} == Attrs{int64_t{1}, int64_t{2}}));
  BOOST_TEST(!(Attrs{std::vector<int64_t>{1}} == Attrs{std::vector<int64_t>{2}}));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  BOOST_TEST((Attrs{nan} == Attrs{nan}));  // a graph holding NaN still equals itself
  BOOST_TEST((Attrs{} == Attrs{}));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(attrs_equality_and_hash_agree) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const kiln::Attrs zero{kiln::SymShape{}, 0.0, kiln::DType::f32};
  const kiln::Attrs minus_zero{kiln::SymShape{}, -0.0, kiln::DType::f32};
  const kiln::Attrs nan_a{kiln::SymShape{}, nan, kiln::DType::f32};
  const kiln::Attrs nan_b{kiln::SymShape{}, -nan, kiln::DType::f32};
  BOOST_TEST(!(zero == minus_zero));  // x + -0.0 keeps -0.0: not the same value
  BOOST_TEST((nan_a == nan_b));
  BOOST_TEST(nan_a.hash() == nan_b.hash());
  BOOST_TEST((zero == kiln::Attrs{kiln::SymShape{}, 0.0, kiln::DType::f32}));
  BOOST_TEST(zero.hash() == kiln::Attrs({kiln::SymShape{}, 0.0, kiln::DType::f32}).hash());
  BOOST_TEST(zero.hash() != minus_zero.hash());
}
