// Unit tests of the ONNX loader (frontends/onnx): models built here with ONNX's protobuf classes,
// written to a temporary directory, loaded and run on the reference interpreter and through
// kiln::onnx::compile (cpu), checked against values computed by hand.
#define BOOST_TEST_MODULE onnx_loader
#include <boost/test/unit_test.hpp>

#include "kiln/graph/custom_ops.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include <unistd.h>

#include "kiln/config/config.h"
#include "kiln/graph/error.h"
#include "kiln_test_util.h"
#include "kiln/onnx/onnx.h"
#include "kiln/eval/interpreter.h"
#include "kiln/target/target.h"
#include "kiln/tensor.h"
#include "onnx/onnx_pb.h"

namespace fs = std::filesystem;
using kiln::DType;
using kiln::Error;
using kiln::Tensor;
using kiln::TensorData;
using kiln::TensorMeta;
namespace eval = kiln::eval;
namespace konnx = kiln::onnx;
namespace target = kiln::target;
using kiln_test_util::error_of;
namespace pb = ::onnx;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("kiln_onnx_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

pb::ModelProto model(int64_t opset = 13) {
  pb::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("kiln-test");
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  return m;
}

// A tensor input/output: dims > 0 are sizes, -1 unknown, and names give dim_params.
void value(pb::ValueInfoProto* v, const std::string& name, int elem, const std::vector<std::string>& dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem);
  auto* shape = t->mutable_shape();
  for (const std::string& d : dims) {
    auto* dim = shape->add_dim();
    if (d == "?") continue;
    if (std::isdigit(static_cast<unsigned char>(d[0]))) dim->set_dim_value(std::stoll(d));
    else dim->set_dim_param(d);
  }
}

pb::NodeProto* node(pb::GraphProto* g, const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
                    const std::string& name = "") {
  pb::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

void ints_attr(pb::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

void int_attr(pb::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto::INT);
  a->set_i(v);
}

void string_attr(pb::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto::STRING);
  a->set_s(v);
}

pb::TensorProto floats(const std::string& name, std::vector<int64_t> dims, std::vector<float> v) {
  pb::TensorProto t;
  t.set_name(name);
  t.set_data_type(pb::TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  for (float x : v) t.add_float_data(x);
  return t;
}

pb::TensorProto int64s(const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> v) {
  pb::TensorProto t;
  t.set_name(name);
  t.set_data_type(pb::TensorProto::INT64);
  for (int64_t d : dims) t.add_dims(d);
  for (int64_t x : v) t.add_int64_data(x);
  return t;
}

std::string save(const TempDir& dir, const pb::ModelProto& m, const std::string& file = "model.onnx") {
  const std::string path = (dir.path / file).string();
  std::ofstream f(path, std::ios::binary);
  BOOST_REQUIRE(m.SerializeToOstream(&f));
  return path;
}

TensorData host(std::vector<int64_t> sizes, std::vector<float> v) {
  TensorData t = TensorData::empty_host(DType::f32, std::move(sizes));
  BOOST_REQUIRE_EQUAL(t.numel(), static_cast<int64_t>(v.size()));
  std::memcpy(t.data(), v.data(), v.size() * sizeof(float));
  return t;
}

std::vector<float> values(const TensorData& t) {
  const TensorData c = eval::contiguous(t);
  return {c.data_as<float>(), c.data_as<float>() + c.numel()};
}

void check_contains(const std::string& text, const std::string& part) {
  BOOST_TEST(kiln_test_util::contains(text, part), "message: " << text);
}

// y = Relu(x @ W + b) with W and b initializers, x: [batch, 3] with batch a dim_param.
pb::ModelProto mlp() {
  pb::ModelProto m = model();
  pb::GraphProto* g = m.mutable_graph();
  value(g->add_input(), "x", pb::TensorProto::FLOAT, {"batch", "3"});
  value(g->add_output(), "y", pb::TensorProto::FLOAT, {"batch", "2"});
  *g->add_initializer() = floats("W", {3, 2}, {1, 0, 0, 1, 1, -1});
  *g->add_initializer() = floats("b", {2}, {0.5f, -0.5f});
  node(g, "MatMul", {"x", "W"}, {"xw"});
  node(g, "Add", {"xw", "b"}, {"z"});
  node(g, "Relu", {"z"}, {"y"});
  return m;
}

}  // namespace

BOOST_AUTO_TEST_CASE(initializers_and_named_inputs) {
  TempDir dir;
  const konnx::Model m = konnx::load(save(dir, mlp()));
  BOOST_CHECK_EQUAL(m.input_names.size(), 1u);
  BOOST_CHECK_EQUAL(m.input_names[0], "x");
  BOOST_CHECK_EQUAL(m.output_names[0], "y");
  BOOST_CHECK_EQUAL(m.opset, 13);
  // The dim_param is a size symbol: the graph serves every batch size.
  BOOST_CHECK(m.graph.node(m.graph.inputs()[0]).meta.sizes[0].is_symbolic());
  for (int64_t batch : {2, 5}) {
    std::vector<float> x;
    for (int64_t k = 0; k < batch * 3; ++k) x.push_back(static_cast<float>(k % 4) - 1.0f);
    const std::vector<TensorData> out = eval::run_graph(m.graph, std::vector<TensorData>{host({batch, 3}, x)});
    const std::vector<float> y = values(out[0]);
    BOOST_REQUIRE_EQUAL(y.size(), static_cast<size_t>(batch * 2));
    for (int64_t r = 0; r < batch; ++r) {
      const float* xr = &x[static_cast<size_t>(r * 3)];
      BOOST_CHECK_CLOSE(y[static_cast<size_t>(r * 2)], std::max(0.0f, xr[0] + xr[2] + 0.5f), 1e-4);
      BOOST_CHECK_CLOSE(y[static_cast<size_t>(r * 2 + 1)], std::max(0.0f, xr[1] - xr[2] - 0.5f), 1e-4);
    }
  }
}

// Nodes are named after their ONNX nodes and module scopes: PyTorch's exporter's
// "pkg.torch.onnx.name_scopes" metadata (NodeProto field 9, newer than Debian's onnx.proto), or a
// TorchScript-exporter name already '/'-scoped; what is not a Python list of strings is no scope.
BOOST_AUTO_TEST_CASE(nodes_are_named_after_their_module_scopes) {
  TempDir dir;
  pb::ModelProto m = mlp();
  auto scopes = [](pb::NodeProto* n, const std::string& value) {
    pb::StringStringEntryProto e;
    e.set_key("pkg.torch.onnx.name_scopes");
    e.set_value(value);
    n->mutable_unknown_fields()->AddLengthDelimited(9, e.SerializeAsString());
  };
  pb::GraphProto* g = m.mutable_graph();
  g->mutable_node(0)->set_name("node_MatMul_0");
  scopes(g->mutable_node(0), "['', 'inner', 'inner.layers.0', \"inner.layers.0.it's\", 'matmul']");
  g->mutable_node(1)->set_name("/inner/layers.1/Add");
  g->mutable_node(2)->set_name("node_Relu_2");
  scopes(g->mutable_node(2), "['', 'inner', 'relu'");  // unterminated: no scope
  const konnx::Model im = konnx::load(save(dir, m));
  std::vector<std::string> names;
  for (const kiln::Node& n : im.graph.nodes())
    if (n.op != kiln::OpId::input && n.op != kiln::OpId::constant) names.push_back(n.name);
  BOOST_TEST(names == (std::vector<std::string>{"inner/layers.0/it's/node_MatMul_0", "inner/layers.1/Add", "node_Relu_2"}),
             im.graph.str());
}

