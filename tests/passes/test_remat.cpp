// rematerialize: at the node position the most bytes cross, the values read across it are stored
// or computed again after it from stored ones, whichever stores fewer bytes (a minimum cut); only
// large pointwise values (and views) read again long after are recomputed.
#include "helpers.h"

using namespace passes_test;
using kiln::passes::rematerialize;

namespace {

constexpr int64_t kRows = 256, kCols = 512;  // 2^17 elements: large enough to recompute

// `length` pointwise steps over a small value, as a backward's unrelated work between the
// forward's read of a value and its own.
NodeId busy_work(G& b, NodeId small, int length) {
  NodeId t = small;
  for (int k = 0; k < length; ++k) t = b.op(k % 2 ? OpId::sin : OpId::cos, {t});
  return t;
}

// x = in @ m (a product: not recomputed), a = relu(x * w[cols]) read by a sum at once, then,
// after `gap` other nodes, by a product; x read late too (stored that long anyway) or not.
Graph activation_read_twice(int gap, bool x_read_late) {
  G b;
  const NodeId in = b.in(DType::f32, {kRows, 64}, "in");
  const NodeId m = b.in(DType::f32, {64, kCols}, "m");
  const NodeId w = b.in(DType::f32, {kCols}, "w");
  const NodeId x = b.op(OpId::matmul, {in, m});
  const NodeId a = b.op(OpId::relu, {b.op(OpId::mul, {x, w})});
  const NodeId s = b.reduce(OpId::sum, a, {1});
  const NodeId t = busy_work(b, s, gap);
  NodeId late = b.op(OpId::mul, {a, t});
  if (x_read_late) late = b.op(OpId::add, {late, x});
  return b.out({late});
}

int relus(const Graph& g) { return count(g, OpId::relu); }

}  // namespace

BOOST_AUTO_TEST_SUITE(remat)

BOOST_AUTO_TEST_CASE(a_value_read_again_much_later_is_recomputed_from_inputs_kept_anyway) {
  const Graph g = activation_read_twice(80, true);
  const Graph r = rematerialize(g);
  // relu and the product under it, both computed a second time for the late reader.
  BOOST_TEST(relus(r) == 2, r.str());
  BOOST_TEST(count(r, OpId::mul) == count(g, OpId::mul) + 1, r.str());
  BOOST_TEST(same_results(g, r));
  // The early relu is read by the sum alone now.
  int early_readers = 0;
  NodeId first_relu = -1;
  for (NodeId id = 0; id < static_cast<NodeId>(r.size()); ++id)
    if (r.node(id).op == OpId::relu) {
      first_relu = id;
      break;
    }
  for (const Node& n : r.nodes())
    for (NodeId i : n.inputs) early_readers += i == first_relu;
  BOOST_TEST(early_readers == 1, r.str());
}

BOOST_AUTO_TEST_CASE(values_whose_inputs_would_be_kept_longer_or_that_are_read_close_stay) {
  // x is read by nothing late: recomputing a would keep x (as large) stored across the gap.
  // (Were x pointwise over inputs, it would be recomputed too: inputs are always there.)
  BOOST_TEST(relus(rematerialize(activation_read_twice(80, false))) == 1);
  // Readers close together: nothing to gain.
  BOOST_TEST(relus(rematerialize(activation_read_twice(10, true))) == 1);
}

BOOST_AUTO_TEST_CASE(small_values_and_outputs_stay) {
  G b;
  const NodeId x = b.in(DType::f32, {16, 16}, "x");
  const NodeId a = b.op(OpId::relu, {x});
  const NodeId t = busy_work(b, b.reduce(OpId::sum, a, {1}), 80);
  const Graph g = b.out({b.op(OpId::mul, {a, t})});
  BOOST_TEST(relus(rematerialize(g)) == 1);
  G c;
  const NodeId y = c.in(DType::f32, {kRows, kCols}, "y");
  const NodeId o = c.op(OpId::relu, {y});
  const NodeId u = busy_work(c, c.reduce(OpId::sum, o, {1}), 80);
  const Graph h = c.out({c.op(OpId::mul, {o, u}), o});
  BOOST_TEST(relus(rematerialize(h)) == 1);
}

BOOST_AUTO_TEST_CASE(the_cut_stores_the_fewest_bytes_the_late_readers_can_be_computed_from) {
  // x = in @ m (f32, not recomputed, read early only), y = bf16(x), and two activations of y,
  // a = relu(y) and n = -y, both read again late. Storing a and n takes twice y's bytes, storing x
  // twice too; storing y and computing a and n again from it is the cut. (A rule that recomputes
  // a value only from what is stored anyway would store a and n.)
  G b;
  const NodeId in = b.in(DType::f32, {kRows, 64}, "in");
  const NodeId m = b.in(DType::f32, {64, kCols}, "m");
  const NodeId x = b.op(OpId::matmul, {in, m});
  const NodeId y = b.op(OpId::cast, {x}, {DType::bf16});
  const NodeId a = b.op(OpId::relu, {y});
  const NodeId n = b.op(OpId::neg, {y});
  const NodeId s = b.reduce(OpId::sum, b.op(OpId::add, {a, n}), {1});
  const NodeId t = busy_work(b, s, 80);
  const Graph g = b.out({b.op(OpId::mul, {b.op(OpId::mul, {a, n}), t})});
  const Graph r = rematerialize(g);
  BOOST_TEST(relus(r) == 2, r.str());
  BOOST_TEST(count(r, OpId::neg) == 2, r.str());
  BOOST_TEST(count(r, OpId::cast) == 1, r.str());  // y itself is stored
  BOOST_TEST(same_results(g, r));
}

BOOST_AUTO_TEST_CASE(a_forward_backward_split_stores_only_what_cannot_be_computed_again) {
  // The joint graph of a training step: the forward (x = in @ m, y = bf16(x), a = relu(y),
  // n = -y, s = sum(a + n)) then, from `boundary`, a backward that reads a and n with the
  // gradient g. The backward is given y alone: x is twice its bytes, a and n together too,
  // and a and n are computed again from y.
  G b;
  const NodeId in = b.in(DType::f32, {kRows, 64}, "in");
  const NodeId m = b.in(DType::f32, {64, kCols}, "m");
  const NodeId g = b.in(DType::bf16, {kRows, 1}, "g");
  const NodeId x = b.op(OpId::matmul, {in, m});
  const NodeId y = b.op(OpId::cast, {x}, {DType::bf16});
  const NodeId a = b.op(OpId::relu, {y});
  const NodeId n = b.op(OpId::neg, {y});
  const NodeId s = b.reduce(OpId::sum, b.op(OpId::add, {a, n}), {1});
  const auto boundary = static_cast<NodeId>(s + 1);
  const NodeId d = b.op(OpId::mul, {b.op(OpId::mul, {a, n}), g});
  const Graph joint = b.out({s, d});
  BOOST_TEST((joint.node(boundary - 1).op == OpId::sum));
  const std::vector<NodeId> stored = kiln::passes::partition_stored(joint, boundary, "test");
  BOOST_TEST(stored == std::vector<NodeId>{y}, joint.str());
}

BOOST_AUTO_TEST_SUITE_END()
