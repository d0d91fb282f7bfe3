// Custom ops (kiln/custom_op.h): registered host kernels and decompositions, eager and compiled,
// their shape rules, versions and errors. The GPU targets run device_frontend_checks.h's
// custom_ops_on on their devices.
#include <algorithm>
#include <cmath>
#include <string>

#include "device_frontend_checks.h"
#include "helpers.h"
#include "kiln/eval/interpreter.h"
#include "kiln/graph/custom_ops.h"

using namespace kiln;
using namespace frontend_test;

namespace {

// Bins of equal width over [lo, hi) given by config "lo hi bins": an i64[bins] count of the
// input's elements (a shape the input does not have; elements outside are not counted).
TensorMeta histogram_shape(std::span<const TensorMeta* const> in, const std::string& config, ShapeEnv&) {
  double lo = 0, hi = 0;
  int64_t bins = 0;
  KILN_CHECK(std::sscanf(config.c_str(), "%lf %lf %ld", &lo, &hi, &bins) == 3 && bins > 0 && hi > lo,
             "config must be \"lo hi bins\" with hi > lo and bins > 0, got \"", config, "\"");
  KILN_CHECK(in[0]->dtype == DType::f32, "x must be f32, got ", dtype_name(in[0]->dtype));
  return TensorMeta{DType::i64, in[0]->device, {SymInt(bins)}, {}};
}

void histogram_kernel(std::span<const Tensor> in, const std::string& config, const Tensor& out) {
  double lo = 0, hi = 0;
  long bins = 0;
  std::sscanf(config.c_str(), "%lf %lf %ld", &lo, &hi, &bins);
  const float* x = in[0].data().data_as<float>();
  int64_t* counts = out.data().data_as<int64_t>();
  for (int64_t i = 0; i < in[0].data().numel(); ++i) {
    const double b = std::floor((x[i] - lo) / (hi - lo) * static_cast<double>(bins));
    if (b >= 0 && b < static_cast<double>(bins)) ++counts[static_cast<int64_t>(b)];
  }
}

void register_histogram(const std::string& version = "1") {
  register_op(CustomOp{.name = "test::histogram", .version = version, .infer = histogram_shape,
                       .compute = histogram_kernel});
}

}  // namespace

BOOST_AUTO_TEST_SUITE(custom_ops)

// The shared device check on the CPU: a running maximum between fused neighbours, compiled
// over two sizes with one compile.
BOOST_AUTO_TEST_CASE(a_host_kernel_between_fused_neighbours) { device_frontend_checks::custom_ops_on(Device::cpu()); }

BOOST_AUTO_TEST_CASE(a_shape_rule_of_its_own_eager_and_compiled) {
  register_histogram();
  const Tensor x = f32({0.1f, 0.4f, 0.45f, 0.9f, -1.0f, 0.99f, 0.5f, 2.0f}, {2, 4});
  check_tensor(custom_op("test::histogram", {x}, "0 1 4"), {4}, DType::i64, {1, 2, 1, 2});
  auto f = kiln::compile([](const Tensor& x) { return custom_op("test::histogram", {x * 0.5f}, "0 0.5 2"); });
  check_tensor(f(x), {2}, DType::i64, {3, 3});
  // Each config is its own node (and kernel); the config reaches the kernel.
  auto g = kiln::compile([](const Tensor& x) {
    return std::vector<Tensor>{custom_op("test::histogram", {x}, "0 1 2"), custom_op("test::histogram", {x}, "0 1 4")};
  });
  const std::vector<Tensor> both = g(x);
  check_tensor(both[0], {2}, DType::i64, {3, 3});
  check_tensor(both[1], {4}, DType::i64, {1, 2, 1, 2});
  const ExplainOutput e = kiln::explain([](const Tensor& x) { return custom_op("test::histogram", {exp(x)}, "0 1 4"); }, x);
  BOOST_TEST(e.graph_break_count == 0);
  BOOST_REQUIRE_EQUAL(e.kernels.size(), 2u);
  BOOST_TEST(contains(e.kernels[1], "reference"), e.kernels[1]);
}

