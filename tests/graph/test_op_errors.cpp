// Bad inputs to every shape rule give a kiln::Error whose sentence starts with the op.
#include <limits>

#include "helpers.h"

using namespace kiln;
using kiln_test::dims;
using kiln_test::G;

namespace {
using D = DType;
constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();
}  // namespace

BOOST_AUTO_TEST_SUITE(op_errors)

BOOST_AUTO_TEST_CASE(sources) {
  G t;
  // The input rule itself refuses: inputs come from add_input.
  ShapeEnv env;
  const Attrs index{int64_t{0}};
  const InferContext ctx{OpId::input, {}, index, env};
  CHECK_KILN_ERROR(op_def(OpId::input).infer(ctx), "input: input nodes are created with add_input");
  CHECK_KILN_ERROR(t.op(OpId::input, {}, {int64_t{0}}), "add_input");
  auto bad = std::make_shared<const ConstantData>(ConstantData{D::f32, {2, 3}, std::vector<std::byte>(20)});
  CHECK_KILN_ERROR(t.op(OpId::constant, {}, {bad}), "constant:", "20 bytes", "expected 24");
  CHECK_KILN_ERROR(t.op(OpId::full, {}, {SymShape{2, -1}, 0.0, D::f32}), "full: negative size");
  CHECK_KILN_ERROR(t.op(OpId::randn, {}, {SymShape{2}, int64_t{0}, D::i32}), "randn: dtype must be floating, got i32");
  CHECK_KILN_ERROR(t.op(OpId::randn, {}, {SymShape{-2}, int64_t{0}, D::f32}), "randn: negative size");
  CHECK_KILN_ERROR(t.op(OpId::rand, {t.in(D::f32, {})}, {SymShape{2}, int64_t{0}, D::f32}),
                   "rand: the key must be a 0-d integer tensor, got f32[]");
  CHECK_KILN_ERROR(t.op(OpId::randn, {t.in(D::i64, {1})}, {SymShape{2}, int64_t{0}, D::f32}),
                   "randn: the key must be a 0-d integer tensor, got i64[1]");
  CHECK_KILN_ERROR(t.op(OpId::philox, {t.in(D::i64, {}), t.in(D::f32, {3})}, {int64_t{0}, int64_t{0}}),
                   "philox: the counter must be an integer tensor, got f32");
  CHECK_KILN_ERROR(t.op(OpId::philox, {t.in(D::i64, {}), t.in(D::i64, {3})}, {int64_t{4}, int64_t{0}}),
                   "philox: word must be 0, 1, 2 or 3, got 4");
  CHECK_KILN_ERROR(t.op(OpId::arange, {}, {0.0, 4.0, 0.0, D::f32}), "arange: step must be nonzero");
  CHECK_KILN_ERROR(t.op(OpId::arange, {}, {0.0, 4.0, -1.0, D::f32}), "arange:", "cannot be reached");
  CHECK_KILN_ERROR(t.op(OpId::arange, {}, {0.0, std::numeric_limits<double>::infinity(), 1.0, D::f32}),
                   "arange:", "finite");
}

BOOST_AUTO_TEST_CASE(pointwise) {
  G t;
  const NodeId b = t.in(D::bool_, {3});
  const NodeId f = t.in(D::f32, {3});
  CHECK_KILN_ERROR(t.op(OpId::neg, {b}), "neg:", "bool");
  CHECK_KILN_ERROR(t.op(OpId::gelu, {f}, {std::string("exact")}), "gelu: approximate must be", "\"exact\"");
  CHECK_KILN_ERROR(t.op(OpId::sub, {b, b}), "sub:", "bool");
  CHECK_KILN_ERROR(t.op(OpId::add, {f, t.in(D::f32, {4})}), "add: shapes [3] and [4] do not broadcast");
  CHECK_KILN_ERROR(t.op(OpId::where, {f, f, f}), "where: condition must be bool, got f32");
  CHECK_KILN_ERROR(t.op(OpId::where, {b, f, t.in(D::f32, {2, 2})}), "where: shapes");
}