BOOST_AUTO_TEST_CASE(compile_serves_every_batch_size_on_cpu) {
  TempDir dir;
  const konnx::CompiledModel f = konnx::compile(save(dir, mlp()));
  for (int64_t batch : {1, 3, 7}) {
    std::vector<float> x(static_cast<size_t>(batch * 3), 1.0f);
    const std::vector<Tensor> out = f({Tensor::from_data(host({batch, 3}, x))});
    BOOST_REQUIRE_EQUAL(out.size(), 1u);
    BOOST_CHECK(out[0].data().sizes == (std::vector<int64_t>{batch, 2}));
    // Every row of ones: relu([1, 1, 1] @ W + b) = relu([2.5, -0.5]) = [2.5, 0].
    std::vector<float> want;
    for (int64_t r = 0; r < batch; ++r) want.insert(want.end(), {2.5f, 0.0f});
    BOOST_TEST(values(out[0].data()) == want, boost::test_tools::per_element());
  }
}

// On a Vulkan device (lavapipe in CI) where there is one: the weights become graph inputs
// moved to the device once, the outputs stay there.
BOOST_AUTO_TEST_CASE(compile_runs_on_vulkan_where_there_is_a_device) {
  try {
    (void)Tensor::from_data(TensorData::empty_host(DType::f32, {1})).to(kiln::Device::vulkan(0));
  } catch (const Error& e) {
    BOOST_TEST_MESSAGE("skipped: " << e.what());
    return;
  }
  TempDir dir;
  const konnx::CompiledModel f = konnx::compile(save(dir, mlp()));
  for (int64_t batch : {2, 5}) {
    std::vector<float> x;
    for (int64_t k = 0; k < batch * 3; ++k) x.push_back(static_cast<float>(k % 5) - 2.0f);
    const std::vector<Tensor> out = f({Tensor::from_data(host({batch, 3}, x)).to(kiln::Device::vulkan(0))});
    BOOST_CHECK(out[0].data().device() == kiln::Device::vulkan(0));
    const std::vector<float> y = values(out[0].to(kiln::Device::cpu()).data());
    const std::vector<float> want =
        values(f({Tensor::from_data(host({batch, 3}, x))})[0].data());
    BOOST_CHECK(y == want);
  }
}

// Shape -> Gather -> Unsqueeze -> Concat -> Reshape over a dynamic dim, as exporters write it:
// y = Reshape(x, [batch, -1]) with x: [batch, 2, 3].
BOOST_AUTO_TEST_CASE(shape_arithmetic_over_dynamic_dims_stays_symbolic) {
  TempDir dir;
  pb::ModelProto m = model();
  pb::GraphProto* g = m.mutable_graph();
  value(g->add_input(), "x", pb::TensorProto::FLOAT, {"N", "2", "3"});
  value(g->add_output(), "y", pb::TensorProto::FLOAT, {"N", "6"});
  *g->add_initializer() = int64s("zero", {}, {0});
  *g->add_initializer() = int64s("axes0", {1}, {0});
  *g->add_initializer() = int64s("minus1", {1}, {-1});
  node(g, "Shape", {"x"}, {"s"});
  node(g, "Gather", {"s", "zero"}, {"n"});
  node(g, "Unsqueeze", {"n", "axes0"}, {"n1"});
  node(g, "Concat", {"n1", "minus1"}, {"shape"});
  int_attr(g->mutable_node(3), "axis", 0);
  node(g, "Reshape", {"x", "shape"}, {"y"});
  const konnx::Model im = konnx::load(save(dir, m));
  const TensorMeta& out = im.graph.node(im.graph.outputs()[0]).meta;
  BOOST_REQUIRE_EQUAL(out.rank(), 2);
  BOOST_CHECK(out.sizes[0].is_symbolic());
  BOOST_CHECK(out.sizes[1] == 6);
  // Nothing of the shape computation is left in the graph: input, reshape.
  BOOST_CHECK_EQUAL(im.graph.op_count(), 1u);
  std::vector<float> x(24);
  for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(k);
  const std::vector<TensorData> r = eval::run_graph(im.graph, std::vector<TensorData>{host({4, 2, 3}, x)});
  BOOST_CHECK(r[0].sizes == (std::vector<int64_t>{4, 6}));
  BOOST_CHECK(values(r[0]) == x);
}

// TopK and Slice along a dynamic dim keep it symbolic: TopK's k and a slice's start are facts
// (s0 >= 4, s0 >= 3) checked at run time, not a size pinned at the example's.
BOOST_AUTO_TEST_CASE(top_k_and_slices_along_a_dynamic_dim_stay_symbolic) {
  TempDir dir;
  pb::ModelProto m = model();
  pb::GraphProto* g = m.mutable_graph();
  value(g->add_input(), "x", pb::TensorProto::FLOAT, {"N", "3"});
  value(g->add_output(), "values", pb::TensorProto::FLOAT, {});
  value(g->add_output(), "indices", pb::TensorProto::INT64, {});
  value(g->add_output(), "rest", pb::TensorProto::FLOAT, {});
  *g->add_initializer() = int64s("k", {1}, {4});
  *g->add_initializer() = int64s("one", {1}, {1});
  *g->add_initializer() = int64s("end", {1}, {std::numeric_limits<int64_t>::max()});
  *g->add_initializer() = int64s("axis0", {1}, {0});
  node(g, "TopK", {"x", "k"}, {"values", "indices"});
  int_attr(g->mutable_node(0), "axis", 0);
  node(g, "Slice", {"x", "one", "end", "axis0"}, {"rest"});
  konnx::LoadOptions o;
  o.example_sizes["x"] = {6, 3};
  const konnx::Model im = konnx::load(save(dir, m), o);
  auto sizes = [&](size_t k) { return shape_str(im.graph.node(im.graph.outputs()[k]).meta.sizes); };
  BOOST_TEST(sizes(0) == "[4, 3]");
  BOOST_TEST(sizes(2) == "[s0 - 1, 3]");
  std::string facts;
  for (const kiln::ShapeFact& f : im.graph.shapes().facts()) facts += f.str() + " (" + f.reason + "); ";
  BOOST_TEST(facts == "s0 >= 4 (TopK); s0 >= 3 (slice); ", im.graph.str());
  const konnx::CompiledModel f = konnx::compile(save(dir, m));
  for (int64_t n : {5, 9}) {
    std::vector<float> x(static_cast<size_t>(n * 3));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 11) - 5.0f;
    for (const std::vector<TensorData>& out :
         {eval::run_graph(im.graph, std::vector<TensorData>{host({n, 3}, x)}), f.run(std::vector<TensorData>{host({n, 3}, x)})}) {
      BOOST_REQUIRE_EQUAL(out.size(), 3u);
      BOOST_TEST(out[0].sizes == (std::vector<int64_t>{4, 3}));
      BOOST_TEST(out[2].sizes == (std::vector<int64_t>{n - 1, 3}));
      const std::vector<float> rest(x.begin() + 3, x.end());
      BOOST_TEST(values(out[2]) == rest, boost::test_tools::per_element());
      // Each column's 4 largest, in order, ties by position.
      for (int64_t col = 0; col < 3; ++col) {
        std::vector<int64_t> order(static_cast<size_t>(n));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          return x[static_cast<size_t>(a * 3 + col)] > x[static_cast<size_t>(b * 3 + col)];
        });
        for (int64_t r = 0; r < 4; ++r) {
          BOOST_TEST(values(out[0])[static_cast<size_t>(r * 3 + col)] ==
                     x[static_cast<size_t>(order[static_cast<size_t>(r)] * 3 + col)]);
          BOOST_TEST(out[1].data_as<int64_t>()[r * 3 + col] == order[static_cast<size_t>(r)]);
        }
      }
    }
  }
  // Fewer rows than k: the fact fails, and TopK says so.
  std::vector<float> x(9, 1.0f);
  const std::string e1 = error_of([&] { eval::run_graph(im.graph, std::vector<TensorData>{host({3, 3}, x)}); });
  BOOST_TEST(e1.find("s0 >= 4 (made by TopK)") != std::string::npos, e1);
  const std::string e2 = error_of([&] { f.run(std::vector<TensorData>{host({3, 3}, x)}); });
  BOOST_TEST((e2.find("s0 >= 4") != std::string::npos && e2.find("TopK") != std::string::npos), e2);
}