// Several inputs, any number of them, and a config the kernel reads.
BOOST_AUTO_TEST_CASE(any_number_of_inputs) {
  register_op(CustomOp{
      .name = "test::weighted_sum", .min_inputs = 1, .max_inputs = -1,
      .infer = [](std::span<const TensorMeta* const> in, const std::string&, ShapeEnv& shapes) {
        for (const TensorMeta* m : in) {
          KILN_CHECK(m->dtype == DType::f32, "inputs must be f32");
          KILN_CHECK(m->rank() == in[0]->rank(), "inputs must have one shape");
          for (size_t d = 0; d < m->sizes.size(); ++d)
            KILN_CHECK(shapes.decide_equal(m->sizes[d], in[0]->sizes[d], "test::weighted_sum"), "inputs must have one shape");
        }
        return TensorMeta{DType::f32, in[0]->device, in[0]->sizes, {}};
      },
      .compute = [](std::span<const Tensor> in, const std::string& config, const Tensor& out) {
        const double w = std::stod(config);
        float* y = out.data().data_as<float>();
        for (size_t k = 0; k < in.size(); ++k) {
          const float* x = in[k].data().data_as<float>();
          for (int64_t i = 0; i < out.data().numel(); ++i) y[i] += static_cast<float>(std::pow(w, k) * x[i]);
        }
      }});
  const Tensor a = pattern_tensor({3, 5}, 1), b = pattern_tensor({3, 5}, 2), c = pattern_tensor({3, 5}, 3);
  auto f = kiln::compile([](const Tensor& a, const Tensor& b, const Tensor& c) {
    return custom_op("test::weighted_sum", {a, b.transpose(0, 1).transpose(0, 1), c}, "0.5") - a;
  });
  BOOST_TEST(kiln_test_util::max_abs_diff(f(a, b, c), b * 0.5f + c * 0.25f) < 1e-6);
  BOOST_TEST(kiln_test_util::max_abs_diff(custom_op("test::weighted_sum", {a}, "2"), a) == 0.0);
  const std::string bad = error_of([&] { custom_op("test::weighted_sum", {a, ones({2, 5})}, "1"); });
  BOOST_TEST(contains(bad, "test::weighted_sum"), bad);
  BOOST_TEST(contains(bad, "one shape"), bad);
}

// With a decomposition, compiled functions trace it (no opaque node: it fuses and runs where the
// graph runs) and gradients flow through it; eager calls keep the host kernel.
BOOST_AUTO_TEST_CASE(a_decomposition_is_traced_and_differentiated) {
  int kernel_calls = 0;
  register_op(CustomOp{.name = "test::softplus",
                       .compute = [&kernel_calls](std::span<const Tensor> in, const std::string&, const Tensor& out) {
                         ++kernel_calls;
                         const float* x = in[0].data().data_as<float>();
                         float* y = out.data().data_as<float>();
                         for (int64_t i = 0; i < out.data().numel(); ++i) y[i] = std::log1p(std::exp(x[i]));
                       },
                       .decomposition = [](std::span<const Tensor> in, const std::string&) {
                         return log(exp(in[0]) + 1.0f);
                       }});
  const Tensor x = pattern_tensor({4, 6}, 5);
  const Tensor eager = custom_op("test::softplus", {x});
  BOOST_TEST(kernel_calls == 1);
  auto f = kiln::compile([](const Tensor& x) { return custom_op("test::softplus", {x}) * 2.0f; });
  BOOST_TEST(kiln_test_util::max_abs_diff(f(x), eager * 2.0f) < 1e-6);
  BOOST_TEST(kernel_calls == 1);
  const ExplainOutput e = kiln::explain([](const Tensor& x) { return custom_op("test::softplus", {x}) * 2.0f; }, x);
  for (const std::string& g : e.graphs) BOOST_TEST(!contains(g, "custom"), g);
  BOOST_TEST(e.kernels.size() == 1u);
  // d softplus / dx = sigmoid(x)
  const Tensor leaf = x.detach();
  leaf.requires_grad_();
  sum(custom_op("test::softplus", {leaf})).backward();
  BOOST_TEST(kiln_test_util::max_abs_diff(leaf.grad(), sigmoid(x)) < 1e-6);
  BOOST_TEST(kernel_calls == 1);
  // A decomposition that breaks the shape rule's promise is an error naming the op.
  register_op(CustomOp{.name = "test::liar", .decomposition = [](std::span<const Tensor> in, const std::string&) {
                         return sum(in[0]);
                       }});
  const std::string lie = error_of([&] { custom_op("test::liar", {x}); });
  BOOST_TEST(contains(lie, "test::liar: its decomposition gave f32[]"), lie);
  BOOST_TEST(unregister_op("test::liar"));
  BOOST_TEST(unregister_op("test::softplus"));  // its kernel holds a reference to kernel_calls
}

