// sdk/autodiff over whole graphs (steps_of): gradients appended to a graph and run on the
// reference interpreter against central finite differences of the graph's loss in f64, with
// symbolic sizes (the gradient nodes stay shape-generic), values used twice, broadcasting, and
// composites differentiated through their decompositions; and what is not connected.
#define BOOST_TEST_MODULE autodiff
#include <boost/test/unit_test.hpp>

#include <kiln/autodiff/autodiff.h>
#include <kiln/eval/interpreter.h>
#include <kiln/graph/graph.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace kiln;

namespace {

TensorMeta meta(SymShape s) { return TensorMeta{DType::f64, Device::cpu(), std::move(s), {}}; }

TensorData random_f64(const std::vector<int64_t>& sizes, uint64_t seed) {
  TensorData d = TensorData::empty_host(DType::f64, sizes);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n(0.0, 1.0);
  for (int64_t i = 0; i < d.numel(); ++i) d.data_as<double>()[i] = n(rng);
  return d;
}

// g's single output is a 0-d loss; every input is differentiated (inputs get `values`). Returns
// the joint graph, whose outputs are the gradients.
Graph check_gradients(const Graph& g, const std::vector<TensorData>& values) {
  Graph joint = g;
  const NodeId loss = g.outputs()[0];
  const std::vector<autodiff::Step> steps = autodiff::steps_of(joint);
  const NodeId seed = joint.add(OpId::full, {}, {SymShape{}, 1.0, DType::f64});
  const std::vector<autodiff::Seed> seeds{{loss, seed}};
  const std::vector<NodeId> grads = autodiff::gradients(joint, steps, seeds, joint.inputs());
  for (NodeId gnode : grads) BOOST_REQUIRE(gnode >= 0);
  joint.set_outputs(grads);
  const std::vector<TensorData> analytic = eval::run_graph(joint, values);
  auto loss_at = [&](size_t input, int64_t element, double delta) {
    std::vector<TensorData> v = values;
    v[input] = eval::contiguous(v[input]);
    TensorData copy = TensorData::empty_host(DType::f64, v[input].sizes);
    std::copy(v[input].data_as<double>(), v[input].data_as<double>() + copy.numel(), copy.data_as<double>());
    copy.data_as<double>()[element] += delta;
    v[input] = copy;
    return eval::run_graph(g, v)[0].data_as<double>()[0];
  };
  for (size_t i = 0; i < values.size(); ++i) {
    BOOST_TEST_CONTEXT("input " << i) {
      BOOST_REQUIRE(analytic[i].sizes == values[i].sizes);
      const TensorData a = eval::contiguous(analytic[i]);
      for (int64_t e = 0; e < a.numel(); ++e) {
        const double numeric = (loss_at(i, e, 1e-6) - loss_at(i, e, -1e-6)) / 2e-6;
        BOOST_TEST(std::abs(a.data_as<double>()[e] - numeric) <= 1e-5 + 1e-4 * std::abs(numeric),
                   "element " << e << ": autodiff " << a.data_as<double>()[e] << ", finite differences " << numeric);
      }
    }
  }
  return joint;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(autodiff_graphs)

// A layer over a symbolic batch: matmul, a broadcast bias, tanh, softmax (its own rule), a
// mean whose count is symbolic, and x used twice.
BOOST_AUTO_TEST_CASE(a_layer_over_a_symbolic_batch) {
  Graph g;
  const SymInt s0 = g.shapes().create_symbol(3, 2, 64, "x dim 0", false);
  const NodeId x = g.add_input(meta({s0, 4}), "x");
  const NodeId w = g.add_input(meta({4, 5}), "w");
  const NodeId b = g.add_input(meta({5}), "b");
  const NodeId h = g.add(OpId::tanh, {g.add(OpId::add, {g.add(OpId::matmul, {x, w}), b})});
  const NodeId p = g.add(OpId::softmax, {h}, {int64_t{1}});
  const NodeId twice = g.add(OpId::mul, {g.add(OpId::sum, {x}, {std::vector<int64_t>{1}, true}), p});
  g.set_outputs({g.add(OpId::mean, {twice}, {std::vector<int64_t>{}, false})});
  for (int64_t batch : {3, 6}) {
    BOOST_TEST_CONTEXT("batch " << batch) {
      check_gradients(g, {random_f64({batch, 4}, 1), random_f64({4, 5}, 2), random_f64({5}, 3)});
    }
  }
}

// Composites without a rule (layer_norm, attention) are decomposed in place and differentiated
// through their primitives.
BOOST_AUTO_TEST_CASE(composites_through_their_decompositions) {
  Graph g;
  const NodeId x = g.add_input(meta({2, 3, 4}), "x");
  const NodeId gamma = g.add_input(meta({4}), "gamma");
  const NodeId n = g.add(OpId::layer_norm, {x, gamma}, {int64_t{1}, 1e-5});
  const NodeId a = g.add(OpId::scaled_dot_product_attention, {n, x, n}, {0.5});
  g.set_outputs({g.add(OpId::sum, {g.add(OpId::mul, {a, a})}, {std::vector<int64_t>{}, false})});
  check_gradients(g, {random_f64({2, 3, 4}, 4), random_f64({4}, 5)});
}

// A node no seed depends on gets no gradient (-1), and an input that only reaches an integer
// value (argmax) gets none either.
// A tied embedding (GPT-2's token table: looked up by ids, then the output projection): the
// lookup's gradient, rows of g added where the ids say (repeats adding up), adds into the
// projection's gradient directly, not into a table of zeros added to it after.
BOOST_AUTO_TEST_CASE(a_tied_embedding_adds_its_rows_into_the_projections_gradient) {
  Graph g;
  const NodeId w = g.add_input(meta({5, 3}), "w");
  auto ids = std::make_shared<ConstantData>();
  ids->dtype = DType::i64;
  ids->sizes = {4};
  const std::vector<int64_t> v{1, 3, 1, 0};
  ids->bytes.resize(32);
  std::memcpy(ids->bytes.data(), v.data(), 32);
  const NodeId i = g.add(OpId::constant, {}, {std::shared_ptr<const ConstantData>(ids)});
  const NodeId e = g.add(OpId::index_select, {w, i}, {int64_t{0}});
  const NodeId y = g.add(OpId::matmul, {g.add(OpId::tanh, {e}), g.add(OpId::permute, {w}, {std::vector<int64_t>{1, 0}})});
  g.set_outputs({g.add(OpId::sum, {g.add(OpId::mul, {y, y})}, {std::vector<int64_t>{}, false})});
  const Graph joint = check_gradients(g, {random_f64({5, 3}, 9)});
  const Node& gw = joint.node(joint.outputs()[0]);
  BOOST_TEST(op_name(gw.op) == "scatter_add");
  BOOST_TEST(op_name(joint.node(gw.inputs[0]).op) != "full", "the rows add into the projection's gradient");
}

BOOST_AUTO_TEST_CASE(what_is_not_connected_gets_nothing) {
  Graph g;
  const NodeId x = g.add_input(meta({3}), "x");
  const NodeId y = g.add_input(meta({3}), "y");
  const NodeId loss = g.add(OpId::sum, {g.add(OpId::mul, {x, g.add(OpId::cast, {g.add(OpId::argmax, {y}, {std::vector<int64_t>{}, false})}, {DType::f64})})}, {std::vector<int64_t>{}, false});
  const std::vector<autodiff::Step> steps = autodiff::steps_of(g);
  const NodeId seed = g.add(OpId::full, {}, {SymShape{}, 1.0, DType::f64});
  const std::vector<autodiff::Seed> seeds{{loss, seed}};
  const std::vector<NodeId> wrt{x, y};
  const std::vector<NodeId> grads = autodiff::gradients(g, steps, seeds, wrt);
  BOOST_TEST(grads[0] >= 0);
  BOOST_TEST(grads[1] == -1);
}

BOOST_AUTO_TEST_SUITE_END()