BOOST_AUTO_TEST_CASE(devices_must_agree) {
  G t;
  const NodeId gpu = t.in(D::f32, {3}, Device::cuda(0));
  CHECK_KILN_ERROR(t.op(OpId::add, {gpu, t.in(D::f32, {3})}), "add: inputs are on different devices (cuda:0 and cpu)");
  CHECK_KILN_ERROR(t.op(OpId::add, {gpu, t.in(D::f32, {3}, Device::cuda(1))}), "add:", "cuda:1");
  CHECK_KILN_ERROR(t.op(OpId::matmul, {t.in(D::f32, {3}, Device::vulkan(0)), gpu}), "matmul:", "different devices");
  CHECK_KILN_ERROR(t.op(OpId::cat, {gpu, t.in(D::f32, {3})}, {int64_t{0}}), "cat:", "different devices");
  // Values the graph generates have no device: they count as on the device they meet.
  const NodeId ramp = t.op(OpId::iota, {}, {SymShape{3}, int64_t{0}, D::f32});
  const NodeId scaled = t.op(OpId::mul, {ramp, ramp});
  BOOST_TEST(t.g.node(t.op(OpId::add, {gpu, scaled})).meta.device.str() == "cuda:0");
  BOOST_TEST(t.g.node(t.op(OpId::add, {scaled, gpu})).meta.device.str() == "cuda:0");
  BOOST_TEST(t.g.node(scaled).meta.device.str() == "cpu");
  CHECK_KILN_ERROR(t.op(OpId::add, {t.op(OpId::add, {gpu, scaled}), t.in(D::f32, {3})}), "add:", "different devices");
  // So are constants (a trace's captured tensors, a mask it built eagerly): the program's own values.
  auto value = std::make_shared<ConstantData>();
  value->sizes = {3};
  value->bytes.resize(3 * sizeof(float));
  const NodeId constant = t.g.add(OpId::constant, {}, Attrs{std::shared_ptr<const ConstantData>(value)});
  BOOST_TEST(t.g.node(t.op(OpId::add, {constant, gpu})).meta.device.str() == "cuda:0");
  BOOST_TEST(t.g.node(t.op(OpId::index_select, {gpu, t.op(OpId::cast, {constant}, {D::i64})}, {int64_t{0}})).meta.device.str() == "cuda:0");
}

BOOST_AUTO_TEST_CASE(reductions) {
  G t;
  const NodeId x = t.in(D::f32, {2, 3});
  CHECK_KILN_ERROR(t.op(OpId::sum, {x}, {dims({2}), false}), "sum: dim 2 out of range for rank 2");
  CHECK_KILN_ERROR(t.op(OpId::sum, {x}, {dims({-1}), false}), "sum: dim -1 out of range");
  CHECK_KILN_ERROR(t.op(OpId::mean, {x}, {dims({1, 0}), false}), "mean: dims must be sorted and unique");
  CHECK_KILN_ERROR(t.op(OpId::prod, {x}, {dims({1, 1}), false}), "prod: dims must be sorted and unique");
  CHECK_KILN_ERROR(t.op(OpId::sum, {t.in(D::f32, {})}, {dims({0}), false}), "sum: dim 0 out of range for rank 0");
  CHECK_KILN_ERROR(t.op(OpId::argmax, {x}, {dims({0, 1}), false}), "argmax: takes at most one dim");
  CHECK_KILN_ERROR(t.op(OpId::argmin, {x}, {dims({0, 1}), true}), "argmin: takes at most one dim");
  CHECK_KILN_ERROR(t.op(OpId::var, {x}, {dims({0}), false, int64_t{-1}}), "var: correction");
  const NodeId e = t.in(D::f32, {0, 3});
  for (OpId op : {OpId::max, OpId::min, OpId::argmax, OpId::argmin}) {
    const std::string name(op_name(op));
    CHECK_KILN_ERROR(t.op(op, {e}, {dims({0}), false}), name + ": cannot reduce over an empty dimension");
    CHECK_KILN_ERROR(t.op(op, {e}, {dims({}), true}), name + ": cannot reduce over an empty dimension");
  }
}

