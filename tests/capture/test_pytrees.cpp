// Pytree arguments and results of compiled functions: a model's parameters as a struct (KILN_PYTREE) of
// vectors, maps, optionals, arrays and tuples pass as graph inputs (new values are used without
// a recompile, nothing is baked in), and whatever shapes a pytree (a vector's length, a map's
// keys, an optional's presence, scalars inside it) is guarded. Results: a struct of Tensors and
// scalars, vectors whose length depends on a guarded argument, optionals, maps and tuples, rebuilt
// on every cache hit as the trace returned them.
#include <unistd.h>

#include <array>
#include <filesystem>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "helpers.h"

using namespace kiln;
using namespace capture_test;

namespace pytree_test {

struct Layer {
  Tensor weight;  // [out, in]
  Tensor bias;    // [out]
  double scale = 1.0;
};

struct Model {
  std::vector<Layer> layers;
  std::map<std::string, Tensor> extra;  // optional extra terms added to the output, by name
  std::optional<Tensor> shift;
};

Tensor forward(const Model& m, const Tensor& x) {
  Tensor h = x;
  for (const Layer& l : m.layers) h = relu(matmul(h, transpose(l.weight, 0, 1)) + l.bias) * l.scale;
  for (const auto& [name, t] : m.extra) h = h + t;
  if (m.shift) h = h - *m.shift;
  return h;
}

Layer layer(int64_t out, int64_t in, float start, double scale = 1.0) {
  std::vector<float> w(static_cast<size_t>(out * in)), b(static_cast<size_t>(out));
  for (size_t i = 0; i < w.size(); ++i) w[i] = start + 0.25f * static_cast<float>(i % 5) - 0.5f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = 0.1f * static_cast<float>(i) - start;
  return Layer{reshape(from_vector(w), {out, in}), from_vector(b), scale};
}

void check_same(const Tensor& got, const Tensor& expected) {
  check_values(got, expected.to_vector<double>(), 1e-4);
}

// A result with more than Tensors: a scalar member, a vector as long as the input list, an
// optional present or not, a map.
struct Outputs {
  Tensor total;
  std::vector<Tensor> scaled;
  std::optional<Tensor> maximum;
  std::map<std::string, std::tuple<Tensor, int64_t>> named;
  int64_t count = 0;
};

}  // namespace pytree_test

KILN_PYTREE(pytree_test::Outputs, &pytree_test::Outputs::total, &pytree_test::Outputs::scaled,
            &pytree_test::Outputs::maximum, &pytree_test::Outputs::named, &pytree_test::Outputs::count);
KILN_PYTREE(pytree_test::Layer, &pytree_test::Layer::weight, &pytree_test::Layer::bias, &pytree_test::Layer::scale);
KILN_PYTREE(pytree_test::Model, &pytree_test::Model::layers, &pytree_test::Model::extra, &pytree_test::Model::shift);

using namespace pytree_test;

BOOST_FIXTURE_TEST_SUITE(pytrees, Clean)

BOOST_AUTO_TEST_CASE(a_model_struct_passes_its_parameters_as_inputs) {
  use_recorder();
  CompileOptions o;
  o.backend = "recorder";
  auto f = kiln::compile([](const Model& m, const Tensor& x) { return forward(m, x); }, o);
  Model m{{layer(4, 3, 0.5f), layer(2, 4, -0.25f, 2.0)}, {{"a", ones({2})}}, std::nullopt};
  const Tensor x = reshape(iota_f32(6), {2, 3});
  check_same(f(m, x), forward(m, x));
  BOOST_TEST(f.stats().compiles == 1);
  // New parameter values of the same shapes: the same entry, the new values.
  Model m2{{layer(4, 3, 1.5f), layer(2, 4, 0.75f, 2.0)}, {{"a", full({2}, 3.0)}}, std::nullopt};
  check_same(f(m2, x), forward(m2, x));
  BOOST_TEST(f.stats().compiles == 1);
  BOOST_TEST(f.stats().cache_hits == 1);
  // Every tensor of the model is a graph input (none is a constant).
  std::lock_guard lock(recorder().mutex);
  BOOST_REQUIRE_EQUAL(recorder().graphs.size(), 1u);
  const Graph& g = recorder().graphs[0];
  BOOST_TEST(g.inputs().size() == 6u);  // 2 x (weight, bias), extra "a", x
  for (const Node& n : g.nodes()) BOOST_TEST((n.op != OpId::constant), "a parameter was baked into the graph");
}

