// Lossless round trips: one graph per op in the op table, symbolic sizes and facts,
// constants of every dtype, non-finite floats, names, devices and strides.
#include <sys/stat.h>

#include <fstream>
#include <cmath>
#include <cstring>
#include <limits>
#include <cstdio>
#include <memory>

#include "helpers.h"
#include "kiln/graph/custom_ops.h"
#include "kiln/graph/memory_budget.h"

using namespace kiln;
using format_test::check_round_trip;
using format_test::meta;

namespace {

using Ints = std::vector<int64_t>;

std::shared_ptr<const ConstantData> constant_of(DType t, Ints sizes, const std::vector<double>& values) {
  auto c = std::make_shared<ConstantData>();
  c->dtype = t;
  c->sizes = std::move(sizes);
  const size_t es = static_cast<size_t>(dtype_size(t));
  c->bytes.resize(values.size() * es);
  for (size_t i = 0; i < values.size(); ++i) {
    std::byte* p = c->bytes.data() + i * es;
    const double v = values[i];
    switch (t) {
      case DType::bool_: { uint8_t b = v != 0; std::memcpy(p, &b, 1); break; }
      case DType::i32: { int32_t x = static_cast<int32_t>(v); std::memcpy(p, &x, 4); break; }
      case DType::i64: { int64_t x = static_cast<int64_t>(v); std::memcpy(p, &x, 8); break; }
      case DType::f16: { uint16_t x = float_to_half_bits(static_cast<float>(v)); std::memcpy(p, &x, 2); break; }
      case DType::bf16: { uint16_t x = float_to_bf16_bits(static_cast<float>(v)); std::memcpy(p, &x, 2); break; }
      case DType::f32: { float x = static_cast<float>(v); std::memcpy(p, &x, 4); break; }
      case DType::f64: std::memcpy(p, &v, 8); break;
    }
  }
  return c;
}

// A small graph that uses `op` once (symbolic where the op allows it): x is f32[s0, 6].
Graph op_use(OpId op) {
  Graph g;
  const SymInt s0 = g.shapes().create_symbol(3, 2, 1 << 20, "input 0 (x) dim 0", false);
  const NodeId x = g.add_input(meta(DType::f32, {s0, 6}), "x");
  const NodeId row = g.add_input(meta(DType::f32, {6}), "row");
  const NodeId mask = g.add_input(meta(DType::bool_, {s0, 6}), "mask");
  NodeId y = -1;
  auto one = [&](Attrs a = {}) { return g.add(op, {x}, std::move(a)); };
  switch (op) {
    case OpId::input: y = x; break;
    case OpId::constant: y = g.add(op, {}, {constant_of(DType::f32, {2, 2}, {1, -2.5, 0.1, 1e30})}); break;
    case OpId::full: y = g.add(op, {}, {SymShape{s0, 2}, 1.5, DType::f16}); break;
    case OpId::arange: y = g.add(op, {}, {0.0, 10.0, 3.0, DType::i64}); break;
    case OpId::iota: y = g.add(op, {}, {SymShape{s0, 4}, int64_t{1}, DType::i32}); break;
    case OpId::tril: case OpId::triu: y = one({int64_t{-1}}); break;
    case OpId::cumsum: y = one({int64_t{0}, true, false}); break;
    case OpId::cumprod: y = one({int64_t{0}, false, true}); break;
    case OpId::sort: case OpId::argsort: y = one({int64_t{1}, true}); break;
    case OpId::randn: y = g.add(op, {}, {SymShape{s0, 5}, int64_t{42}, DType::bf16}); break;
    case OpId::rand: {  // with a run-time key
      const NodeId key = g.add_input(meta(DType::i64, {}), "key");
      y = g.add(op, {key}, {SymShape{s0, 5}, int64_t{-7}, DType::f32});
      break;
    }
    case OpId::philox: {
      const NodeId key = g.add_input(meta(DType::i64, {}), "key");
      y = g.add(op, {key, g.add(OpId::iota, {}, {SymShape{s0, 4}, int64_t{0}, DType::i64})}, {int64_t{3}, int64_t{1} << 40});
      break;
    }
    case OpId::neg: case OpId::abs: case OpId::exp: case OpId::log: case OpId::sqrt: case OpId::rsqrt:
    case OpId::reciprocal: case OpId::sin: case OpId::cos: case OpId::tanh: case OpId::sigmoid: case OpId::relu:
    case OpId::silu: case OpId::erf: case OpId::floor: case OpId::ceil: case OpId::round: case OpId::sign:
    case OpId::logical_not: case OpId::isnan:
      y = one();
      break;
    case OpId::gelu: y = one({std::string("tanh")}); break;
    case OpId::cast: y = one({DType::i32}); break;
    case OpId::add: case OpId::sub: case OpId::mul: case OpId::div: case OpId::pow: case OpId::maximum:
    case OpId::minimum: case OpId::eq: case OpId::ne: case OpId::lt: case OpId::le: case OpId::gt: case OpId::ge:
      y = g.add(op, {x, row});
      break;
    case OpId::logical_and: case OpId::logical_or: y = g.add(op, {mask, x}); break;
    case OpId::where: y = g.add(op, {mask, x, row}); break;
    case OpId::sum: case OpId::mean: case OpId::max: case OpId::min: case OpId::prod: case OpId::logsumexp:
      y = one({Ints{1}, true});
      break;
    case OpId::argmax: case OpId::argmin: y = one({Ints{0}, false}); break;
    case OpId::var: y = one({Ints{0, 1}, false, int64_t{1}}); break;
    case OpId::reshape: y = one({SymShape{s0, 2, 3}}); break;
    case OpId::permute: y = one({Ints{1, 0}}); break;
    case OpId::transpose: y = one({int64_t{0}, int64_t{1}}); break;
    case OpId::expand: y = g.add(op, {row}, {SymShape{s0, 6}}); break;
    case OpId::squeeze: {
      const NodeId u = g.add(OpId::unsqueeze, {x}, {int64_t{1}});
      y = g.add(op, {u}, {Ints{1}});
      break;
    }
    case OpId::unsqueeze: y = one({int64_t{2}}); break;
    case OpId::slice: y = one({int64_t{1}, int64_t{1}, int64_t{5}, int64_t{2}}); break;
    case OpId::unfold: y = one({int64_t{1}, int64_t{2}, int64_t{1}}); break;
    case OpId::cat: y = g.add(op, {x, x, x}, {int64_t{0}}); break;
    case OpId::pad: y = one({Ints{1, 2, 0, 1}, -std::numeric_limits<double>::infinity()}); break;
    case OpId::index_select: {
      const NodeId idx = g.add_input(meta(DType::i64, {4}), "idx");
      y = g.add(op, {x, idx}, {int64_t{1}});
      break;
    }
    case OpId::gather: {
      const NodeId idx = g.add_input(meta(DType::i32, {s0, 5}), "idx");
      y = g.add(op, {x, idx}, {int64_t{1}});
      break;
    }
    case OpId::scatter:
    case OpId::scatter_add: {
      const NodeId idx = g.add_input(meta(DType::i32, {s0, 5}), "idx");
      const NodeId src = g.add_input(meta(DType::f32, {s0, 5}), "src");
      y = g.add(op, {x, idx, src}, {int64_t{1}});
      break;
    }
    case OpId::scatter_reduce: {
      const NodeId idx = g.add_input(meta(DType::i32, {s0, 5}), "idx");
      const NodeId src = g.add_input(meta(DType::f32, {s0, 5}), "src");
      y = g.add(op, {x, idx, src}, {int64_t{1}, std::string("amax")});
      break;
    }
    case OpId::flatten: y = one({int64_t{0}, int64_t{1}}); break;
    case OpId::softmax: case OpId::log_softmax: y = one({int64_t{1}}); break;
    case OpId::layer_norm: {
      const NodeId w = g.add_input(meta(DType::f32, {6}), "w");
      y = g.add(op, {x, w, row}, {int64_t{1}, 1e-5});
      break;
    }
    case OpId::rms_norm: y = g.add(op, {x, row}, {int64_t{1}, 1e-6}); break;
    case OpId::linear: {
      const NodeId w = g.add_input(meta(DType::f32, {5, 6}), "w");
      const NodeId b = g.add_input(meta(DType::f32, {5}), "b");
      y = g.add(op, {x, w, b});
      break;
    }
    case OpId::matmul: {
      const NodeId w = g.add_input(meta(DType::f32, {6, 5}), "w");
      y = g.add(op, {x, w});
      break;
    }
    case OpId::custom: {  // a registered op's name, version and config travel as attributes
      CustomOpDef d;
      d.name = "roundtrip::rows";
      d.version = "v 1.2 \"quoted\"";
      d.min_inputs = 2;
      d.max_inputs = -1;
      d.infer = [](std::span<const TensorMeta* const> in, const std::string&, ShapeEnv&) {
        return TensorMeta{DType::i64, in[0]->device, {in[0]->sizes[0]}, {}};
      };
      d.compute = [](std::span<const TensorData>, const std::string&, const TensorData&) {};
      register_custom_op(d);
      y = g.add(op, {x, row, mask}, {std::string("roundtrip::rows"), d.version, std::string("a=1\nb=\u00e9")});
      break;
    }
    case OpId::scaled_dot_product_attention: {
      const NodeId k = g.add_input(meta(DType::f32, {7, 6}), "k");
      const NodeId v = g.add_input(meta(DType::f32, {7, 3}), "v");
      y = g.add(op, {x, k, v}, {0.125});
      break;
    }
    case OpId::convolution: {  // x [s0, 6] as a 1-D signal of 6 channels and length 1
      const NodeId sig = g.add(OpId::unsqueeze, {x}, {int64_t{2}});
      const NodeId w = g.add_input(meta(DType::f32, {4, 3, 1}), "w");
      const NodeId b = g.add_input(meta(DType::f32, {4}), "b");
      y = g.add(op, {sig, w, b}, {Ints{1}, Ints{0, 0}, Ints{1}, int64_t{2}});
      break;
    }
    case OpId::convolution_channels_last: {  // x [s0, 6] as a 1-D signal of length 1 and 6 channels
      const NodeId sig = g.add(OpId::unsqueeze, {x}, {int64_t{1}});
      const NodeId w = g.add_input(meta(DType::f32, {4, 1, 3}), "w");
      y = g.add(op, {sig, w}, {Ints{1}, Ints{0, 0}, Ints{1}, int64_t{2}});
      break;
    }
    case OpId::convolution_input_grad: {  // x [s0, 6] as the gradient of a 1-D output of 6 channels, length 1
      const NodeId gy = g.add(OpId::unsqueeze, {x}, {int64_t{2}});
      const NodeId w = g.add_input(meta(DType::f32, {6, 2, 3}), "w");
      y = g.add(op, {gy, w}, {Ints{2}, Ints{1, 1}, Ints{1}, int64_t{2}, Ints{2}, false});
      break;
    }
    case OpId::convolution_weight_grad: {  // x [s0, 6] as channels-last [s0, 1, 6], gy [s0, 1, 4]
      const NodeId sig = g.add(OpId::unsqueeze, {x}, {int64_t{1}});
      const NodeId gy = g.add_input(meta(DType::f32, {s0, 1, 4}), "gy");
      y = g.add(op, {sig, gy}, {Ints{1}, Ints{0, 0}, Ints{1}, int64_t{2}, Ints{1}, true});
      break;
    }
    case OpId::max_pool: case OpId::avg_pool: {  // x [s0, 6] as [s0, 2, 3]: 2 channels of length 3
      const NodeId sig = g.add(OpId::reshape, {x}, {SymShape{s0, 2, 3}});
      Attrs a{Ints{2}, Ints{2}, Ints{1, 0}, Ints{1}, true};
      if (op == OpId::avg_pool) a.values.push_back(false);
      y = g.add(op, {sig}, a);
      break;
    }
    case OpId::batch_norm: {
      const NodeId m = g.add_input(meta(DType::f32, {6}), "mean");
      y = g.add(op, {x, m, m, row}, {1e-5});
      break;
    }
    case OpId::group_norm: {
      const NodeId sig = g.add(OpId::unsqueeze, {x}, {int64_t{2}});
      y = g.add(op, {sig}, {int64_t{3}, 1e-5});
      break;
    }
  }
  BOOST_REQUIRE_MESSAGE(y >= 0, "no sample use of op " << op_name(op));
  g.set_outputs({y, x});
  return g;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(round_trip)

BOOST_AUTO_TEST_CASE(every_op) {
  for (const OpDef& def : all_ops()) {
    BOOST_TEST_CONTEXT("op " << def.name) {
      Graph g;
      try {
        g = op_use(def.id);
      } catch (const Error& e) {
        BOOST_ERROR("building a use of " << def.name << " failed: " << e.what());
        continue;
      }
      BOOST_TEST((g.node(g.outputs()[0]).op == def.id));
      check_round_trip(g, std::string(def.name));
    }
  }
}

BOOST_AUTO_TEST_CASE(empty_graph) {
  check_round_trip(Graph{}, "empty");
  BOOST_TEST(format::to_json(Graph{}, -1) ==
             R"({"format":"kiln.graph","version":1,"symbols":[],"facts":[],"nodes":[],"outputs":[]})");
}

BOOST_AUTO_TEST_CASE(symbols_and_facts) {
  Graph g;
  const SymInt a = g.shapes().create_symbol(2048, 2, std::numeric_limits<int64_t>::max(), "input 0 (x) dim 0", false);
  const SymInt b = g.shapes().create_symbol(2048, 2, 4096, "input 1 (y) dim 0", true);
  const SymInt c = g.shapes().create_symbol(7, 3, 100, "input 1 (y) dim 1", false);
  const NodeId x = g.add_input(meta(DType::f32, {a, 4}), "x");
  const NodeId y = g.add_input(meta(DType::f16, {b, c}), "y");
  const NodeId s = g.add(OpId::add, {x, g.add(OpId::sum, {y}, {Ints{1}, true})});  // a == b becomes a fact
  const NodeId r = g.add(OpId::reshape, {s}, {SymShape{a * 2, SymInt(2)}});
  g.shapes().add_fact({c.expr(), SymExpr::constant(5), Relation::ne, "hand-made"});
  g.set_outputs({r, s});
  BOOST_TEST(!g.shapes().facts().empty());
  check_round_trip(g, "symbols_and_facts");
  const std::string text = format::to_json(g);
  BOOST_TEST(text.find("\"user_dynamic\": true") != std::string::npos);
  BOOST_TEST(text.find("\"2*s0\"") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(constants_of_every_dtype) {
  for (int k = 0; k < kNumDTypes; ++k) {
    const DType t = static_cast<DType>(k);
    BOOST_TEST_CONTEXT("dtype " << dtype_name(t)) {
      Graph g;
      std::vector<double> values = {0, 1, -2, 3, 1, 0};
      if (is_floating(t))
        values = {0.5, -0.0, std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                  std::numeric_limits<double>::quiet_NaN(), 1e-3};
      if (t == DType::bool_) values = {0, 1, 1, 0, 1, 0};
      const NodeId a = g.add(OpId::constant, {}, {constant_of(t, {2, 3}, values)});
      const NodeId b = g.add(OpId::constant, {}, {constant_of(t, {}, {values[1]})});
      const NodeId e = g.add(OpId::constant, {}, {constant_of(t, {0, 4}, {})});
      g.set_outputs({a, b, e});
      check_round_trip(g, "constant " + std::string(dtype_name(t)));
      // The bytes survive exactly (NaN payloads included).
      const Graph back = format::from_json(format::to_json(g));
      BOOST_TEST((back.node(a).attrs.tensor(0).bytes == g.node(a).attrs.tensor(0).bytes));
    }
  }
}

BOOST_AUTO_TEST_CASE(non_finite_float_attributes) {
  for (double v : {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                   std::numeric_limits<double>::quiet_NaN(), -0.0, 0.1, 1e-310, 1.7976931348623157e308}) {
    Graph g;
    const NodeId f = g.add(OpId::full, {}, {SymShape{2}, v, DType::f64});
    g.set_outputs({f});
    check_round_trip(g, "full value " + std::to_string(v));
    const Graph back = format::from_json(format::to_json(g));
    const double got = back.node(f).attrs.f(1);
    if (std::isnan(v)) {
      BOOST_TEST(std::isnan(got));
    } else {
      BOOST_TEST(std::memcmp(&got, &v, sizeof v) == 0);
    }
  }
  Graph g;
  g.set_outputs({g.add(OpId::full, {}, {SymShape{1}, std::numeric_limits<double>::infinity(), DType::f32})});
  BOOST_TEST(format::to_json(g).find("\"inf\"") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(names_devices_and_strides) {
  Graph g;
  TensorMeta m = meta(DType::f32, {4, 3});
  m.strides = {SymInt(1), SymInt(4)};
  const NodeId x = g.add_input(m, "x \"quoted\" \u00e9");
  TensorMeta c = meta(DType::f16, {3});
  c.device = Device::cuda(1);
  const NodeId y = g.add_input(c, "");
  const NodeId z = g.add(OpId::neg, {y});
  g.set_outputs({x, z, z});
  check_round_trip(g, "names_devices_and_strides");
  const std::string text = format::to_json(g);
  BOOST_TEST(text.find("\"device\": \"cuda:1\"") != std::string::npos);
  BOOST_TEST(text.find("\"strides\": [1, 4]") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(deterministic_layout) {
  Graph g;
  const NodeId x = g.add_input(meta(DType::f32, {2, 3}), "x");
  g.set_outputs({g.add(OpId::softmax, {x}, {int64_t{1}})});
  const std::string want =
      "{\n"
      "  \"format\": \"kiln.graph\",\n"
      "  \"version\": 1,\n"
      "  \"symbols\": [],\n"
      "  \"facts\": [],\n"
      "  \"nodes\": [\n"
      "    {\"id\": 0, \"op\": \"input\", \"name\": \"x\", \"attrs\": {\"index\": 0}, \"type\": {\"dtype\": \"f32\", "
      "\"shape\": [2, 3], \"device\": \"cpu\"}},\n"
      "    {\"id\": 1, \"op\": \"softmax\", \"inputs\": [0], \"attrs\": {\"dim\": 1}, \"type\": {\"dtype\": \"f32\", "
      "\"shape\": [2, 3], \"device\": \"cpu\"}}\n"
      "  ],\n"
      "  \"outputs\": [1]\n"
      "}";
  BOOST_TEST(format::to_json(g) == want);
  BOOST_TEST(format::to_json(g) == format::to_json(g));
}

BOOST_AUTO_TEST_CASE(hand_written_files_may_leave_out_defaults) {
  // No "type" on non-input nodes, no input index, symbols with only an example, a constant
  // fact side written as an integer: all accepted.
  const std::string text = R"({"format": "kiln.graph", "version": 1,
    "symbols": [{"name": "s0", "example": 5}],
    "facts": [{"lhs": "s0", "rhs": 1, "equal": false}],
    "nodes": [{"id": 0, "op": "input", "type": {"dtype": "f32", "shape": ["s0", 3]}},
              {"id": 1, "op": "relu", "name": "act", "inputs": [0]}],
    "outputs": [1]})";
  const Graph g = format::from_json(text);
  BOOST_TEST(g.size() == 2u);
  BOOST_TEST(g.node(1).meta.str() == "f32[s0, 3]");
  BOOST_TEST(g.shapes().symbol(0).min == 2);
  BOOST_TEST(g.node(1).name == "act");  // names on non-input nodes survive too
  check_round_trip(g, "hand-written");
}

BOOST_AUTO_TEST_CASE(files) {
  Graph g;
  const NodeId x = g.add_input(meta(DType::i32, {3}), "x");
  g.set_outputs({g.add(OpId::abs, {x})});
  const std::string path = "test_format_files.json";
  format::save_graph(g, path);
  BOOST_TEST((format::load_graph(path) == g));
  std::remove(path.c_str());
  BOOST_CHECK_EXCEPTION(format::load_graph("/nonexistent/dir/g.json"), Error, [](const Error& e) {
    return std::string(e.what()).find("cannot open graph file '/nonexistent/dir/g.json'") != std::string::npos;
  });
  BOOST_CHECK_EXCEPTION(format::load_graph("/dev/zero"), Error, [](const Error& e) {
    return std::string(e.what()).find("graph file '/dev/zero' is not a regular file (a character device)") != std::string::npos;
  });
  // A FIFO is refused without waiting for a writer (issue 31: it hung the load).
  const std::string fifo = "test_format_files.fifo";
  std::remove(fifo.c_str());
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  BOOST_CHECK_EXCEPTION(format::load_graph(fifo), Error, [&](const Error& e) {
    return std::string(e.what()).find("graph file '" + fifo + "' is not a regular file (a FIFO)") != std::string::npos;
  });
  std::remove(fifo.c_str());
  // A file larger than the memory budget is refused before it is read.
  {
    std::ofstream big(path, std::ios::binary);
    big << std::string(3 << 20, ' ');
  }
  set_memory_budget_source([] { return int64_t{2}; });  // 2 MiB (sdk/config is not linked here)
  BOOST_CHECK_EXCEPTION(format::load_graph(path), Error, [&](const Error& e) {
    return std::string(e.what()).find("graph file '" + path + "' is 3.0 MiB, more than the memory budget of 2.0 MiB") !=
           std::string::npos;
  });
  set_memory_budget_source(nullptr);
  std::remove(path.c_str());
}

BOOST_AUTO_TEST_SUITE_END()