BOOST_AUTO_TEST_CASE(layout) {
  G t;
  const NodeId x = t.in(D::f32, {2, 3});
  CHECK_KILN_ERROR(t.op(OpId::reshape, {x}, {SymShape{4, 2}}),
                   "reshape: cannot reshape [2, 3] (6 elements) into [4, 2] (8 elements)");
  CHECK_KILN_ERROR(t.op(OpId::reshape, {x}, {SymShape{-1, 6}}), "reshape: negative size");
  CHECK_KILN_ERROR(t.op(OpId::permute, {x}, {dims({0})}), "permute: dims [0] are not a permutation");
  CHECK_KILN_ERROR(t.op(OpId::permute, {x}, {dims({1, 1})}), "permute:");
  CHECK_KILN_ERROR(t.op(OpId::permute, {x}, {dims({0, 2})}), "permute:");
  CHECK_KILN_ERROR(t.op(OpId::transpose, {x}, {int64_t{0}, int64_t{2}}), "transpose: dim1 2 out of range for rank 2");
  CHECK_KILN_ERROR(t.op(OpId::expand, {x}, {SymShape{3}}), "expand: cannot expand [2, 3] to fewer dims [3]");
  CHECK_KILN_ERROR(t.op(OpId::expand, {x}, {SymShape{4, 3}}), "expand: cannot expand [2, 3] to [4, 3]",
                   "dim 0 has size 2, expected 4 or 1");
  CHECK_KILN_ERROR(t.op(OpId::squeeze, {x}, {dims({0})}), "squeeze: dim 0 of [2, 3] has size 2, not 1");
  CHECK_KILN_ERROR(t.op(OpId::squeeze, {x}, {dims({5})}), "squeeze: dim 5 out of range");
  CHECK_KILN_ERROR(t.op(OpId::unsqueeze, {x}, {int64_t{3}}), "unsqueeze: dim 3 out of range for rank 2");
  CHECK_KILN_ERROR(t.op(OpId::unsqueeze, {x}, {int64_t{-1}}), "unsqueeze: dim -1");
  CHECK_KILN_ERROR(t.op(OpId::slice, {x}, {int64_t{2}, int64_t{0}, kEnd, int64_t{1}}), "slice: dim 2 out of range");
  CHECK_KILN_ERROR(t.op(OpId::slice, {x}, {int64_t{0}, int64_t{0}, kEnd, int64_t{0}}), "slice: step must be >= 1");
  CHECK_KILN_ERROR(t.op(OpId::slice, {x}, {int64_t{0}, int64_t{0}, kEnd, int64_t{-1}}), "slice: step");
  CHECK_KILN_ERROR(t.op(OpId::cat, {x, t.in(D::f32, {2})}, {int64_t{0}}), "cat: input 1 has shape [2]");
  CHECK_KILN_ERROR(t.op(OpId::cat, {x, t.in(D::f32, {2, 4})}, {int64_t{0}}),
                   "cat: input 1 has shape [2, 4] but input 0 has shape [2, 3]", "except in dim 0");
  CHECK_KILN_ERROR(t.op(OpId::cat, {x, x}, {int64_t{2}}), "cat: dim 2 out of range");
  CHECK_KILN_ERROR(t.op(OpId::cat, {t.in(D::f32, {})}, {int64_t{0}}), "cat: dim 0 out of range for rank 0");
  CHECK_KILN_ERROR(t.op(OpId::pad, {x}, {dims({1}), 0.0}), "pad: pads [1] must be pairs");
  CHECK_KILN_ERROR(t.op(OpId::pad, {x}, {dims({0, 0, 0, 0, 1, 1}), 0.0}), "pad:", "at most the 2 dims");
  CHECK_KILN_ERROR(t.op(OpId::pad, {x}, {dims({-2, -2}), 0.0}), "pad:", "below size 0");
  CHECK_KILN_ERROR(t.op(OpId::index_select, {x, t.in(D::i64, {2, 2})}, {int64_t{0}}), "index_select: index must be 1-D");
  CHECK_KILN_ERROR(t.op(OpId::index_select, {x, t.in(D::f32, {2})}, {int64_t{0}}),
                   "index_select: index must be i32 or i64, got f32");
  CHECK_KILN_ERROR(t.op(OpId::index_select, {x, t.in(D::i32, {2})}, {int64_t{2}}), "index_select: dim 2 out of range");
  CHECK_KILN_ERROR(t.op(OpId::gather, {x, t.in(D::i64, {2})}, {int64_t{0}}), "gather: index [2] must have the rank of x");
  CHECK_KILN_ERROR(t.op(OpId::gather, {x, t.in(D::f32, {2, 2})}, {int64_t{0}}), "gather: index must be i32 or i64");
  CHECK_KILN_ERROR(t.op(OpId::gather, {x, t.in(D::i64, {3, 5})}, {int64_t{1}}), "gather: index [3, 5] is larger than x",
                   "at dim 0");
  CHECK_KILN_ERROR(t.op(OpId::gather, {t.in(D::f32, {}), t.in(D::i64, {})}, {int64_t{0}}), "gather: x must have at least one dim");
  const NodeId i = t.in(D::i64, {2, 2});
  CHECK_KILN_ERROR(t.op(OpId::scatter_add, {x, i, t.in(D::f32, {2, 3})}, {int64_t{0}}),
                   "scatter_add: src [2, 3] must have the index's shape [2, 2]");
  CHECK_KILN_ERROR(t.op(OpId::scatter_add, {x, i, t.in(D::f64, {2, 2})}, {int64_t{0}}), "scatter_add: src must have x's dtype f32");
  CHECK_KILN_ERROR(t.op(OpId::scatter_add, {x, t.in(D::f32, {2, 2}), t.in(D::f32, {2, 2})}, {int64_t{0}}),
                   "scatter_add: index must be i32 or i64");
  CHECK_KILN_ERROR(t.op(OpId::scatter_add, {x, t.in(D::i64, {2}), t.in(D::f32, {2})}, {int64_t{0}}),
                   "scatter_add: index [2] must have the rank of x");
  CHECK_KILN_ERROR(t.op(OpId::scatter_add, {x, t.in(D::i64, {9, 5}), t.in(D::f32, {9, 5})}, {int64_t{0}}),
                   "scatter_add: index [9, 5] is larger than x", "at dim 1");
  CHECK_KILN_ERROR(t.op(OpId::scatter_add, {t.in(D::bool_, {2, 2}), i, t.in(D::bool_, {2, 2})}, {int64_t{0}}),
                   "scatter_add: x must be a number tensor");
  CHECK_KILN_ERROR(t.op(OpId::scatter_add, {x, i, t.in(D::f32, {2, 2})}, {int64_t{2}}), "scatter_add: dim 2 out of range");
  CHECK_KILN_ERROR(t.op(OpId::scatter_reduce, {x, i, t.in(D::f32, {2, 2})}, {int64_t{0}, std::string("sum")}),
                   "scatter_reduce: reduce must be \"amax\", \"amin\" or \"prod\", got \"sum\"");
  CHECK_KILN_ERROR(t.op(OpId::scatter_reduce, {x, i, t.in(D::f32, {2, 3})}, {int64_t{0}, std::string("prod")}),
                   "scatter_reduce: src [2, 3] must have the index's shape [2, 2]");
  CHECK_KILN_ERROR(t.op(OpId::scatter_reduce, {t.in(D::bool_, {2, 2}), i, t.in(D::bool_, {2, 2})},
                        {int64_t{0}, std::string("amax")}),
                   "scatter_reduce: x must be a number tensor");
  CHECK_KILN_ERROR(t.op(OpId::flatten, {x}, {int64_t{1}, int64_t{0}}), "flatten: start_dim 1 is after end_dim 0");
  CHECK_KILN_ERROR(t.op(OpId::flatten, {x}, {int64_t{0}, int64_t{2}}), "flatten: end_dim 2 out of range");
  CHECK_KILN_ERROR(t.op(OpId::flatten, {t.in(D::f32, {})}, {int64_t{0}, int64_t{1}}), "flatten:");
}

