// kiln::autocast (kiln/capture/autocast.h): each op's rule in eager calls (the matmul family in
// the low type, reductions and norms in f32, the rest on promoted types), scopes that nest and
// lift, the bad dtype, and compiled functions: the casts are traced, the entry is guarded on the
// autocast state, and a call under another state recompiles with that as its reason.
#include "helpers.h"

using namespace kiln;
using namespace frontend_test;

namespace {

// ||a - b|| / ||b|| over the values as doubles.
double relative_l2(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  BOOST_REQUIRE_EQUAL(x.size(), y.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) num += (x[i] - y[i]) * (x[i] - y[i]), den += y[i] * y[i];
  return std::sqrt(num / den);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(autocast_scopes)

BOOST_AUTO_TEST_CASE(each_op_takes_the_type_its_rule_gives) {
  const Tensor a = randn({8, 32}, DType::f32, Device::cpu(), 1), b = randn({32, 16}, DType::f32, Device::cpu(), 2);
  const Tensor full = matmul(a, b);
  BOOST_TEST(full.dtype() == DType::f32);
  const autocast scope(DType::bf16);
  BOOST_TEST((autocast_dtype() == std::optional<DType>(DType::bf16)));
  // The matmul family: f32 in, bf16 out, the product of the rounded operands.
  const Tensor low = matmul(a, b);
  BOOST_TEST(low.dtype() == DType::bf16);
  BOOST_TEST(relative_l2(low, matmul(cast(a, DType::bf16), cast(b, DType::bf16))) == 0.0);
  BOOST_TEST(relative_l2(low, full) < 2e-2);
  BOOST_TEST(relative_l2(low, full) > 0.0);  // it did compute in bf16
  BOOST_TEST(linear(a, cast(b, DType::f32).transpose(0, 1)).dtype() == DType::bf16);
  // Reductions and norms: bf16 in, f32 out.
  BOOST_TEST(softmax(low, -1).dtype() == DType::f32);
  BOOST_TEST(sum(low, {1}).dtype() == DType::f32);
  BOOST_TEST(layer_norm(low, {16}).dtype() == DType::f32);
  BOOST_TEST(exp(low).dtype() == DType::f32);
  // batch_norm: computed with its f32 statistics, the activation's type back.
  const Tensor images = cast(randn({2, 3, 4, 4}, DType::f32, Device::cpu(), 8), DType::bf16);
  const Tensor bn = batch_norm(images, zeros({3}), kiln::full({3}, 2.0), ones({3}), zeros({3}));
  BOOST_TEST(bn.dtype() == DType::bf16);
  {
    const autocast off(DType::bf16, false);
    BOOST_TEST(relative_l2(bn, cast(batch_norm(images, zeros({3}), kiln::full({3}, 2.0), ones({3}), zeros({3})), DType::bf16)) ==
               0.0);
  }
  // Other ops: their inputs' promoted type (mean accumulates in f32 and gives bf16, as torch's).
  BOOST_TEST(mean(low, {1}).dtype() == DType::bf16);
  BOOST_TEST(relu(low).dtype() == DType::bf16);
  BOOST_TEST((low + matmul(a, b).to(DType::f32)).dtype() == DType::f32);
  // Integers and f64 are never cast.
  const Tensor ints = arange(6, DType::i64).reshape({2, 3});
  BOOST_TEST(matmul(ints, ints.transpose(0, 1)).dtype() == DType::i64);
  BOOST_TEST(matmul(a.to(DType::f64), b.to(DType::f64)).dtype() == DType::f64);
}

BOOST_AUTO_TEST_CASE(scopes_nest_lift_and_restore) {
  const Tensor a = randn({4, 4}, DType::f32, Device::cpu(), 3);
  BOOST_TEST(!autocast_dtype().has_value());
  {
    const autocast outer(DType::f16);
    BOOST_TEST(matmul(a, a).dtype() == DType::f16);
    {
      const autocast off(DType::f16, false);
      BOOST_TEST(matmul(a, a).dtype() == DType::f32);
      const autocast inner(DType::bf16);
      BOOST_TEST(matmul(a, a).dtype() == DType::bf16);
    }
    BOOST_TEST(matmul(a, a).dtype() == DType::f16);
  }
  BOOST_TEST(!autocast_dtype().has_value());
  BOOST_TEST(matmul(a, a).dtype() == DType::f32);
}

BOOST_AUTO_TEST_CASE(only_a_low_precision_float_type) {
  BOOST_CHECK_EXCEPTION(autocast(DType::f32), Error, [](const Error& e) {
    return std::string(e.what()).find("autocast: the low-precision type is bf16 or f16, not f32") != std::string::npos;
  });
  BOOST_TEST(!autocast_dtype().has_value());
}

BOOST_AUTO_TEST_CASE(compiled_functions_trace_the_casts_and_guard_the_state) {
  // Weights of torch's initial scale (1/sqrt(fan_in)): logits of order 1, where bf16 rounding
  // moves the softmax by about its own relative error.
  const nn::Linear up{randn({64, 32}, DType::f32, Device::cpu(), 4) * 0.18, randn({64}, DType::f32, Device::cpu(), 5) * 0.1};
  const nn::Linear down{randn({32, 64}, DType::f32, Device::cpu(), 6) * 0.125, std::nullopt};
  const nn::LayerNorm norm{{32}, std::nullopt, std::nullopt, 1e-5};
  auto mlp = [&](const Tensor& x) { return softmax(down(gelu(up(norm(x)))), -1); };
  auto f = kiln::compile(mlp);
  const Tensor x = randn({16, 32}, DType::f32, Device::cpu(), 7);
  const Tensor full = mlp(x);

  Tensor eager_low, compiled_low;
  {
    const autocast scope(DType::bf16);
    eager_low = mlp(x);
    compiled_low = f(x);
  }
  BOOST_TEST(compiled_low.dtype() == DType::f32);  // softmax's rule
  BOOST_TEST_MESSAGE("relative L2: compiled vs eager under autocast " << relative_l2(compiled_low, eager_low)
                     << ", compiled under autocast vs f32 " << relative_l2(compiled_low, full)
                     << ", eager under autocast vs f32 " << relative_l2(eager_low, full));
  BOOST_TEST(relative_l2(compiled_low, eager_low) < 1e-2);
  BOOST_TEST(relative_l2(compiled_low, full) < 5e-2);
  BOOST_TEST(relative_l2(compiled_low, full) > 0.0);

  // Without autocast: a recompile that says why; the f32 result.
  const Tensor compiled_full = f(x);
  BOOST_TEST(relative_l2(compiled_full, full) < 1e-5);
  BOOST_TEST(f.stats().recompiles == 1);
  BOOST_REQUIRE(f.stats().recompile_reasons.size() == 1);
  BOOST_TEST(f.stats().recompile_reasons[0].find("autocast changed: traced under autocast(bf16), called without autocast") !=
                 std::string::npos,
             f.stats().recompile_reasons[0]);
  // Back under autocast: the first entry serves it.
  {
    const autocast scope(DType::bf16);
    BOOST_TEST(relative_l2(f(x), compiled_low) == 0.0);
  }
  BOOST_TEST(f.stats().compiles == 2);
}

BOOST_AUTO_TEST_SUITE_END()