// Gather with indices known at import: evenly stepping ones (one index, or 1, 3, 5) are a
// strided slice, a view with no gather; others an index_select of constant indices. The values
// are the same (negative indices counting from the end).
BOOST_AUTO_TEST_CASE(gathers_of_evenly_stepping_constant_indices_are_slices) {
  struct Case {
    std::vector<int64_t> dims, idx;
    bool slice;
  };
  for (const Case& c : {Case{{}, {-5}, true}, Case{{1}, {2}, true}, Case{{3}, {1, 3, 5}, true},
                        Case{{2}, {4, 0}, false}, Case{{3}, {0, 1, 3}, false}, Case{{2}, {2, 2}, false}}) {
    TempDir dir;
    pb::ModelProto m = model();
    pb::GraphProto* g = m.mutable_graph();
    value(g->add_input(), "x", pb::TensorProto::FLOAT, {"2", "6", "3"});
    value(g->add_output(), "y", pb::TensorProto::FLOAT, {});
    *g->add_initializer() = int64s("i", c.dims, c.idx);
    node(g, "Gather", {"x", "i"}, {"y"});
    int_attr(g->mutable_node(0), "axis", 1);
    const konnx::Model im = konnx::load(save(dir, m));
    int gathers = 0;
    for (kiln::NodeId id = 0; id < static_cast<kiln::NodeId>(im.graph.size()); ++id)
      gathers += im.graph.node(id).op == kiln::OpId::index_select;
    BOOST_TEST(gathers == (c.slice ? 0 : 1), "indices " << c.idx.size() << " from " << c.idx[0]);
    std::vector<float> x(36);
    for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(k);
    const std::vector<TensorData> r = eval::run_graph(im.graph, std::vector<TensorData>{host({2, 6, 3}, x)});
    std::vector<int64_t> want_sizes{2};
    want_sizes.insert(want_sizes.end(), c.dims.begin(), c.dims.end());
    want_sizes.push_back(3);
    BOOST_TEST(r[0].sizes == want_sizes);
    std::vector<float> want;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t i : c.idx)
        for (int64_t k = 0; k < 3; ++k) want.push_back(x[static_cast<size_t>(b * 18 + (i < 0 ? i + 6 : i) * 3 + k)]);
    BOOST_TEST(values(r[0]) == want);
  }
}

// A Resize whose scale would make an output dim of billions (a 110-byte model grew without
// bound building its tap tables) or an infinite one is refused by name at import.
BOOST_AUTO_TEST_CASE(resize_to_an_absurd_size_is_refused) {
  for (float scale : {1e9f, std::numeric_limits<float>::infinity()}) {
    TempDir dir;
    pb::ModelProto m = model(13);
    pb::GraphProto* g = m.mutable_graph();
    value(g->add_input(), "x", pb::TensorProto::FLOAT, {"1", "1", "4"});
    value(g->add_output(), "y", pb::TensorProto::FLOAT, {});
    *g->add_initializer() = floats("scales", {3}, {1, 1, scale});
    node(g, "Resize", {"x", "", "scales"}, {"y"});
    const std::string e = error_of([&] { konnx::load(save(dir, m)); });
    check_contains(e, std::isinf(scale) ? "positive and finite" : "more than 2^24 per dim");
    check_contains(e, "Resize");
  }
  // Within 2^24 per dim, a cubic Resize's tap tables (17 values per output position) are checked
  // against the memory budget before they are built: 2^24 positions under a 64 MiB budget.
  const kiln::config::Patch budget({{"memory_budget_mb", int64_t{64}}});
  TempDir dir;
  pb::ModelProto m = model(13);
  pb::GraphProto* g = m.mutable_graph();
  value(g->add_input(), "x", pb::TensorProto::FLOAT, {"1", "1", "4"});
  value(g->add_output(), "y", pb::TensorProto::FLOAT, {});
  *g->add_initializer() = floats("scales", {3}, {1, 1, float(1 << 22)});
  string_attr(node(g, "Resize", {"x", "", "scales"}, {"y"}), "mode", "cubic");
  const std::string e = error_of([&] { konnx::load(save(dir, m)); });
  check_contains(e, "Resize (cubic, 16777216 outputs along a dim) would build a table of 16777216 x 17 entries");
}

// Resize's taps are found in a window around each output position, not by ranking the whole
// axis per position (that made an upscale quadratic in the axis's length); a linear 4x upscale
// of 65,536 samples imports and interpolates.
BOOST_AUTO_TEST_CASE(a_wide_resize_imports_in_linear_time) {
  TempDir dir;
  pb::ModelProto m = model(13);
  pb::GraphProto* g = m.mutable_graph();
  value(g->add_input(), "x", pb::TensorProto::FLOAT, {"1", "1", "65536"});
  value(g->add_output(), "y", pb::TensorProto::FLOAT, {});
  *g->add_initializer() = floats("scales", {3}, {1, 1, 4});
  string_attr(node(g, "Resize", {"x", "", "scales"}, {"y"}), "mode", "linear");
  const auto t0 = std::chrono::steady_clock::now();
  const konnx::Model im = konnx::load(save(dir, m));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BOOST_TEST_MESSAGE("Resize of 65536 -> 262144 imported in " << s << " s");
  std::vector<float> x(65536);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  const std::vector<TensorData> r = eval::run_graph(im.graph, std::vector<TensorData>{host({1, 1, 65536}, x)});
  const float* y = static_cast<const float*>(r[0].data());
  // half_pixel: output o samples input (o + 0.5) / 4 - 0.5, clamped to the edges.
  for (int64_t o : {0, 1, 2, 7, 100, 8191, 262143}) {
    const double want = std::clamp((o + 0.5) / 4 - 0.5, 0.0, 65535.0);
    BOOST_TEST(std::abs(y[o] - want) <= 1e-3, "y[" << o << "] = " << y[o] << ", want " << want);
  }
}

