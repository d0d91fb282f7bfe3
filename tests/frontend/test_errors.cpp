// Bad input through the Tensor API gives a kiln::Error whose sentence names the op and what
// was wrong; never a crash.
#include "helpers.h"

using namespace kiln;
using namespace frontend_test;

BOOST_AUTO_TEST_SUITE(errors)

BOOST_AUTO_TEST_CASE(shapes_that_do_not_broadcast_name_the_op) {
  struct Case {
    const char* op;
    std::function<void()> fn;
  };
  const Tensor a = zeros({3});
  const Tensor b = zeros({4});
  const std::vector<Case> cases{
      {"add", [&] { add(a, b); }},
      {"sub", [&] { (void)(a - b); }},
      {"mul", [&] { (void)(a * b); }},
      {"div", [&] { (void)(a / b); }},
      {"maximum", [&] { maximum(a, b); }},
      {"eq", [&] { (void)(a == b); }},
      {"logical_and", [&] { logical_and(a, b); }},
      {"where", [&] { where(a > 0, a, b); }},
      {"matmul", [&] { matmul(zeros({2, 3}), zeros({2, 3})); }},
      {"matmul", [&] { matmul(zeros({2, 2, 3}), zeros({3, 3, 1})); }},
      {"cat", [&] { cat({zeros({2, 3}), zeros({2, 4})}, 0); }},
  };
  for (const Case& c : cases) {
    const std::string msg = error_of(c.fn);
    BOOST_TEST(contains(msg, c.op), c.op << ": " << msg);
  }
  const std::string msg = error_of([&] { add(zeros({2, 3}), zeros({3, 2})); });
  BOOST_TEST(contains(msg, "[2, 3]"), msg);
  BOOST_TEST(contains(msg, "[3, 2]"), msg);
}

// The message also says where: the line of this file that called the op, eager and in a
// compiled function alike (the tracing call site), and through kiln::nn's code to its caller.
BOOST_AUTO_TEST_CASE(errors_name_the_calling_line) {
  const std::string here = std::string("/") + __FILE__ + ":";  // __FILE__ is relative here (-fmacro-prefix-map)
  auto called_at = [&](const std::string& msg, int line) {
    return contains(msg, " (called at ") && contains(msg, here + std::to_string(line) + ")");
  };
  const Tensor x = zeros({2, 3});
  std::string msg = error_of([&] { matmul(x, x); }); const int eager_line = __LINE__;
  BOOST_TEST(called_at(msg, eager_line), msg);
  BOOST_TEST(contains(msg, "matmul"), msg);
  auto f = kiln::compile([](const Tensor& a) { return reshape(a, {4}); }); const int traced_line = __LINE__;
  msg = error_of([&] { f(x); });
  BOOST_TEST(called_at(msg, traced_line), msg);
  BOOST_TEST(contains(msg, "reshape"), msg);
  nn::Init init(1);
  const nn::Linear layer = nn::Linear::make(4, 2, init);
  msg = error_of([&] { layer(x); }); const int module_line = __LINE__;
  BOOST_TEST(called_at(msg, module_line), msg);
  // One location, however many ops the failing one sat inside.
  BOOST_TEST(msg.find(" (called at ") == msg.rfind(" (called at "), msg);
}

BOOST_AUTO_TEST_CASE(undefined_tensors) {
  const Tensor u;
  BOOST_TEST(!u.defined());
  std::string msg = error_of([&] { exp(u); });
  BOOST_TEST(contains(msg, "exp"), msg);
  BOOST_TEST(contains(msg, "undefined"), msg);
  msg = error_of([&] { add(ones({2}), u); });
  BOOST_TEST(contains(msg, "add"), msg);
  BOOST_TEST(contains(msg, "undefined"), msg);
  msg = error_of([&] { (void)(u + 1); });
  BOOST_TEST(contains(msg, "undefined"), msg);
  msg = error_of([&] { (void)(1 - u); });
  BOOST_TEST(contains(msg, "undefined"), msg);
  BOOST_TEST(contains(error_of([&] { (void)u.shape(); }), "undefined"));
  BOOST_TEST(contains(error_of([&] { (void)u.rank(); }), "undefined"));
  BOOST_TEST(contains(error_of([&] { (void)u.dtype(); }), "undefined"));
  BOOST_TEST(contains(error_of([&] { (void)u.item<float>(); }), "undefined"));
  BOOST_TEST(contains(error_of([&] { (void)u.to_vector<float>(); }), "undefined"));
  BOOST_TEST(contains(error_of([&] { (void)u.to(DType::f64); }), "undefined"));
  BOOST_TEST(contains(error_of([&] { (void)u.to(Device::cpu()); }), "undefined"));
  BOOST_TEST(contains(error_of([&] { (void)u.contiguous(); }), "undefined"));
  BOOST_TEST(contains(error_of([&] { (void)static_cast<bool>(u); }), "undefined"));
  BOOST_TEST(contains(error_of([&] { reshape(u, {1}); }), "undefined"));
  BOOST_TEST(contains(error_of([&] { cat({ones({1}), u}); }), "undefined"));
  BOOST_TEST(contains(error_of([&] { matmul(u, u); }), "undefined"));
}