BOOST_AUTO_TEST_CASE(what_shapes_a_pytree_is_guarded) {
  auto f = kiln::compile([](const Model& m, const Tensor& x) { return forward(m, x); });
  const Tensor x = reshape(iota_f32(6), {2, 3});
  Model m{{layer(3, 3, 0.5f)}, {}, std::nullopt};
  check_same(f(m, x), forward(m, x));
  BOOST_TEST(f.stats().compiles == 1);
  // One more layer: another length of `layers`.
  m.layers.push_back(layer(3, 3, -0.5f));
  check_same(f(m, x), forward(m, x));
  BOOST_TEST(f.stats().compiles == 2);
  // A map entry, then the same count under another key (same leaves, other structure).
  m.extra["b"] = full({3}, 2.0);
  check_same(f(m, x), forward(m, x));
  BOOST_TEST(f.stats().compiles == 3);
  m.extra = {{"c", full({3}, 2.0)}};
  check_same(f(m, x), forward(m, x));
  BOOST_TEST(f.stats().compiles == 4);
  // An optional present.
  m.shift = full({3}, 0.5);
  check_same(f(m, x), forward(m, x));
  BOOST_TEST(f.stats().compiles == 5);
  // A scalar inside the tree: guarded by value, as a scalar argument is.
  m.layers[0].scale = 3.0;
  check_same(f(m, x), forward(m, x));
  BOOST_TEST(f.stats().compiles == 6);
  // Every earlier structure is still served by its entry.
  Model first{{layer(3, 3, 0.5f)}, {}, std::nullopt};
  check_same(f(first, x), forward(first, x));
  BOOST_TEST(f.stats().compiles == 6);
}

// Recompile reasons name the leaf by its path in the argument: a member by its name, an
// element by its index or key, and the leaves that shape a container as len/keys/has_value;
// the argument itself by its arg_names entry, else "argK".
BOOST_AUTO_TEST_CASE(recompile_reasons_name_the_leaf_path) {
  auto reasons_of = [](const CompileOptions& o) {
    auto f = kiln::compile([](const Model& m, const Tensor& x) { return forward(m, x); }, o);
    const Tensor x = reshape(iota_f32(6), {2, 3});
    Model m{{layer(3, 3, 0.5f)}, {}, std::nullopt};
    (void)f(m, x);
    m.layers.push_back(layer(3, 3, -0.5f));
    (void)f(m, x);
    m.extra["b"] = full({3}, 2.0);
    (void)f(m, x);
    m.shift = full({3}, 0.5);
    (void)f(m, x);
    m.layers[1].scale = 3.0;
    (void)f(m, x);
    (void)f(m, reshape(iota_f32(9), {3, 3}));
    return f.stats().recompile_reasons;
  };
  const std::vector<std::string> unnamed = reasons_of({});
  BOOST_REQUIRE_EQUAL(unnamed.size(), 5u);
  BOOST_TEST(contains(unnamed[0], "(len(arg0.layers))"), unnamed[0]);
  BOOST_TEST(contains(unnamed[1], "(keys(arg0.extra))"), unnamed[1]);
  BOOST_TEST(contains(unnamed[2], "(has_value(arg0.shift))"), unnamed[2]);
  BOOST_TEST(contains(unnamed[3], "(arg0.layers[1].scale)"), unnamed[3]);
  BOOST_TEST(contains(unnamed[4], "(arg1)"), unnamed[4]);
  CompileOptions named;
  named.arg_names = {"model", "x"};
  const std::vector<std::string> reasons = reasons_of(named);
  BOOST_REQUIRE_EQUAL(reasons.size(), 5u);
  BOOST_TEST(contains(reasons[3], "(model.layers[1].scale): value mismatch: expected 1, got 3"), reasons[3]);
  BOOST_TEST(contains(reasons[4], "(x)"), reasons[4]);
  BOOST_TEST(detail::pytree_member_name("&a::B::w, &a::B::bias , &B::c", 1) == "bias");
  BOOST_TEST(detail::pytree_member_name("&B::w", 3) == "3");
}

BOOST_AUTO_TEST_CASE(vectors_arrays_tuples_and_pairs) {
  auto f = kiln::compile([](const std::vector<Tensor>& xs, const std::array<Tensor, 2>& ab,
                            const std::tuple<Tensor, double>& ts, const std::pair<int64_t, Tensor>& p) {
    Tensor s = ab[0] * ab[1];
    for (const Tensor& x : xs) s = s + x;
    return s * std::get<1>(ts) + std::get<0>(ts) + p.second * static_cast<double>(p.first);
  });
  const Tensor one = ones({2});
  const Tensor v = from_vector<float>({1, 2});
  auto call = [&](std::vector<Tensor> xs, double k) {
    return f(xs, std::array<Tensor, 2>{v, v}, std::tuple<Tensor, double>{one, k}, std::pair<int64_t, Tensor>{2, v});
  };
  check_values(call({v}, 2.0), {(1 + 1) * 2 + 1 + 2, (4 + 2) * 2 + 1 + 4});
  check_values(call({one}, 2.0), {(1 + 1) * 2 + 1 + 2, (4 + 1) * 2 + 1 + 4});
  BOOST_TEST(f.stats().compiles == 1);
  check_values(call({v, v}, 2.0), {(1 + 2) * 2 + 1 + 2, (4 + 4) * 2 + 1 + 4});
  BOOST_TEST(f.stats().compiles == 2);
  check_values(call({}, 1.0), {1 + 1 + 2, 4 + 1 + 4});
  BOOST_TEST(f.stats().compiles == 3);
}