// Ops that size a host table from an attribute or a value are checked before the table is built
// (issue 31): an edge Pad of 2^40 and an EyeLike of 2^23 x 2^24 from a few bytes of model are
// errors naming the op; an LRN of size 10^9 over 3 channels imports as the 3-channel window it
// is (it made 10^9 slices) and computes x / (bias + alpha / size * sum of squares)^beta.
BOOST_AUTO_TEST_CASE(tables_sized_by_attributes_are_checked_before_they_are_built) {
  {
    TempDir dir;
    pb::ModelProto m = model(13);
    pb::GraphProto* g = m.mutable_graph();
    value(g->add_input(), "x", pb::TensorProto::FLOAT, {"1", "4"});
    value(g->add_output(), "y", pb::TensorProto::FLOAT, {});
    *g->add_initializer() = int64s("pads", {4}, {0, 0, 0, int64_t{1} << 40});
    pb::NodeProto* pad = node(g, "Pad", {"x", "pads"}, {"y"});
    pb::AttributeProto* mode = pad->add_attribute();
    mode->set_name("mode");
    mode->set_type(pb::AttributeProto::STRING);
    mode->set_s("edge");
    const std::string e = error_of([&] { konnx::load(save(dir, m)); });
    check_contains(e, "Pad (1099511627780 indices) would build a table of");
    check_contains(e, "more than the memory budget");
  }
  {
    TempDir dir;
    pb::ModelProto m = model(13);
    pb::GraphProto* g = m.mutable_graph();
    value(g->add_input(), "x", pb::TensorProto::BOOL, {"8388608", "16777216"});  // 2^47 bytes: a tensor may be
    value(g->add_output(), "y", pb::TensorProto::FLOAT, {});
    node(g, "EyeLike", {"x"}, {"y"});
    const std::string e = error_of([&] { konnx::load(save(dir, m)); });
    check_contains(e, "EyeLike would build a table of 8388608 x 16777216 entries");
  }
  {
    TempDir dir;
    pb::ModelProto m = model(13);
    pb::GraphProto* g = m.mutable_graph();
    value(g->add_input(), "x", pb::TensorProto::FLOAT, {"1", "3", "1", "1"});
    value(g->add_output(), "y", pb::TensorProto::FLOAT, {});
    int_attr(node(g, "LRN", {"x"}, {"y"}), "size", 1000000000);
    const konnx::Model im = konnx::load(save(dir, m));
    BOOST_TEST(im.graph.size() < 40u);
    const std::vector<float> x = {0.5f, -1.5f, 2.0f};
    const std::vector<TensorData> r = eval::run_graph(im.graph, std::vector<TensorData>{host({1, 3, 1, 1}, x)});
    const double squares = 0.25 + 2.25 + 4.0;  // every window holds the 3 channels
    for (size_t c = 0; c < 3; ++c) {
      const double want = x[c] / std::pow(1.0 + 1e-4 / 1e9 * squares, 0.75);
      BOOST_TEST(std::abs(static_cast<const float*>(r[0].data())[c] - want) <= 1e-6 * std::abs(want));
    }
  }
}

// A graph input of 2^62 x 2 floats is refused when the model loads (issue 31: it ran on the cpu
// and printed an empty result).
BOOST_AUTO_TEST_CASE(an_input_larger_than_a_tensor_may_be_is_refused) {
  TempDir dir;
  pb::ModelProto m = model(13);
  pb::GraphProto* g = m.mutable_graph();
  value(g->add_input(), "x", pb::TensorProto::FLOAT, {"4611686018427387904", "2"});
  value(g->add_output(), "y", pb::TensorProto::FLOAT, {});
  node(g, "Relu", {"x"}, {"y"});
  const std::string e = error_of([&] { konnx::load(save(dir, m)); });
  check_contains(e, "(input 'x'): its f32[4611686018427387904, 2] output would need more bytes than a tensor may have");
}

// Ops that size their output from a value, asked for 2^62 elements by a model of a few hundred
// bytes (issue 31: ConstantOfShape, Expand and Tile to [2^31, 2^31] crashed with SIGSEGV after
// the byte count wrapped): a kiln::Error naming the op, at import or on the reference.
BOOST_AUTO_TEST_CASE(outputs_sized_past_what_a_tensor_may_hold_are_refused) {
  const int64_t big = int64_t{1} << 31;
  for (const std::string op : {"ConstantOfShape", "Expand", "Tile"}) {
    TempDir dir;
    pb::ModelProto m = model(13);
    pb::GraphProto* g = m.mutable_graph();
    value(g->add_output(), "y", pb::TensorProto::FLOAT, {});
    std::vector<TensorData> inputs;
    if (op == "ConstantOfShape") {
      *g->add_initializer() = int64s("shape", {2}, {big, big});
      node(g, op, {"shape"}, {"y"});
    } else {
      const bool expand = op == "Expand";  // x broadcasts to [2^31, 2^31]; Tile repeats it [2^30, 2^31] times
      value(g->add_input(), "x", pb::TensorProto::FLOAT, {expand ? "1" : "2", expand ? "1" : "2"});
      inputs.push_back(expand ? host({1, 1}, {1}) : host({2, 2}, {1, 2, 3, 4}));
      *g->add_initializer() = int64s("n", {2}, op == "Expand" ? std::vector<int64_t>{big, big} : std::vector<int64_t>{big / 2, big});
      node(g, op, {"x", "n"}, {"y"});
    }
    const std::string e = error_of([&] {
      const konnx::Model im = konnx::load(save(dir, m));
      eval::run_graph(im.graph, inputs);
    });
    BOOST_TEST_MESSAGE(op << ": " << e);
    check_contains(e, op);
    check_contains(e, "more bytes than a tensor may have");
  }
}

// An ONNX Sum of 100,000 inputs (one value read 100,000 times) imports, runs on the reference
// and schedules and generates for the cpu (issue 31: the fuser's walk recursed as deep as the
// chain of adds and crashed).
BOOST_AUTO_TEST_CASE(a_sum_of_100k_inputs_imports_runs_and_schedules) {
  TempDir dir;
  pb::ModelProto m = model(13);
  pb::GraphProto* g = m.mutable_graph();
  value(g->add_input(), "x", pb::TensorProto::FLOAT, {"4"});
  value(g->add_output(), "y", pb::TensorProto::FLOAT, {});
  node(g, "Sum", std::vector<std::string>(100000, "x"), {"y"});
  const konnx::Model mod = konnx::load(save(dir, m));
  const std::vector<TensorData> out = eval::run_graph(mod.graph, std::vector<TensorData>{host({4}, {1, 2, 3, -1})});
  BOOST_TEST(values(out[0]) == (std::vector<double>{1e5, 2e5, 3e5, -1e5}), boost::test_tools::per_element());
  target::ensure_builtin_targets();
  if (!target::find_codegen("cpu")) return;
  const target::Compiled c = target::compile_graph(target::codegen("cpu"), mod.graph, {});
  BOOST_TEST(c.schedule.kernels.size() >= 1u);
  BOOST_TEST(!c.generated.plan.kernels.empty());
}