BOOST_AUTO_TEST_CASE(composites) {
  G t;
  const NodeId x = t.in(D::f32, {2, 4});
  CHECK_KILN_ERROR(t.op(OpId::softmax, {x}, {int64_t{3}}), "softmax: dim 3 out of range for rank 2");
  CHECK_KILN_ERROR(t.op(OpId::log_softmax, {t.in(D::f32, {})}, {int64_t{0}}), "log_softmax: dim 0 out of range");
  CHECK_KILN_ERROR(t.op(OpId::logsumexp, {x}, {dims({2}), false}), "logsumexp: dim 2 out of range");
  CHECK_KILN_ERROR(t.op(OpId::layer_norm, {x}, {int64_t{0}, 1e-5}), "layer_norm: normalized_ndim 0 out of range");
  CHECK_KILN_ERROR(t.op(OpId::layer_norm, {x}, {int64_t{3}, 1e-5}), "layer_norm: normalized_ndim 3 out of range");
  CHECK_KILN_ERROR(t.op(OpId::layer_norm, {x}, {int64_t{1}, 0.0}), "layer_norm: eps must be positive");
  CHECK_KILN_ERROR(t.op(OpId::layer_norm, {x, t.in(D::f32, {3})}, {int64_t{1}, 1e-5}),
                   "layer_norm: weight shape [3] does not match the normalized dims [4]");
  CHECK_KILN_ERROR(t.op(OpId::layer_norm, {x, t.in(D::f32, {4}), t.in(D::f32, {2, 4})}, {int64_t{1}, 1e-5}),
                   "layer_norm: bias shape [2, 4]");
  CHECK_KILN_ERROR(t.op(OpId::rms_norm, {x}, {int64_t{1}, -1.0}), "rms_norm: eps must be positive");
  CHECK_KILN_ERROR(t.op(OpId::rms_norm, {x, t.in(D::f32, {2, 4})}, {int64_t{1}, 1e-6}), "rms_norm: weight shape");
  CHECK_KILN_ERROR(t.op(OpId::linear, {x, t.in(D::f32, {5, 3})}), "linear: x [2, 4] has 4 features but weight [5, 3] takes 3");
  CHECK_KILN_ERROR(t.op(OpId::linear, {x, t.in(D::f32, {4})}), "linear: expected x[..., in] and weight[out, in]");
  CHECK_KILN_ERROR(t.op(OpId::linear, {x, t.in(D::f32, {5, 4}), t.in(D::f32, {4})}), "linear: bias [4]");
  CHECK_KILN_ERROR(t.op(OpId::linear, {t.in(D::bool_, {4}), t.in(D::bool_, {5, 4})}), "linear: bool");
}