BOOST_AUTO_TEST_CASE(item_and_bool_need_one_element) {
  const Tensor x = f32({1, 2, 3});
  std::string msg = error_of([&] { (void)x.item<float>(); });
  BOOST_TEST(contains(msg, "item()"), msg);
  BOOST_TEST(contains(msg, "3 elements"), msg);
  msg = error_of([&] { (void)zeros({0}).item<int64_t>(); });
  BOOST_TEST(contains(msg, "0 elements"), msg);
  msg = error_of([&] { (void)static_cast<bool>(x > 0); });
  BOOST_TEST(contains(msg, "ambiguous"), msg);
}

BOOST_AUTO_TEST_CASE(bad_dims_and_shapes) {
  const Tensor x = zeros({2, 3});
  std::string msg = error_of([&] { softmax(x, 2); });
  BOOST_TEST(contains(msg, "softmax"), msg);
  msg = error_of([&] { sum(x, {0, 0}); });
  BOOST_TEST(contains(msg, "sum"), msg);
  msg = error_of([&] { sum(x, {5}); });
  BOOST_TEST(contains(msg, "sum"), msg);
  msg = error_of([&] { reshape(x, {4}); });
  BOOST_TEST(contains(msg, "reshape"), msg);
  msg = error_of([&] { reshape(x, {-1, -1}); });
  BOOST_TEST(contains(msg, "reshape"), msg);
  msg = error_of([&] { reshape(x, {-1, 4}); });
  BOOST_TEST(contains(msg, "reshape"), msg);
  msg = error_of([&] { permute(x, {0, 0}); });
  BOOST_TEST(contains(msg, "permute"), msg);
  msg = error_of([&] { transpose(x, 0, 2); });
  BOOST_TEST(contains(msg, "transpose"), msg);
  msg = error_of([&] { squeeze(x, 0); });
  BOOST_TEST(contains(msg, "squeeze"), msg);
  msg = error_of([&] { unsqueeze(x, 4); });
  BOOST_TEST(contains(msg, "unsqueeze"), msg);
  msg = error_of([&] { expand(x, {3, 3}); });
  BOOST_TEST(contains(msg, "expand"), msg);
  msg = error_of([&] { expand(x, {3}); });
  BOOST_TEST(contains(msg, "expand"), msg);
  msg = error_of([&] { slice(x, 0, 0, 2, 0); });
  BOOST_TEST(contains(msg, "slice"), msg);
  msg = error_of([&] { cat({}); });
  BOOST_TEST(contains(msg, "cat"), msg);
  msg = error_of([&] { cat({zeros({2}), zeros({2, 1})}); });
  BOOST_TEST(contains(msg, "cat"), msg);
  msg = error_of([&] { pad(x, {1}); });
  BOOST_TEST(contains(msg, "pad"), msg);
  msg = error_of([&] { index_select(x, 0, from_vector<int64_t>({2})); });
  BOOST_TEST(contains(msg, "index_select"), msg);
  msg = error_of([&] { index_select(x, 0, f32({0})); });
  BOOST_TEST(contains(msg, "index_select"), msg);
  msg = error_of([&] { gather(x, 0, reshape(from_vector<int64_t>({5}), {1, 1})); });
  BOOST_TEST((contains(msg, "gather: index 5") && contains(msg, "out of range")), msg);
  msg = error_of([&] { gather(x, 0, from_vector<int64_t>({0})); });
  BOOST_TEST(contains(msg, "gather: index [1] must have the rank of x [2, 3]"), msg);
  msg = error_of([&] { take_along_dim(zeros({2, 3}), zeros({3, 1}, DType::i64), 1); });
  BOOST_TEST((contains(msg, "take_along_dim") && contains(msg, "do not broadcast at dim 0")), msg);
  msg = error_of([&] { layer_norm(x, {2}); });
  BOOST_TEST(contains(msg, "layer_norm"), msg);
  msg = error_of([&] { rms_norm(x, {3}, ones({4})); });
  BOOST_TEST(contains(msg, "rms_norm"), msg);
  msg = error_of([&] { linear(x, zeros({4, 2})); });
  BOOST_TEST(contains(msg, "linear"), msg);
  msg = error_of([&] { argmax(x, 2); });
  BOOST_TEST(contains(msg, "argmax"), msg);
  msg = error_of([&] { full({-1}, 0.0); });
  BOOST_TEST(contains(msg, "full"), msg);
}

BOOST_AUTO_TEST_CASE(bad_dtypes) {
  std::string msg = error_of([&] { where(f32({1}), f32({1}), f32({2})); });
  BOOST_TEST(contains(msg, "where"), msg);
  BOOST_TEST(contains(msg, "bool"), msg);
  msg = error_of([&] { sub(from_vector<bool>({true}), from_vector<bool>({false})); });
  BOOST_TEST(contains(msg, "sub"), msg);
  msg = error_of([&] { gelu(f32({1}), "fast"); });
  BOOST_TEST(contains(msg, "gelu"), msg);
}

BOOST_AUTO_TEST_CASE(from_vector_size_mismatch) {
  const std::string msg = error_of([&] { from_vector<float>({1, 2, 3}, {2, 2}); });
  BOOST_TEST(contains(msg, "from_vector"), msg);
  BOOST_TEST(contains(msg, "[2, 2]"), msg);
}

BOOST_AUTO_TEST_SUITE_END()