// Off the CPU constants become parameters, but a one-element one that an elementwise op reads
// stays a 0-d constant where the result is the same (x[4] * c[1]); where it is not (a 0-d x
// plus c[1] is [1], a 0-d c would give []), c is a parameter and nothing else is left behind.
BOOST_AUTO_TEST_CASE(one_element_constants_stay_constants_off_the_cpu) {
  for (bool scalar_x : {false, true}) {
    TempDir dir;
    pb::ModelProto m = model();
    pb::GraphProto* g = m.mutable_graph();
    value(g->add_input(), "x", pb::TensorProto::FLOAT, scalar_x ? std::vector<std::string>{} : std::vector<std::string>{"4"});
    value(g->add_output(), "y", pb::TensorProto::FLOAT, {});
    *g->add_initializer() = floats("c", {1}, {2.0f});
    node(g, scalar_x ? "Add" : "Mul", {"x", "c"}, {"y"});
    konnx::LoadOptions options;
    options.device = kiln::Device::cuda(0);
    const konnx::Model im = konnx::load(save(dir, m), options);
    BOOST_TEST(im.parameters.size() == (scalar_x ? 1u : 0u));
    BOOST_TEST(im.graph.size() == 3u, im.graph.str());  // x, c (a parameter or a 0-d constant), the op
    const TensorMeta& out = im.graph.node(im.graph.outputs()[0]).meta;
    BOOST_TEST(out.sizes == (scalar_x ? kiln::SymShape{1} : kiln::SymShape{4}));
  }
}

// Off the CPU without parameter values (the page's import: the graph alone), weights are not
// copied into graph constants (Importer::elide_weights): the graph is the one an import with
// the values gives, for raw and typed initializers, a weight folded at import (a transposed and
// a cast one), a bool one, a one-element constant (a 0-d constant there) and integer shapes.
BOOST_AUTO_TEST_CASE(an_import_without_parameter_values_gives_the_same_graph) {
  auto raw = [](pb::TensorProto t) {
    std::string bytes;
    if (t.data_type() == pb::TensorProto::FLOAT)
      for (float v : t.float_data()) bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
    t.clear_float_data();
    t.set_raw_data(bytes);
    return t;
  };
  TempDir dir;
  pb::ModelProto m = model();
  pb::GraphProto* g = m.mutable_graph();
  value(g->add_input(), "x", pb::TensorProto::FLOAT, {"2", "4"});
  value(g->add_output(), "y", pb::TensorProto::FLOAT, {});
  *g->add_initializer() = raw(floats("w", {3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
  *g->add_initializer() = floats("b", {3}, {0.5f, -0.5f, 1.0f});
  *g->add_initializer() = raw(floats("c", {1}, {2.0f}));
  *g->add_initializer() = int64s("shape", {2}, {3, 2});
  pb::TensorProto mask;
  mask.set_name("mask");
  mask.set_data_type(pb::TensorProto::BOOL);
  mask.add_dims(3);
  mask.add_dims(2);
  mask.set_raw_data(std::string("\x01\x00\x02\x01\x00\x01", 6));  // a 2 is true too
  *g->add_initializer() = mask;
  node(g, "Transpose", {"w"}, {"wt"});
  node(g, "MatMul", {"x", "wt"}, {"xw"});
  node(g, "Add", {"xw", "b"}, {"xwb"});
  node(g, "Mul", {"xwb", "c"}, {"scaled"});
  node(g, "Reshape", {"scaled", "shape"}, {"r"});
  node(g, "Cast", {"mask"}, {"maskf"})->add_attribute()->CopyFrom([] {
    pb::AttributeProto a;
    a.set_name("to");
    a.set_type(pb::AttributeProto::INT);
    a.set_i(pb::TensorProto::FLOAT);
    return a;
  }());
  node(g, "Mul", {"r", "maskf"}, {"y"});
  const std::string path = save(dir, m);
  for (kiln::Device device : {kiln::Device::cuda(0), kiln::Device::vulkan(0)}) {
    konnx::LoadOptions with, without;
    with.device = without.device = device;
    without.parameter_values = false;
    const konnx::Model a = konnx::load(path, with), b = konnx::load(path, without);
    BOOST_TEST(a.parameters.size() == 3u);  // the transposed weights, b, the cast mask
    BOOST_TEST(b.parameters.empty());
    BOOST_TEST(a.graph.str() == b.graph.str());
    BOOST_REQUIRE_EQUAL(a.graph.inputs().size(), b.graph.inputs().size());
    for (size_t k = 0; k < a.graph.inputs().size(); ++k) {
      BOOST_TEST(a.graph.node(a.graph.inputs()[k]).name == b.graph.node(b.graph.inputs()[k]).name);
      BOOST_TEST((a.graph.node(a.graph.inputs()[k]).meta == b.graph.node(b.graph.inputs()[k]).meta));
    }
    // The values the graph computes with: the mask's 2 read as true, c a 0-d constant.
    const std::vector<float> wt = values(a.parameters[0]);
    BOOST_TEST((wt == std::vector<float>{1, 5, 9, 2, 6, 10, 3, 7, 11, 4, 8, 12}));
    BOOST_TEST((values(a.parameters[2]) == std::vector<float>{1, 0, 1, 1, 0, 1}));
  }
}

// The page's import (load_decoded with a fetch): a range of the blob is fetched before the import
// reads it. Off the CPU without parameter values a weight that only becomes a parameter (v) is
// never fetched; one the import folds (w, transposed) and integers (the shape) are. The bytes
// not fetched are garbage here, so a read without a fetch would show in the graph (on the CPU the
// constants carry their values) or in the folded parameter's values.
BOOST_AUTO_TEST_CASE(a_lazily_fetched_blob_is_read_only_where_the_import_needs_it) {
  const std::string json = R"({"irVersion":"8","graph":{
    "node":[{"input":["w"],"output":["wt"],"opType":"Transpose"},
            {"input":["x","wt"],"output":["y1"],"opType":"MatMul"},
            {"input":["x","v"],"output":["y2"],"opType":"MatMul"},
            {"input":["y1","y2"],"output":["y3"],"opType":"Add"},
            {"input":["y3","shape"],"output":["y"],"opType":"Reshape"}],
    "initializer":[{"dims":["3","4"],"dataType":1,"name":"w","rawData":{"blob":[0,48]}},
                   {"dims":["4","3"],"dataType":1,"name":"v","rawData":{"blob":[48,48]}},
                   {"dims":["2"],"dataType":7,"name":"shape","rawData":{"blob":[96,16]}}],
    "input":[{"name":"x","type":{"tensorType":{"elemType":1,"shape":{"dim":[{"dimValue":"2"},{"dimValue":"4"}]}}}}],
    "output":[{"name":"y","type":{"tensorType":{"elemType":1,"shape":{"dim":[{"dimValue":"3"},{"dimValue":"2"}]}}}}]},
    "opsetImport":[{"domain":"","version":"13"}]})";
  std::vector<std::byte> blob(112);
  for (int k = 0; k < 24; ++k) {
    const float f = static_cast<float>(k + 1);
    std::memcpy(blob.data() + 4 * k, &f, 4);
  }
  const int64_t shape[2] = {3, 2};
  std::memcpy(blob.data() + 96, shape, 16);
  for (kiln::Device device : {kiln::Device::cpu(), kiln::Device::cuda(0)}) {
    for (bool with_values : {false, true}) {
      konnx::LoadOptions options;
      options.device = device;
      options.parameter_values = with_values;
      std::vector<std::byte> lazy(blob.size(), std::byte{0xff});  // NaNs until fetched
      std::vector<std::pair<size_t, size_t>> fetched;
      const konnx::Model a = konnx::load_decoded(json, lazy, [&](size_t offset, size_t length) {
        fetched.emplace_back(offset, length);
        std::memcpy(lazy.data() + offset, blob.data() + offset, length);
      }, options);
      const konnx::Model b = konnx::load_decoded(json, blob, options);
      const std::string what = device.str() + (with_values ? " with" : " without") + " parameter values";
      BOOST_TEST(a.graph.str() == b.graph.str(), what);
      BOOST_REQUIRE_EQUAL(a.parameters.size(), b.parameters.size());
      for (size_t k = 0; k < a.parameters.size(); ++k) BOOST_TEST((values(a.parameters[k]) == values(b.parameters[k])), what);
      auto was_fetched = [&](size_t offset, size_t length) {
        return std::find(fetched.begin(), fetched.end(), std::pair{offset, length}) != fetched.end();
      };
      BOOST_TEST(was_fetched(48, 48) == (device == kiln::Device::cpu() || with_values), what);  // v
      BOOST_TEST(was_fetched(0, 48), what);                                                     // w
      BOOST_TEST(was_fetched(96, 16), what);                                                    // shape
    }
  }
}