BOOST_AUTO_TEST_CASE(gradients_stop_at_a_host_kernel_with_an_error) {
  register_histogram();
  register_op(CustomOp{.name = "test::twice", .compute = [](std::span<const Tensor> in, const std::string&, const Tensor& out) {
                         const float* x = in[0].data().data_as<float>();
                         for (int64_t i = 0; i < out.data().numel(); ++i) out.data().data_as<float>()[i] = 2 * x[i];
                       }});
  const Tensor x = pattern_tensor({3}, 1).detach();
  x.requires_grad_();
  const std::string e = error_of([&] { sum(custom_op("test::twice", {x})).backward(); });
  BOOST_TEST(contains(e, "custom op test::twice has no derivative"), e);
}

// Versions: a graph made against one version does not run against another; a cache key covers
// the version, so a compiled function traced again after the change compiles again.
BOOST_AUTO_TEST_CASE(versions_and_unregistered_ops_are_errors) {
  register_histogram("1");
  Graph g;
  const NodeId in = g.add_input(TensorMeta{DType::f32, Device::cpu(), {SymInt(4)}, {}});
  g.set_outputs({g.add(OpId::custom, {in}, Attrs{std::string("test::histogram"), std::string("1"), std::string("0 1 2")})});
  const Tensor x = f32({0.1f, 0.2f, 0.7f, 0.8f}, {4});
  const std::vector<TensorData> inputs = {x.data()};
  BOOST_TEST(eval::run_graph(g, inputs)[0].data_as<int64_t>()[1] == 2);
  register_histogram("2");
  const std::string v = error_of([&] { eval::run_graph(g, inputs); });
  BOOST_TEST(contains(v, "test::histogram is registered at version \"2\""), v);
  BOOST_TEST(unregister_op("test::histogram"));
  BOOST_TEST(!unregister_op("test::histogram"));
  const std::string gone = error_of([&] { eval::run_graph(g, inputs); });
  BOOST_TEST(contains(gone, "custom op test::histogram is not registered in this process"), gone);
  const std::string call = error_of([&] { custom_op("test::histogram", {x}, "0 1 2"); });
  BOOST_TEST(contains(call, "no op named test::histogram is registered"), call);

  const std::string name = error_of([] { register_op(CustomOp{.name = "histogram", .compute = histogram_kernel}); });
  BOOST_TEST(contains(name, "namespace::name"), name);
  const std::string empty = error_of([] { register_op(CustomOp{.name = "test::nothing"}); });
  BOOST_TEST(contains(empty, "needs a host kernel (compute), a decomposition or both"), empty);
  const std::string arity = error_of([] {
    register_op(CustomOp{.name = "test::arity", .min_inputs = 2, .max_inputs = 1, .compute = histogram_kernel});
  });
  BOOST_TEST(contains(arity, "no range"), arity);
}