BOOST_AUTO_TEST_CASE(results_are_pytrees_rebuilt_on_every_hit) {
  auto f = kiln::compile([](const std::vector<Tensor>& xs, bool with_max) {
    Outputs out;
    out.total = xs[0];
    for (size_t i = 0; i < xs.size(); ++i) {
      out.scaled.push_back(xs[i] * static_cast<double>(i + 1));
      if (i > 0) out.total = out.total + xs[i];
    }
    if (with_max) out.maximum = max(out.total, {0});
    out.named["first"] = {xs[0] * 2.0, 7};
    out.count = static_cast<int64_t>(xs.size());
    return out;
  });
  const Tensor a = from_vector<float>({1, 2}), b = from_vector<float>({3, -1}), c = from_vector<float>({0.5, 4});
  for (int round = 0; round < 2; ++round) {  // round 1: every call a cache hit
    const Outputs two = f(std::vector<Tensor>{a, b}, true);
    check_values(two.total, {4, 1});
    BOOST_REQUIRE(two.scaled.size() == 2);
    check_values(two.scaled[1], {6, -2});
    BOOST_REQUIRE(two.maximum.has_value());
    check_values(*two.maximum, {4});
    BOOST_REQUIRE(two.named.count("first") == 1);
    check_values(std::get<0>(two.named.at("first")), {2, 4});
    BOOST_TEST(std::get<1>(two.named.at("first")) == 7);
    BOOST_TEST(two.count == 2);
    BOOST_TEST(!two.total.is_traced());

    const Outputs three = f(std::vector<Tensor>{c, a, b}, false);
    check_values(three.total, {4.5, 5});
    BOOST_REQUIRE(three.scaled.size() == 3);
    check_values(three.scaled[2], {9, -3});
    BOOST_TEST(!three.maximum.has_value());
    BOOST_TEST(three.count == 3);
  }
  BOOST_TEST(f.stats().compiles == 2);
  BOOST_TEST(f.stats().cache_hits == 2);
  // The same function run eagerly (a graph break) gives the same structure.
  auto g = kiln::compile([](const Tensor& x) {
    const double s = x.sum().item<double>();  // a graph break
    return std::make_tuple(x * s, s > 0, std::vector<Tensor>{x, x + 1.0});
  });
  const auto [y, positive, parts] = g(from_vector<float>({1, 2}));
  check_values(y, {3, 6});
  BOOST_TEST(positive);
  BOOST_REQUIRE(parts.size() == 2);
  check_values(parts[1], {2, 3});
}

// The path a model takes from a weights file: save_state_dict, load_state_dict, take() into the
// model struct (shapes checked by name), then the compiled forward.
BOOST_AUTO_TEST_CASE(a_model_from_a_safetensors_file) {
  const Model original{{layer(4, 3, 0.5f), layer(2, 4, -0.25f)}, {}, full({2}, 0.125)};
  StateDict state;
  for (size_t i = 0; i < original.layers.size(); ++i) {
    state["layers." + std::to_string(i) + ".weight"] = original.layers[i].weight;
    state["layers." + std::to_string(i) + ".bias"] = original.layers[i].bias;
  }
  state["shift"] = *original.shift;
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("kiln_test_pytrees_" + std::to_string(::getpid()) + ".safetensors")).string();
  save_state_dict(state, path, {{"format", "pt"}});
  const StateDict loaded = load_state_dict(path);
  std::filesystem::remove(path);
  BOOST_TEST(loaded.size() == 5u);
  Model m;
  const int64_t widths[] = {3, 4, 2};
  for (int64_t i = 0; i < 2; ++i) {
    const std::string p = "layers." + std::to_string(i);
    m.layers.push_back(Layer{take(loaded, p + ".weight", {widths[i + 1], widths[i]}, DType::f32),
                             take(loaded, p + ".bias", {widths[i + 1]})});
  }
  m.shift = take(loaded, "shift", {2});
  auto f = kiln::compile([](const Model& model, const Tensor& x) { return forward(model, x); });
  const Tensor x = reshape(iota_f32(6), {2, 3});
  check_same(f(m, x), forward(original, x));
  // A missing, a mis-shaped and a mis-typed tensor are named.
  BOOST_TEST(contains(error_of([&] { take(loaded, "layers.2.weight", {2, 2}); }), "no tensor 'layers.2.weight'"));
  BOOST_TEST(contains(error_of([&] { take(loaded, "layers.0.weight", {3, 4}); }),
                      "tensor 'layers.0.weight' has shape [4, 3], expected [3, 4]"));
  BOOST_TEST(contains(error_of([&] { take(loaded, "shift", {2}, DType::f64); }), "tensor 'shift' is f32, expected f64"));
}

BOOST_AUTO_TEST_CASE(explain_takes_pytrees) {
  Model m{{layer(3, 3, 0.5f), layer(3, 3, 0.25f)}, {}, std::nullopt};
  const ExplainOutput e = kiln::explain([](const Model& model, const Tensor& x) { return forward(model, x); }, m,
                                        reshape(iota_f32(6), {2, 3}));
  BOOST_TEST(e.graph_count == 1);
  BOOST_TEST(e.graph_break_count == 0);
}

BOOST_AUTO_TEST_SUITE_END()
