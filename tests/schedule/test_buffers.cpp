// Buffer planning (sdk/schedule/src/buffers.cpp): intermediates share memory slots across their
// lifetimes, planned largest first: a slot goes to the buffers it fits best, and a buffer that
// outgrows the slots freed before it still shares the slot of a larger one that comes later.
#include <algorithm>

#include <kiln/graph/graph.h>
#include <kiln/schedule/schedule.h>

#include <boost/test/unit_test.hpp>

using namespace kiln;

namespace {

TensorMeta meta(SymShape s) { return TensorMeta{DType::f32, Device::cpu(), std::move(s), {}}; }

// The bytes of the intermediates each kernel has live (written there or before, read there or
// after): no slot plan can use less than the largest of them.
int64_t most_live_bytes(const schedule::Schedule& s) {
  const size_t nk = s.kernels.size();
  std::vector<int64_t> live(nk, 0);
  for (const schedule::Buffer& b : s.buffers) {
    if (b.kind != schedule::BufferKind::intermediate) continue;
    int64_t first = -1, last = -1;
    for (size_t k = 0; k < nk; ++k) {
      bool used = false;
      for (int32_t r : s.kernels[k].reads()) used = used || r == b.id;
      for (int32_t w : s.kernels[k].writes()) used = used || w == b.id;
      if (!used) continue;
      if (first < 0) first = static_cast<int64_t>(k);
      last = static_cast<int64_t>(k);
    }
    for (int64_t k = first; k >= 0 && k <= last; ++k) live[static_cast<size_t>(k)] += b.bytes().hint();
  }
  return *std::max_element(live.begin(), live.end());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(buffers)

// big = x @ xt and small = rowsum(x) die together; then a small row sum and a big product live
// one after the other. First fit put the small sum into the big slot and the second product
// into a new one (two big slots); best fit reuses each slot for its own size.
BOOST_AUTO_TEST_CASE(freed_slots_go_to_the_buffers_they_fit_best) {
  Graph g;
  const NodeId x = g.add_input(meta({1024, 64}), "x");
  const NodeId xt = g.add_input(meta({64, 1024}), "xt");
  const NodeId big = g.add(OpId::matmul, {x, xt});                                             // [1024, 1024]
  const NodeId small = g.add(OpId::sum, {x}, {std::vector<int64_t>{1}, true});                 // [1024, 1]
  const NodeId t = g.add(OpId::sum, {g.add(OpId::add, {big, small})}, {std::vector<int64_t>{1}, true});
  const NodeId small2 = g.add(OpId::sum, {g.add(OpId::mul, {x, t})}, {std::vector<int64_t>{1}, true});
  const NodeId big2 = g.add(OpId::matmul, {g.add(OpId::mul, {x, small2}), xt});
  g.set_outputs({g.add(OpId::add, {g.add(OpId::sum, {big2}, {std::vector<int64_t>{1}, true}), t})});
  const schedule::Schedule s = schedule::schedule_graph(g, schedule::Target::cpu());
  int64_t all = 0;
  for (const schedule::Buffer& b : s.buffers)
    if (b.kind == schedule::BufferKind::intermediate) all += b.bytes().hint();
  // One 4 MiB slot for both products, not two.
  BOOST_TEST(s.peak_intermediate_bytes < 2 * 1024 * 1024 * 4, s.str());
  BOOST_TEST(s.peak_intermediate_bytes < all, s.str());
  BOOST_TEST(s.peak_intermediate_bytes == most_live_bytes(s), s.str());
}

// Products of growing sizes, each dead before the next: planned in kernel order, each product
// outgrew the freed slots and took a new one; largest first, they share the largest's slot.
BOOST_AUTO_TEST_CASE(growing_buffers_one_after_another_share_slots) {
  Graph g;
  const NodeId w = g.add_input(meta({64, 256}), "w");
  NodeId carry = -1;
  std::vector<NodeId> outs;
  for (int64_t rows : {128, 256, 512, 1024}) {
    NodeId x = g.add_input(meta({rows, 64}), "x" + std::to_string(rows));
    if (carry >= 0) x = g.add(OpId::mul, {x, carry});  // after the last product's sum
    const NodeId p = g.add(OpId::matmul, {x, w});       // [rows, 256]
    carry = g.add(OpId::sum, {p}, {std::vector<int64_t>{}, false});
    outs.push_back(carry);
  }
  g.set_outputs(outs);
  const schedule::Schedule s = schedule::schedule_graph(g, schedule::Target::cpu());
  BOOST_TEST(s.peak_intermediate_bytes == most_live_bytes(s), s.str());
  BOOST_TEST(s.peak_intermediate_bytes < (128 + 256 + 512 + 1024) * 256 * 4, s.str());
}

BOOST_AUTO_TEST_SUITE_END()