// A shape rule's or kernel's error names the op and the user's line; so does a wrong arity.
BOOST_AUTO_TEST_CASE(errors_name_the_op_and_the_call_site) {
  register_histogram();
  const Tensor x = f32({0.1f, 0.2f}, {2});
  const std::string config = error_of([&] { custom_op("test::histogram", {x}, "1 0 4"); });
  BOOST_TEST(contains(config, "custom op test::histogram: config must be"), config);
  BOOST_TEST(contains(config, "test_custom_ops.cpp"), config);
  auto f = kiln::compile([](const Tensor& x) { return custom_op("test::histogram", {x}, "0 1 0"); });
  const std::string traced = error_of([&] { f(x); });
  BOOST_TEST(contains(traced, "custom op test::histogram: config must be"), traced);
  const std::string arity = error_of([&] { custom_op("test::histogram", {x, x}, "0 1 4"); });
  BOOST_TEST(contains(arity, "custom op test::histogram takes 1 inputs, got 2"), arity);
  register_op(CustomOp{.name = "test::throws", .compute = [](std::span<const Tensor>, const std::string&, const Tensor&) {
                         throw std::runtime_error("out of paper");
                       }});
  const std::string thrown = error_of([&] { custom_op("test::throws", {x}); });
  BOOST_TEST(contains(thrown, "custom op test::throws: its host kernel threw: out of paper"), thrown);
  auto g = kiln::compile([](const Tensor& x) { return custom_op("test::throws", {x + 1.0f}); });
  const std::string compiled = error_of([&] { g(x); });
  BOOST_TEST(contains(compiled, "out of paper"), compiled);
}

// An op registered with the graph's registry alone (register_custom_op, as a library of ops
// would for the ONNX importer) is called the same way.
BOOST_AUTO_TEST_CASE(ops_of_the_graph_registry_alone) {
  CustomOpDef d;
  d.name = "test::plus_one";
  d.version = "3";
  d.infer = [](std::span<const TensorMeta* const> in, const std::string&, ShapeEnv&) { return *in[0]; };
  d.compute = [](std::span<const TensorData> in, const std::string&, const TensorData& out) {
    for (int64_t i = 0; i < out.numel(); ++i) out.data_as<float>()[i] = in[0].data_as<float>()[i] + 1;
  };
  register_custom_op(d);
  const Tensor x = f32({1, 2, 3}, {3});
  check_values(custom_op("test::plus_one", {x}), {2, 3, 4});
  auto f = kiln::compile([](const Tensor& x) { return custom_op("test::plus_one", {x * 2.0f}); });
  check_values(f(x), {3, 5, 7});
  BOOST_TEST(unregister_op("test::plus_one"));
}

// A backward of its own (torch.library's register_autograd): gradients flow through the host
// kernel, eagerly, through a compiled call's backward graph and in a backward pass traced inside a
// compiled function, all by the one rule (traced into whichever graph is differentiated).
BOOST_AUTO_TEST_CASE(a_backward_of_its_own_eager_compiled_and_traced) {
  int kernel_calls = 0;
  register_op(CustomOp{.name = "test::cube",
                       .compute = [&kernel_calls](std::span<const Tensor> in, const std::string&, const Tensor& out) {
                         ++kernel_calls;
                         const float* x = in[0].data().data_as<float>();
                         float* y = out.data().data_as<float>();
                         for (int64_t i = 0; i < out.data().numel(); ++i) y[i] = x[i] * x[i] * x[i];
                       },
                       .backward = [](std::span<const Tensor> in, const Tensor& out, const Tensor& grad,
                                      const std::string&) {
                         BOOST_TEST(out.shape() == in[0].shape());
                         return std::vector<Tensor>{in[0] * in[0] * grad * 3.0f};
                       }});
  const Tensor x = pattern_tensor({3, 5}, 7);
  const Tensor want = x * x * 3.0f;
  // Eagerly: the host kernel runs (there is no decomposition to fall back on) and backward()
  // takes the rule.
  const Tensor leaf = x.detach();
  leaf.requires_grad_();
  sum(custom_op("test::cube", {leaf})).backward();
  BOOST_TEST(kernel_calls == 1);
  BOOST_TEST(kiln_test_util::max_abs_diff(leaf.grad(), want) < 1e-5);
  // A compiled forward holds the op's node; backward() outside differentiates its graph.
  auto f = kiln::compile([](const Tensor& x) { return custom_op("test::cube", {x}) * 2.0f; });
  const Tensor leaf2 = x.detach();
  leaf2.requires_grad_();
  sum(f(leaf2)).backward();
  BOOST_TEST(kiln_test_util::max_abs_diff(leaf2.grad(), want * 2.0f) < 1e-5);
  // The forward and the backward traced into one compiled step, across sizes.
  auto step = kiln::compile([](const std::vector<Tensor>& p) {
    return value_and_grad([](const std::vector<Tensor>& q) { return sum(custom_op("test::cube", {q[0]}) * q[0]); }, p);
  });
  for (int64_t n : {5, 5, 9}) {
    const Tensor v = pattern_tensor({2, n}, 3);
    const auto [loss, grads] = step(std::vector<Tensor>{v});
    // d/dv sum(v^3 * v) = 3 v^2 * v + v^3 = 4 v^3
    BOOST_TEST(kiln_test_util::max_abs_diff(grads[0], v * v * v * 4.0f) < 1e-4);
    BOOST_TEST(kiln_test_util::max_abs_diff(loss, sum(v * v * v * v)) < 1e-3);
  }
  BOOST_TEST(unregister_op("test::cube"));  // its kernel holds a reference to kernel_calls
}

