// interpolate against torch.nn.functional.interpolate's outputs for the same inputs (values
// torch gives, worked through by hand here: the half-pixel and align_corners coordinates, the
// clamp at the edges, torch's cubic coefficients), compiled against eager, and the errors.
#include "helpers.h"

using namespace kiln;
using namespace frontend_test;

namespace {
Tensor square() { return from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2}); }
}  // namespace

BOOST_AUTO_TEST_SUITE(interpolate_op)

BOOST_AUTO_TEST_CASE(torch_values) {
  // bilinear, scale 2, align_corners false: torch's
  check_values(interpolate(square(), {.scale_factor = {2}, .mode = "bilinear"}),
               {1.0, 1.25, 1.75, 2.0, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3.0, 3.25, 3.75, 4.0});
  // align_corners: the corners stay.
  check_values(interpolate(square(), {.size = {3}, .mode = "bilinear", .align_corners = true}),
               {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4});
  check_values(interpolate(square(), {.scale_factor = {2}}),
               {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
  // bicubic (a = -0.75, edge-clamped taps): torch's 0.6836, 1.0156, 1.5625, 1.8945, ...
  check_values(interpolate(square(), {.scale_factor = {2}, .mode = "bicubic"}),
               {0.68359375, 1.015625, 1.5625, 1.89453125, 1.34765625, 1.6796875, 2.2265625, 2.55859375,
                2.44140625, 2.7734375, 3.3203125, 3.65234375, 3.10546875, 3.4375, 3.984375, 4.31640625},
               1e-6);
  // 1-D: nearest picks floor(o * 5/3), nearest-exact floor((o + 0.5) * 5/3); linear clamps at 0.
  const Tensor five = from_vector<float>({0, 1, 2, 3, 4}, {1, 1, 5});
  check_values(interpolate(five, {.size = {3}}), {0, 1, 3});
  check_values(interpolate(five, {.size = {3}, .mode = "nearest-exact"}), {0, 2, 4});
  check_values(interpolate(from_vector<float>({0, 10}, {1, 1, 2}), {.scale_factor = {2}, .mode = "linear"}),
               {0, 2.5, 7.5, 10});
  // A scale factor's coordinates use the scale as given: 1.5 over 3 gives 4 outputs at
  // (o + 0.5) / 1.5 - 0.5 = -0.17 (0), 0.5, 1.17, 1.83.
  check_values(interpolate(from_vector<float>({0, 3, 6}, {1, 1, 3}), {.scale_factor = {1.5}, .mode = "linear"}),
               {0, 1.5, 3.5, 5.5}, 1e-5);
  // Nearest keeps an integer dtype; channels and batch are carried along.
  const Tensor ints = from_vector<int64_t>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  const Tensor up = interpolate(ints, {.size = {4}});
  BOOST_TEST(up.dtype() == DType::i64);
  check_values(up, {1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8});
  // trilinear over 3 spatial dims: a constant stays constant, the shape is right.
  const Tensor cube = interpolate(full({1, 2, 2, 3, 2}, 1.5), {.size = {3, 4, 5}, .mode = "trilinear"});
  BOOST_TEST(sizes_of(cube) == (Sizes{1, 2, 3, 4, 5}));
  check_values(sum(cube), {1.5 * 120});
}

BOOST_AUTO_TEST_CASE(compiled_like_eager) {
  auto f = kiln::compile([](const Tensor& x) {
    return interpolate(x, {.scale_factor = {2}, .mode = "bilinear"}) +
           interpolate(x, {.size = {6, 6}, .mode = "bicubic", .align_corners = true});
  });
  const Tensor x = reshape(arange(0, 18, 1, DType::f32) * 0.5, {1, 2, 3, 3});
  const Tensor eager = interpolate(x, {.scale_factor = {2}, .mode = "bilinear"}) +
                       interpolate(x, {.size = {6, 6}, .mode = "bicubic", .align_corners = true});
  const Tensor got = f(x);
  BOOST_TEST(sizes_of(got) == (Sizes{1, 2, 6, 6}));
  check_values(got, eager.to_vector<double>(), 1e-5);
}

BOOST_AUTO_TEST_CASE(errors_say_what) {
  const Tensor x = square();
  BOOST_TEST(contains(error_of([&] { interpolate(x, {.size = {3}, .mode = "area"}); }), "mode 'area' is not one of"));
  BOOST_TEST(contains(error_of([&] { interpolate(x, {.size = {3}, .mode = "linear"}); }), "needs 1 spatial dims, x has 2"));
  BOOST_TEST(contains(error_of([&] { interpolate(x, {}); }), "exactly one of size and scale_factor"));
  BOOST_TEST(contains(error_of([&] { interpolate(x, {.size = {1, 2, 3}}); }), "size has 3 values, expected 1 or 2"));
  BOOST_TEST(contains(error_of([&] { interpolate(x, {.size = {3}, .align_corners = true}); }),
                      "align_corners is only for"));
  BOOST_TEST(contains(error_of([&] { interpolate(from_vector<float>({1, 2}), {.size = {3}}); }), "got rank 1"));
}

BOOST_AUTO_TEST_SUITE_END()