BOOST_AUTO_TEST_CASE(constant_nodes_and_external_data) {
  TempDir dir;
  pb::ModelProto m = model();
  pb::GraphProto* g = m.mutable_graph();
  value(g->add_input(), "x", pb::TensorProto::FLOAT, {"4"});
  value(g->add_output(), "y", pb::TensorProto::FLOAT, {"4"});
  // w lives in weights.bin beside the model, at offset 8.
  pb::TensorProto w;
  w.set_name("w");
  w.set_data_type(pb::TensorProto::FLOAT);
  w.add_dims(4);
  w.set_data_location(pb::TensorProto::EXTERNAL);
  auto add_entry = [&](const std::string& k, const std::string& v) {
    auto* e = w.add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add_entry("location", "weights.bin");
  add_entry("offset", "8");
  add_entry("length", "16");
  *g->add_initializer() = w;
  {
    const float data[6] = {0, 0, 1, 2, 3, 4};
    std::ofstream f(dir.path / "weights.bin", std::ios::binary);
    f.write(reinterpret_cast<const char*>(data), sizeof data);
  }
  pb::NodeProto* c = node(g, "Constant", {}, {"two"});
  auto* a = c->add_attribute();
  a->set_name("value");
  a->set_type(pb::AttributeProto::TENSOR);
  *a->mutable_t() = floats("", {}, {2.0f});
  node(g, "Mul", {"x", "w"}, {"xw"});
  node(g, "Add", {"xw", "two"}, {"y"});
  const konnx::Model im = konnx::load(save(dir, m));
  const std::vector<TensorData> r = eval::run_graph(im.graph, std::vector<TensorData>{host({4}, {1, 1, 2, 2})});
  BOOST_CHECK(values(r[0]) == (std::vector<float>{3, 4, 8, 10}));

  // A location outside the model's directory is refused, as is a file too short.
  g->mutable_initializer(0)->mutable_external_data(0)->set_value("../weights.bin");
  check_contains(error_of([&] { konnx::load(save(dir, m)); }), "relative path inside the model's directory");
  g->mutable_initializer(0)->mutable_external_data(0)->set_value("weights.bin");
  g->mutable_initializer(0)->mutable_external_data(1)->set_value("16");
  check_contains(error_of([&] { konnx::load(save(dir, m)); }), "too few for offset 16");
  g->mutable_initializer(0)->mutable_external_data(1)->set_value("8");

  // A link inside the directory that leads out of it is refused by where it resolves (the
  // location itself is lexically fine); one that stays inside is followed.
  TempDir outside;
  std::filesystem::copy_file(dir.path / "weights.bin", outside.path / "secret.bin");
  std::filesystem::create_symlink(outside.path / "secret.bin", dir.path / "escape.bin");
  std::filesystem::create_symlink(dir.path / "weights.bin", dir.path / "inside.bin");
  g->mutable_initializer(0)->mutable_external_data(0)->set_value("escape.bin");
  check_contains(error_of([&] { konnx::load(save(dir, m)); }), "outside the model's directory");
  g->mutable_initializer(0)->mutable_external_data(0)->set_value("inside.bin");
  BOOST_CHECK(values(eval::run_graph(konnx::load(save(dir, m)).graph,
                                     std::vector<TensorData>{host({4}, {1, 1, 2, 2})})[0]) == (std::vector<float>{3, 4, 8, 10}));
  // A FIFO (or a device) is not read, as a model or as its data: it could block forever.
  check_contains(error_of([&] { konnx::load("/dev/zero"); }), "is not a regular file (a character device)");
  BOOST_REQUIRE(mkfifo((dir.path / "pipe.bin").c_str(), 0600) == 0);
  g->mutable_initializer(0)->mutable_external_data(0)->set_value("pipe.bin");
  check_contains(error_of([&] { konnx::load(save(dir, m)); }), "is not a regular file");
}

// kiln::onnx::compile reads a model's external weights once, at the first call on a device (the
// callable is made without them), and passes them to the plan as arguments on the CPU as on
// other devices: the compile-cache entry holds code, not weights.
BOOST_AUTO_TEST_CASE(compile_reads_weights_once_and_caches_no_weights) {
  TempDir dir, cache;
  const kiln::config::Patch caches({{"cache_dir", cache.path.string()}, {"force_disable_caches", false}});
  constexpr int64_t n = 256;
  pb::ModelProto m = model();
  pb::GraphProto* g = m.mutable_graph();
  value(g->add_input(), "x", pb::TensorProto::FLOAT, {"batch", std::to_string(n)});
  value(g->add_output(), "y", pb::TensorProto::FLOAT, {"batch", std::to_string(n)});
  pb::TensorProto w;
  w.set_name("W");
  w.set_data_type(pb::TensorProto::FLOAT);
  w.add_dims(n);
  w.add_dims(n);
  w.set_data_location(pb::TensorProto::EXTERNAL);
  auto* loc = w.add_external_data();
  loc->set_key("location");
  loc->set_value("weights.bin");
  *g->add_initializer() = w;
  node(g, "MatMul", {"x", "W"}, {"xw"});
  node(g, "Relu", {"xw"}, {"y"});
  const std::string path = save(dir, m);

  // Made without the weights: their file is missing until the first call needs it.
  const konnx::CompiledModel missing = konnx::compile(path);
  BOOST_TEST(missing.input_names() == std::vector<std::string>{"x"});
  const TensorData x = host({2, n}, std::vector<float>(2 * n, 0.25f));
  check_contains(error_of([&] { (void)missing.run(std::vector<TensorData>{x}); }), "weights.bin");

  std::vector<float> weights(static_cast<size_t>(n * n));
  for (size_t k = 0; k < weights.size(); ++k) weights[k] = static_cast<float>(static_cast<int64_t>(k % 7) - 3);
  {
    std::ofstream f(dir.path / "weights.bin", std::ios::binary);
    f.write(reinterpret_cast<const char*>(weights.data()), static_cast<std::streamsize>(weights.size() * sizeof(float)));
  }
  const std::vector<TensorData> got = konnx::compile(path).run(std::vector<TensorData>{x});
  const std::vector<TensorData> want = eval::run_graph(konnx::load(path).graph, std::vector<TensorData>{x});
  BOOST_TEST(values(got[0]) == values(want[0]), boost::test_tools::per_element());
  size_t entries = 0;
  for (const auto& f : std::filesystem::directory_iterator(cache.path)) {
    if (f.path().extension() != ".kce") continue;
    ++entries;
    BOOST_TEST(f.file_size() < weights.size() * sizeof(float), f.path() << ": " << f.file_size() << " bytes");
  }
  BOOST_TEST(entries >= 1u);
}

// A node of another domain runs as the custom op registered as <domain>::<op_type>, its
// attributes the op's config as JSON (kiln/graph/custom_ops.h); compiled over a dynamic batch.
BOOST_AUTO_TEST_CASE(nodes_of_other_domains_are_registered_custom_ops) {
  TempDir dir;
  pb::ModelProto m = model(13);
  auto* o = m.add_opset_import();
  o->set_domain("com.example");
  o->set_version(1);
  pb::GraphProto* g = m.mutable_graph();
  value(g->add_input(), "x", pb::TensorProto::FLOAT, {"batch", "3"});
  value(g->add_output(), "y", pb::TensorProto::FLOAT, {"batch", "3"});
  node(g, "Exp", {"x"}, {"e"});
  pb::NodeProto* n = node(g, "SoftClip", {"e"}, {"c"}, "clip");
  n->set_domain("com.example");
  auto* hi = n->add_attribute();
  hi->set_name("hi");
  hi->set_type(pb::AttributeProto::FLOAT);
  hi->set_f(2.0f);
  string_attr(n, "mode", "hard");
  node(g, "Neg", {"c"}, {"y"});
  const std::string path = save(dir, m);
  // Not registered: the error says how a node of another domain is imported.
  check_contains(error_of([&] { konnx::load(path); }),
                 "node 'clip' (SoftClip, domain com.example, opset 1): the domain 'com.example' is not supported (Kiln "
                 "imports the default domain ai.onnx, and a node of another domain as the custom op registered as "
                 "<domain>::<op_type>, here com.example::SoftClip, which is not registered)");
  std::string seen_config;
  kiln::CustomOpDef d;
  d.name = "com.example::SoftClip";
  d.version = "1";
  d.infer = [](std::span<const TensorMeta* const> in, const std::string&, kiln::ShapeEnv&) { return *in[0]; };
  d.compute = [&seen_config](std::span<const TensorData> in, const std::string& config, const TensorData& out) {
    seen_config = config;
    for (int64_t i = 0; i < out.numel(); ++i) out.data_as<float>()[i] = std::min(in[0].data_as<float>()[i], 2.0f);
  };
  kiln::register_custom_op(d);
  const konnx::CompiledModel f = konnx::compile(path);
  for (int64_t batch : {1, 4}) {
    std::vector<float> x(static_cast<size_t>(batch * 3));
    for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * static_cast<float>(i);
    const std::vector<Tensor> out = f({Tensor::from_data(host({batch, 3}, x))});
    std::vector<float> want;
    for (float v : x) want.push_back(-std::min(std::exp(v), 2.0f));
    const std::vector<float> got = values(out[0].data());
    BOOST_REQUIRE_EQUAL(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) BOOST_TEST(std::abs(got[i] - want[i]) < 1e-5f);
  }
  BOOST_TEST(seen_config == R"({"hi":2.0,"mode":"hard"})");
  kiln::unregister_custom_op("com.example::SoftClip");
}

BOOST_AUTO_TEST_CASE(errors_name_the_node_op_domain_and_opset) {
  TempDir dir;
  pb::ModelProto m = model(13);
  pb::GraphProto* g = m.mutable_graph();
  value(g->add_input(), "x", pb::TensorProto::FLOAT, {"2"});
  value(g->add_output(), "y", pb::TensorProto::FLOAT, {"2"});
  node(g, "TfIdfVectorizer", {"x"}, {"y"}, "my_tfidf");
  const std::string e = error_of([&] { konnx::load(save(dir, m)); });
  check_contains(e, "node 'my_tfidf' (TfIdfVectorizer, domain ai.onnx, opset 13): unsupported op type 'TfIdfVectorizer'");

  g->mutable_node(0)->set_op_type("Relu");
  g->mutable_node(0)->set_domain("com.microsoft");
  check_contains(error_of([&] { konnx::load(save(dir, m)); }), "the domain 'com.microsoft' is not supported (Kiln imports");

  pb::ModelProto newer = model(19);
  *newer.mutable_graph() = *g;
  check_contains(error_of([&] { konnx::load(save(dir, newer)); }), "opset 19 of domain ai.onnx");

  // A bad attribute inside a converter: the node is named too.
  pb::ModelProto t = model(13);
  pb::GraphProto* tg = t.mutable_graph();
  value(tg->add_input(), "x", pb::TensorProto::FLOAT, {"2", "3"});
  value(tg->add_output(), "y", pb::TensorProto::FLOAT, {"3", "2"});
  ints_attr(node(tg, "Transpose", {"x"}, {"y"}, "tr"), "perm", {0, 5});
  check_contains(error_of([&] { konnx::load(save(dir, t)); }), "node 'tr' (Transpose, domain ai.onnx, opset 13)");
}

BOOST_AUTO_TEST_CASE(malformed_and_truncated_files_are_errors) {
  TempDir dir;
  std::string bytes;
  BOOST_REQUIRE(mlp().SerializeToString(&bytes));
  // Every prefix of a valid model: an error or a model, never a crash.
  int errors = 0;
  for (size_t n = 0; n < bytes.size(); n += 3) {
    try {
      (void)konnx::load_bytes(std::as_bytes(std::span(bytes.data(), n)), dir.path.string());
    } catch (const Error& e) {
      ++errors;
      BOOST_CHECK(std::string(e.what()).find("onnx") != std::string::npos);
    }
  }
  BOOST_CHECK_GT(errors, 0);
  const std::string junk = "\x0a\xff\xff\xff\xff\x0f garbage";
  check_contains(error_of([&] { konnx::load_bytes(std::as_bytes(std::span(junk.data(), junk.size())), ""); }),
                 "not a valid ONNX protobuf");
  check_contains(error_of([&] { konnx::load((dir.path / "missing.onnx").string()); }), "cannot open model");
}

BOOST_AUTO_TEST_CASE(conv_and_pooling_against_hand_values) {
  TempDir dir;
  pb::ModelProto m = model(13);
  pb::GraphProto* g = m.mutable_graph();
  value(g->add_input(), "x", pb::TensorProto::FLOAT, {"1", "1", "3", "3"});
  value(g->add_output(), "y", pb::TensorProto::FLOAT, {"1", "1", "3", "3"});
  value(g->add_output(), "p", pb::TensorProto::FLOAT, {"1", "1", "2", "2"});
  *g->add_initializer() = floats("w", {1, 1, 3, 3}, {0, 1, 0, 1, 1, 1, 0, 1, 0});  // a plus-shaped kernel
  ints_attr(node(g, "Conv", {"x", "w"}, {"y"}), "pads", {1, 1, 1, 1});
  pb::NodeProto* p = node(g, "MaxPool", {"x"}, {"p"});
  ints_attr(p, "kernel_shape", {2, 2});
  const konnx::Model im = konnx::load(save(dir, m));
  const std::vector<TensorData> r =
      eval::run_graph(im.graph, std::vector<TensorData>{host({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})});
  BOOST_CHECK(values(r[0]) == (std::vector<float>{7, 11, 11, 17, 25, 23, 19, 29, 23}));
  BOOST_CHECK(values(r[1]) == (std::vector<float>{5, 6, 8, 9}));
}

// A bf16 Conv whose weights and bias are f32 initializers (torch's exporter folds a bf16
// model's batch norms into its convolutions in f32): computed in bf16, the declared output's
// type, its weights cast at import, not the input promoted to f32.
BOOST_AUTO_TEST_CASE(a_conv_computes_in_its_input_type_whatever_its_weights) {
  TempDir dir;
  pb::ModelProto m = model(13);
  pb::GraphProto* g = m.mutable_graph();
  value(g->add_input(), "x", pb::TensorProto::BFLOAT16, {"1", "2", "4", "4"});
  value(g->add_output(), "y", pb::TensorProto::BFLOAT16, {"1", "3", "4", "4"});
  *g->add_initializer() = floats("w", {3, 2, 3, 3}, std::vector<float>(54, 0.25f));
  *g->add_initializer() = floats("b", {3}, {1, 2, 3});
  ints_attr(node(g, "Conv", {"x", "w", "b"}, {"y"}), "pads", {1, 1, 1, 1});
  const konnx::Model im = konnx::load(save(dir, m));
  int convs = 0;
  for (kiln::NodeId id = 0; id < static_cast<kiln::NodeId>(im.graph.size()); ++id) {
    const kiln::Node& n = im.graph.node(id);
    if (n.op != kiln::OpId::convolution) continue;
    ++convs;
    BOOST_TEST((n.meta.dtype == kiln::DType::bf16));
    for (kiln::NodeId i : n.inputs) BOOST_TEST((im.graph.node(i).meta.dtype == kiln::DType::bf16));
  }
  BOOST_TEST(convs == 1);
}

// Conv, BatchNormalization, MaxPool, AveragePool and InstanceNormalization over a dynamic
// batch: the batch stays a symbol (only channels and spatial sizes must be static), and each
// image of a batch gives what it gives alone.
BOOST_AUTO_TEST_CASE(a_cnn_keeps_its_batch_dynamic) {
  TempDir dir;
  pb::ModelProto m = model(13);
  pb::GraphProto* g = m.mutable_graph();
  value(g->add_input(), "x", pb::TensorProto::FLOAT, {"N", "1", "4", "4"});
  value(g->add_output(), "y", pb::TensorProto::FLOAT, {"N", "2", "1", "1"});
  *g->add_initializer() = floats("w", {2, 1, 3, 3}, {0, 1, 0, 1, 1, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1});
  *g->add_initializer() = floats("scale", {2}, {2, 0.5f});
  *g->add_initializer() = floats("shift", {2}, {1, -1});
  *g->add_initializer() = floats("mean", {2}, {0.5f, 1});
  *g->add_initializer() = floats("var", {2}, {4, 1});
  ints_attr(node(g, "Conv", {"x", "w"}, {"c"}), "pads", {1, 1, 1, 1});
  node(g, "BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"b"});
  node(g, "InstanceNormalization", {"b", "scale", "shift"}, {"i"});
  pb::NodeProto* mp = node(g, "MaxPool", {"i"}, {"p"});
  ints_attr(mp, "kernel_shape", {2, 2});
  ints_attr(mp, "strides", {2, 2});
  pb::NodeProto* ap = node(g, "AveragePool", {"p"}, {"y"});
  ints_attr(ap, "kernel_shape", {2, 2});
  const konnx::Model im = konnx::load(save(dir, m));
  BOOST_CHECK(im.graph.node(im.graph.inputs()[0]).meta.sizes[0].is_symbolic());
  std::vector<float> x;
  for (int k = 0; k < 48; ++k) x.push_back(static_cast<float>((k * 7) % 11) - 5.0f);
  const std::vector<float> all = values(eval::run_graph(im.graph, std::vector<TensorData>{host({3, 1, 4, 4}, x)})[0]);
  BOOST_REQUIRE_EQUAL(all.size(), 6u);
  for (int64_t n = 0; n < 3; ++n) {
    const std::vector<float> one(x.begin() + n * 16, x.begin() + (n + 1) * 16);
    const std::vector<float> y = values(eval::run_graph(im.graph, std::vector<TensorData>{host({1, 1, 4, 4}, one)})[0]);
    BOOST_REQUIRE_EQUAL(y.size(), 2u);
    BOOST_CHECK_CLOSE(y[0], all[static_cast<size_t>(2 * n)], 1e-4);
    BOOST_CHECK_CLOSE(y[1], all[static_cast<size_t>(2 * n + 1)], 1e-4);
  }
}

BOOST_AUTO_TEST_CASE(inputs_whose_values_the_import_needs) {
  TempDir dir;
  pb::ModelProto m = model(13);
  pb::GraphProto* g = m.mutable_graph();
  value(g->add_input(), "x", pb::TensorProto::FLOAT, {"2", "3"});
  value(g->add_input(), "shape", pb::TensorProto::INT64, {"2"});
  value(g->add_output(), "y", pb::TensorProto::FLOAT, {"?", "?"});
  node(g, "Reshape", {"x", "shape"}, {"y"});
  const std::string path = save(dir, m);
  const std::string e = error_of([&] { konnx::load(path); });
  check_contains(e, "computed from graph input 'shape'");
  // compile binds it per call (an entry per value).
  const konnx::CompiledModel f = konnx::compile(path);
  TensorData shape = TensorData::empty_host(DType::i64, {2});
  shape.data_as<int64_t>()[0] = 3;
  shape.data_as<int64_t>()[1] = -1;
  const std::vector<TensorData> out = f.run(std::vector<TensorData>{host({2, 3}, {1, 2, 3, 4, 5, 6}), shape});
  BOOST_CHECK(out[0].sizes == (std::vector<int64_t>{3, 2}));
  shape.data_as<int64_t>()[0] = 1;
  const std::vector<TensorData> out2 = f.run(std::vector<TensorData>{host({2, 3}, {1, 2, 3, 4, 5, 6}), shape});
  BOOST_CHECK(out2[0].sizes == (std::vector<int64_t>{1, 6}));
}