BOOST_AUTO_TEST_CASE(matmul) {
  G t;
  CHECK_KILN_ERROR(t.op(OpId::matmul, {t.in(D::f32, {2, 3}), t.in(D::f32, {4, 5})}),
                   "matmul: inner dimensions differ: [2, 3] @ [4, 5]");
  CHECK_KILN_ERROR(t.op(OpId::matmul, {t.in(D::f32, {3}), t.in(D::f32, {4})}), "matmul: inner dimensions differ");
  CHECK_KILN_ERROR(t.op(OpId::matmul, {t.in(D::f32, {}), t.in(D::f32, {4})}), "matmul: operands must have at least 1 dim");
  CHECK_KILN_ERROR(t.op(OpId::matmul, {t.in(D::bool_, {2, 2}), t.in(D::bool_, {2, 2})}), "matmul: bool");
  CHECK_KILN_ERROR(t.op(OpId::matmul, {t.in(D::f32, {2, 2, 3}), t.in(D::f32, {3, 3, 4})}),
                   "matmul: shapes [2] and [3] do not broadcast");
}

BOOST_AUTO_TEST_CASE(graph_add_checks_arity_and_attr_kinds) {
  G t;
  const NodeId x = t.in(D::f32, {2});
  CHECK_KILN_ERROR(t.op(OpId::add, {x}), "add:");
  CHECK_KILN_ERROR(t.op(OpId::sum, {x}, {dims({0})}), "sum:");
  CHECK_KILN_ERROR(t.op(OpId::sum, {x}, {int64_t{0}, false}), "sum:", "dims");
}

BOOST_AUTO_TEST_SUITE_END()