// Several inputs: an undefined gradient where an input gets none; the rule's mistakes are errors
// naming the op.
BOOST_AUTO_TEST_CASE(backward_rules_with_several_inputs_and_their_errors) {
  const auto gate_kernel = [](std::span<const Tensor> in, const std::string&, const Tensor& out) {
    for (int64_t i = 0; i < out.data().numel(); ++i)
      out.data().data_as<float>()[i] = in[0].data().data_as<float>()[i] * in[1].data().data_as<float>()[i];
  };
  register_op(CustomOp{.name = "test::gate", .min_inputs = 2, .max_inputs = 2, .compute = gate_kernel,
                       .backward = [](std::span<const Tensor> in, const Tensor&, const Tensor& grad, const std::string&) {
                         return std::vector<Tensor>{grad * in[1], Tensor()};
                       }});
  const Tensor x = pattern_tensor({4, 3}, 1).detach();
  const Tensor mask = pattern_tensor({4, 3}, 2);
  x.requires_grad_();
  sum(custom_op("test::gate", {x, mask}) * 2.0f).backward();
  BOOST_TEST(kiln_test_util::max_abs_diff(x.grad(), mask * 2.0f) < 1e-6);
  // The mask's gradient is asked for and there is none: grad() says the input is unused.
  const Tensor m = mask.detach();
  m.requires_grad_();
  const Tensor y = pattern_tensor({4, 3}, 3);
  const auto g = grad({sum(custom_op("test::gate", {y, m}))}, {m}, GradOptions{.allow_unused = true});
  BOOST_TEST(!g[0].defined());

  const auto copy_kernel = [](std::span<const Tensor> in, const std::string&, const Tensor& out) {
    for (int64_t i = 0; i < out.data().numel(); ++i) out.data().data_as<float>()[i] = in[0].data().data_as<float>()[i];
  };
  register_op(CustomOp{.name = "test::too_many", .compute = copy_kernel,
                       .backward = [](std::span<const Tensor> in, const Tensor&, const Tensor& grad, const std::string&) {
                         return std::vector<Tensor>{grad, grad * in[0]};
                       }});
  const std::string count = error_of([&] { sum(custom_op("test::too_many", {x})).backward(); });
  BOOST_TEST(contains(count, "custom op test::too_many: its backward gave 2 gradients for 1 inputs"), count);
  register_op(CustomOp{.name = "test::wrong_shape", .compute = copy_kernel,
                       .backward = [](std::span<const Tensor>, const Tensor&, const Tensor& grad, const std::string&) {
                         return std::vector<Tensor>{sum(grad, {0})};
                       }});
  const std::string shape = error_of([&] { sum(custom_op("test::wrong_shape", {x})).backward(); });
  BOOST_TEST(contains(shape, "custom op test::wrong_shape: its backward gave f32[3] as the gradient of input 0"), shape);
  register_op(CustomOp{.name = "test::reads_values", .compute = copy_kernel,
                       .backward = [](std::span<const Tensor>, const Tensor&, const Tensor& grad, const std::string&) {
                         return std::vector<Tensor>{grad * sum(grad).item<float>()};
                       }});
  const std::string value = error_of([&] { sum(custom_op("test::reads_values", {x})).backward(); });
  BOOST_TEST(contains(value, "the backward of custom op test::reads_values"), value);
  for (const char* name : {"test::gate", "test::too_many", "test::wrong_shape", "test::reads_values"})
    BOOST_TEST(unregister_op(name));
}

BOOST_AUTO_TEST_SUITE_END()
