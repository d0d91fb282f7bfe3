// The "kiln.plan" JSON form of a KernelPlan: byte-identical round trips of hand-built plans
// (symbolic sizes, constant data, reference kernels with attributes of every kind, generated
// kernels with multi-line source), and the kiln::Error each kind of bad input gives, located by
// field path.
#include <kiln/plan/plan_json.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "kiln_test_util.h"

using namespace kiln;
using json = nlohmann::ordered_json;
using kiln_test_util::contains;
using kiln_test_util::error_of;

namespace {

SymShape contiguous(const SymShape& sizes) {
  SymShape st(sizes.size(), SymInt(1));
  for (size_t d = sizes.size(); d-- > 1;) st[d - 1] = st[d] * sizes[d];
  return st;
}

plan::PlanBuffer buffer(int32_t id, const char* kind, DType t, SymShape sizes, int32_t index = -1, int32_t slot = -1) {
  plan::PlanBuffer b;
  b.id = id;
  b.kind = kind;
  b.dtype = t;
  b.strides = contiguous(sizes);
  b.sizes = std::move(sizes);
  b.index = index;
  b.slot = slot;
  return b;
}

plan::PlanKernel reference(std::string name, OpId op, Attrs attrs, std::vector<int32_t> inputs, int32_t output,
                           std::vector<NodeId> provenance) {
  plan::PlanKernel k;
  k.name = std::move(name);
  k.kind = "reference";
  k.op = op;
  k.attrs = std::move(attrs);
  k.reads = inputs;
  k.inputs = std::move(inputs);
  k.output = output;
  k.writes = {output};
  k.provenance = std::move(provenance);
  return k;
}

constexpr const char* kSource =
    "define void @k0_exp(ptr %buffers, ptr %sizes, i64 %begin, i64 %end) {\n"
    "entry:\n"
    "  %s0 = load i64, ptr %sizes ; \"s0\", tab:\t, backslash: \\\n"
    "  ret void\n"
    "}\n";

// s0 = input 0 dim 0 (example 8).
// b0 input f32[s0, 4096]  b1 constant f32[2, 3]  b2 intermediate f32[s0, 4096] (slot 0)
// b3 intermediate f32[s0, 4100] (slot 1)  b4 output f32[2*s0, 4100]  b5 intermediate f16[s0, 2]
// b6 output f32[s0]  b7 output f32[s0, 1]
// k0 pointwise b0, b1 -> b2; k1 pad(b2) -> b3; k2 cat(b3, b3) -> b4; k3 full -> b5;
// k4 reduction b5 -> b6; k5 sum(b2) -> b7.
plan::KernelPlan make_plan() {
  plan::KernelPlan p;
  p.target = "cpu";
  p.prelude = "; prelude\ndeclare void @kiln_sgemm(ptr, ptr, ptr, i64, i64, i64)\n";
  p.symbols.push_back(SymbolInfo{0, 8, 2, int64_t{1} << 20, "input 0 (x) dim 0", false});
  const SymInt s0 = SymInt::symbol(0, 8);
  p.facts.push_back(ShapeFact{SymExpr::symbol(0), SymExpr::constant(3), Relation::ne, "cat"});
  p.facts.push_back(ShapeFact{SymExpr::symbol(0), SymExpr::constant(5), Relation::ge, "slice"});
  p.bindings.push_back({0, 0, 0});

  p.buffers.push_back(buffer(0, "input", DType::f32, {s0, 4096}, 0));
  p.buffers.push_back(buffer(1, "constant", DType::f32, {2, 3}));
  auto c = std::make_shared<ConstantData>();
  c->dtype = DType::f32;
  c->sizes = {2, 3};
  const float values[] = {1.0f, -2.5f, 0.1f, 1e30f, -0.0f, std::numeric_limits<float>::infinity()};
  c->bytes.resize(sizeof values);
  std::memcpy(c->bytes.data(), values, sizeof values);
  p.buffers.back().data = c;
  p.buffers.push_back(buffer(2, "intermediate", DType::f32, {s0, 4096}, -1, 0));
  p.buffers.push_back(buffer(3, "intermediate", DType::f32, {s0, 4100}, -1, 1));
  p.buffers.push_back(buffer(4, "output", DType::f32, {s0 * SymInt(2), 4100}, 0));
  p.buffers.push_back(buffer(5, "intermediate", DType::f16, {s0, 2}, -1, 0));
  p.buffers.push_back(buffer(6, "output", DType::f32, {s0}, 1));
  p.buffers.push_back(buffer(7, "output", DType::f32, {s0, 1}, 2));
  p.slots = {s0 * SymInt(16384), s0 * SymInt(16400)};

  plan::PlanKernel k0;
  k0.name = "k0_exp";
  k0.kind = "pointwise";
  k0.entry = "k0_exp";
  k0.variants = {"k0_exp_w256", "k0_exp_w512"};
  k0.source = kSource;
  k0.parallel_extent = s0 * SymInt(4096);
  k0.grain = 32768;
  k0.provenance = {1, 2};
  k0.reads = {0, 1};
  k0.writes = {2};
  p.kernels.push_back(k0);
  p.kernels.push_back(reference("k1_pad", OpId::pad, {std::vector<int64_t>{1, 3}, -std::numeric_limits<double>::infinity()},
                                {2}, 3, {3}));
  p.kernels.push_back(reference("k2_cat", OpId::cat, {int64_t{0}}, {3, 3}, 4, {4}));
  p.kernels.push_back(reference("k3_full", OpId::full, {SymShape{s0, 2}, 0.1, DType::f16}, {}, 5, {5}));
  plan::PlanKernel k4 = k0;
  k4.name = k4.entry = "k4_sum";
  k4.kind = "reduction";
  k4.source = "define void @k4_sum(ptr %buffers, ptr %sizes, i64 %begin, i64 %end) {\n  ret void\n}\n";
  k4.parallel_extent = s0;
  k4.grain = 16384;
  k4.provenance = {6};
  k4.reads = {5};
  k4.writes = {6};
  p.kernels.push_back(k4);
  p.kernels.push_back(reference("k5_sum", OpId::sum, {std::vector<int64_t>{1}, true}, {2}, 7, {7}));

  p.outputs = {4, 6, 7};
  p.peak_intermediate_bytes = 8 * 16384 + 8 * 16400;
  p.guards = {"s0 in [2, 1048576] (input 0 (x) dim 0)", "s0 != 3 (cat)"};
  return p;
}

json base() { return json::parse(plan::plan_to_json(make_plan())); }

std::string plan_error(const std::string& text, const std::string& source = "plan.json") {
  return error_of([&] { plan::plan_from_json(text, source); });
}

// The error for `text` contains every fragment.
void expect_text_error(const std::string& text, std::initializer_list<std::string> fragments) {
  const std::string what = plan_error(text);
  BOOST_TEST_CONTEXT(text) {
    for (const std::string& f : fragments)
      BOOST_TEST(contains(what, f), "message \"" << what << "\" lacks \"" << f << "\"");
  }
}

void expect_error(const json& doc, std::initializer_list<std::string> fragments) {
  expect_text_error(doc.dump(), fragments);
}

// The error for `doc` is exactly `message`.
void expect_exact(const json& doc, const std::string& message) {
  BOOST_TEST(plan_error(doc.dump()) == message);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(plan_json)

BOOST_AUTO_TEST_CASE(round_trip_is_byte_identical) {
  const plan::KernelPlan p = make_plan();
  const std::string text = plan::plan_to_json(p);
  plan::KernelPlan q;
  try {
    q = plan::plan_from_json(text, "plan.json");
  } catch (const Error& e) {
    BOOST_FAIL("plan_from_json failed: " << e.what() << "\n" << text);
  }
  BOOST_TEST(plan::plan_to_json(q) == text);
  // A third generation, and the compact form of the same document, read back alike.
  BOOST_TEST(plan::plan_to_json(plan::plan_from_json(plan::plan_to_json(q))) == text);
  BOOST_TEST(plan::plan_to_json(plan::plan_from_json(json::parse(text).dump())) == text);

  // What came back, field by field where the text alone would not show it.
  BOOST_TEST(q.version == plan::kPlanVersion);
  BOOST_TEST(q.target == "cpu");
  BOOST_TEST(q.prelude == p.prelude);
  BOOST_TEST((q.symbols == p.symbols));
  BOOST_TEST((q.facts == p.facts));
  BOOST_REQUIRE_EQUAL(q.bindings.size(), 1u);
  BOOST_TEST(q.bindings[0].symbol == 0u);
  BOOST_REQUIRE_EQUAL(q.buffers.size(), p.buffers.size());
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    BOOST_TEST_CONTEXT("buffer " << i) {
      BOOST_TEST(q.buffers[i].kind == p.buffers[i].kind);
      BOOST_TEST((q.buffers[i].dtype == p.buffers[i].dtype));
      BOOST_TEST((q.buffers[i].sizes == p.buffers[i].sizes));
      BOOST_TEST((q.buffers[i].strides == p.buffers[i].strides));
      BOOST_TEST(q.buffers[i].index == p.buffers[i].index);
      BOOST_TEST(q.buffers[i].slot == p.buffers[i].slot);
      BOOST_TEST(shape_hints(q.buffers[i].sizes) == shape_hints(p.buffers[i].sizes));
    }
  }
  BOOST_REQUIRE(q.buffers[1].data);
  BOOST_TEST((*q.buffers[1].data == *p.buffers[1].data));
  BOOST_TEST(!q.buffers[0].data);
  BOOST_TEST((q.slots == p.slots));
  BOOST_TEST(q.slots[0].hint() == 8 * 16384);
  BOOST_REQUIRE_EQUAL(q.kernels.size(), p.kernels.size());
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    const plan::PlanKernel& a = p.kernels[i];
    const plan::PlanKernel& b = q.kernels[i];
    BOOST_TEST_CONTEXT("kernel " << i) {
      BOOST_TEST(b.name == a.name);
      BOOST_TEST(b.kind == a.kind);
      BOOST_TEST(b.entry == a.entry);
      BOOST_TEST(b.source == a.source);
      BOOST_TEST((b.parallel_extent == a.parallel_extent));
      BOOST_TEST(b.grain == a.grain);
      BOOST_TEST(b.provenance == a.provenance);
      BOOST_TEST(b.reads == a.reads);
      BOOST_TEST(b.writes == a.writes);
      if (a.kind == "reference") {
        BOOST_TEST((b.op == a.op));
        BOOST_TEST((b.attrs == a.attrs));
        BOOST_TEST(b.inputs == a.inputs);
        BOOST_TEST(b.output == a.output);
      }
    }
  }
  BOOST_TEST(q.kernels[0].source == kSource);
  BOOST_TEST(q.kernels[0].variants == p.kernels[0].variants);
  BOOST_TEST(std::isinf(q.kernels[1].attrs.f(1)));
  BOOST_TEST(q.outputs == p.outputs);
  BOOST_TEST(q.peak_intermediate_bytes == p.peak_intermediate_bytes);
  BOOST_TEST(q.guards == p.guards);
  BOOST_TEST(q.module_source() == p.module_source());
  BOOST_TEST(q.str() == p.str());
}

// The module text taken out (what the compile caches keep beside the JSON) and put back gives
// the same plan; names that are no part of a plan's text are left alone, and a kernel the plan
// lacks is an error.
// A plan written for later carries what made it; plan_difference names the first part of a plan
// that is not the one Kiln made, ignoring origins.
BOOST_AUTO_TEST_CASE(origin_round_trips_and_differences_are_named) {
  plan::KernelPlan p = make_plan();
  BOOST_TEST(!contains(plan::plan_to_json(p), "origin"));  // only where one was recorded
  p.origin.graph = R"({"format": "kiln.graph", "version": 1, "nodes": [], "outputs": []})";
  p.origin.request = {{"arch", "90"}};
  p.origin.options = {{"fusion.max_fusion_size", "64"}, {"debug_dir", ""}};
  p.origin.kiln_version = "0.1.0+0123456789abcdef";
  const std::string text = plan::plan_to_json(p);
  const plan::KernelPlan q = plan::plan_from_json(text, "plan.json");
  BOOST_TEST(q.origin.graph == p.origin.graph);
  BOOST_TEST((q.origin.request == p.origin.request));
  BOOST_TEST((q.origin.options == p.origin.options));
  BOOST_TEST(q.origin.kiln_version == p.origin.kiln_version);
  BOOST_TEST(plan::plan_to_json(q) == text);

  plan::KernelPlan made = make_plan();  // no origin: origins are not compared
  BOOST_TEST(plan::plan_difference(p, made) == "");
  plan::KernelPlan edited = p;
  edited.kernels[4].source += "; more\n";
  BOOST_TEST(plan::plan_difference(edited, made) == "kernels[4] ('k4_sum'): its 'source'");
  edited = p;
  edited.kernels[0].parallel_extent = 7;
  BOOST_TEST(plan::plan_difference(edited, made) == "kernels[0] ('k0_exp'): its 'parallel_extent'");
  edited = p;
  edited.prelude += "declare i32 @system(ptr)\n";
  BOOST_TEST(plan::plan_difference(edited, made) == "'prelude'");
  edited = p;
  edited.kernels.pop_back();
  BOOST_TEST(plan::plan_difference(edited, made) == "'kernels': it has 5 entries, Kiln's plan 6");
  edited = p;
  edited.buffers[1].data = nullptr;
  BOOST_TEST(plan::plan_difference(edited, made) == "buffers[1]: its 'data'");
}

// An origin is an object of the four fields, each of its type, with a graph.
BOOST_AUTO_TEST_CASE(malformed_origins) {
  json doc = base();
  doc["origin"] = {{"graph", "{}"}, {"request", json::object()}, {"options", json::object()}, {"kiln_version", "v"}};
  BOOST_CHECK_NO_THROW(plan::plan_from_json(doc.dump()));
  json bad = doc;
  bad["origin"]["graph"] = "";
  expect_error(bad, {"origin", "graph", "empty"});
  bad = doc;
  bad["origin"]["options"] = {{"fusion.max_fusion_size", 64}};
  expect_error(bad, {"origin.options", "fusion.max_fusion_size"});
  bad = doc;
  bad["origin"]["signature"] = "x";
  expect_error(bad, {"origin", "signature"});
  bad = doc;
  bad["origin"].erase("kiln_version");
  expect_error(bad, {"origin", "kiln_version"});
}

BOOST_AUTO_TEST_CASE(plan_text_comes_out_and_goes_back) {
  plan::KernelPlan p = make_plan();
  const std::string whole = plan::plan_to_json(p);
  std::vector<std::pair<std::string, std::string>> parts = plan::take_plan_text(p);
  BOOST_TEST(p.prelude.empty());
  for (const plan::PlanKernel& k : p.kernels) BOOST_TEST(k.source.empty());
  BOOST_TEST(parts.size() >= 3u);
  BOOST_TEST(parts[0].first == "plan.prelude");
  plan::KernelPlan q = plan::plan_from_json(plan::plan_to_json(p));
  std::string other = "bytes";
  BOOST_TEST(!plan::put_plan_text(q, "module0.o", std::move(other)));
  BOOST_TEST(other == "bytes");  // not taken
  BOOST_TEST(!plan::put_plan_text(q, "kernel1.sources", std::string("x")));
  BOOST_TEST(!plan::put_plan_text(q, "kernel01.source", std::string("x")));
  for (auto& [name, text] : parts) BOOST_TEST(plan::put_plan_text(q, name, std::move(text)), name);
  BOOST_TEST(plan::plan_to_json(q) == whole);
  const std::string what = error_of([&] { plan::put_plan_text(q, "kernel99.source", std::string("x")); });
  BOOST_TEST(what.find("kernel99.source") != std::string::npos, what);
}

// A cache entry keeps the kernels' text beside the plan: a kernel of fixed signature (CUDA's
// flash attention) is checked for its source once the text is back, not before (every cuda plan
// holding one was refused as a cache hit and compiled again).
BOOST_AUTO_TEST_CASE(a_fixed_signature_kernel_comes_back_with_its_text) {
  plan::KernelPlan p = make_plan();
  p.kernels[0].arg_buffers = {0, 1, 2};
  const std::string whole = plan::plan_to_json(p);
  BOOST_TEST(plan::plan_to_json(plan::plan_from_json(whole)) == whole);
  std::vector<std::pair<std::string, std::string>> parts = plan::take_plan_text(p);
  parts.emplace_back("module0.o", "object bytes");
  const std::string bare = plan::plan_to_json(p);
  std::vector<std::pair<std::string, std::string>> kept = parts;
  BOOST_TEST(plan::plan_to_json(plan::plan_from_json(bare, "entry", kept)) == whole);
  BOOST_REQUIRE_EQUAL(kept.size(), 1u);  // the object stays with the caller
  BOOST_TEST(kept[0].first == "module0.o");
  // Without its text the kernel is refused, by the same check as a plan file's.
  std::vector<std::pair<std::string, std::string>> no_text{{"module0.o", "object bytes"}};
  const std::string what = error_of([&] { plan::plan_from_json(bare, "entry", no_text); });
  BOOST_TEST(what.find("kernels[0].arg_buffers: only generated kernels (with a source) take arguments") != std::string::npos, what);
}

BOOST_AUTO_TEST_CASE(layout_is_fixed) {
  const std::string text = plan::plan_to_json(make_plan());
  BOOST_TEST(plan::plan_to_json(make_plan()) == text);
  BOOST_TEST(text.rfind("{\n  \"format\": \"kiln.plan\",\n  \"version\": 1,\n  \"target\": \"cpu\",\n", 0) == 0u);
  BOOST_TEST(text.back() == '}');
  for (const char* part : {
           R"(    {"symbol": "s0", "input": 0, "dim": 0})",
           R"(    {"id": 0, "kind": "input", "dtype": "f32", "sizes": ["s0", 4096], "strides": [4096, 1], "index": 0, "slot": -1})",
           R"("data": {"dtype": "f32", "shape": [2, 3], "data_base64": ")",
           R"(    {"id": 4, "kind": "output", "dtype": "f32", "sizes": ["2*s0", 4100], "strides": [4100, 1], "index": 0, "slot": -1})",
           R"(  "slots": [
    "16384*s0",
    "16400*s0"
  ],)",
           R"("parallel_extent": "4096*s0", "grain": 32768, "provenance": [1, 2], "reads": [0, 1], "writes": [2]})",
           R"("source": "define void @k0_exp(ptr %buffers, ptr %sizes, i64 %begin, i64 %end) {\nentry:\n  %s0 = load i64, ptr %sizes ; \"s0\", tab:\t, backslash: \\\n  ret void\n}\n")",
           R"("op": "pad", "attrs": {"pads": [1, 3], "value": "-inf"}, "inputs": [2], "output": 3})",
           R"("op": "cat", "attrs": {"dim": 0}, "inputs": [3, 3], "output": 4})",
           R"("op": "full", "attrs": {"shape": ["s0", 2], "value": 0.1, "dtype": "f16"}, "inputs": [], "output": 5})",
           R"("op": "sum", "attrs": {"dims": [1], "keepdim": true}, "inputs": [2], "output": 7})",
           R"(  "outputs": [4, 6, 7],)",
           R"(  "peak_intermediate_bytes": 262272,)",
       })
    BOOST_TEST(contains(text, part), "missing: " << part << "\nin:\n" << text);
  // One item a line (a kernel's multi-line source is one escaped string): "{", the 13 keys,
  // the items of the 7 lists that print as blocks, each block's "]" and the closing "}".
  const json doc = json::parse(text);
  size_t lines = 1;
  for (char ch : text) lines += ch == '\n';
  const size_t items = doc["symbols"].size() + doc["facts"].size() + doc["bindings"].size() + doc["buffers"].size() +
                       doc["slots"].size() + doc["kernels"].size() + doc["guards"].size();
  BOOST_TEST(lines == 1 + 13 + items + 7 + 1);
}

BOOST_AUTO_TEST_CASE(empty_plan) {
  plan::KernelPlan p;
  p.target = "cpu";
  const std::string text = plan::plan_to_json(p);
  BOOST_TEST(plan::plan_to_json(plan::plan_from_json(text)) == text);
  BOOST_TEST(contains(text, "\"kernels\": [],"));
  BOOST_TEST(contains(text, "\"guards\": []\n}"));
}

BOOST_AUTO_TEST_CASE(non_finite_and_exact_floats) {
  plan::KernelPlan p = make_plan();
  for (double v : {std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::quiet_NaN(), -0.0, 1e-300,
                   0.1 + 0.2}) {
    p.kernels[1].attrs.values[1] = v;
    const std::string text = plan::plan_to_json(p);
    const plan::KernelPlan q = plan::plan_from_json(text);
    BOOST_TEST((q.kernels[1].attrs == p.kernels[1].attrs));
    BOOST_TEST(std::signbit(q.kernels[1].attrs.f(1)) == std::signbit(v));
    BOOST_TEST(plan::plan_to_json(q) == text);
  }
}

BOOST_AUTO_TEST_CASE(writer_errors) {
  plan::KernelPlan p = make_plan();
  p.kernels[1].attrs = {};
  BOOST_TEST(error_of([&] { plan::plan_to_json(p); }) ==
             "plan_to_json: kernel 1 (k1_pad) has 0 attributes; the op declares 2");
  p = make_plan();
  p.kernels[0].source = "bad \xff byte";
  BOOST_TEST(contains(error_of([&] { plan::plan_to_json(p); }), "plan_to_json: cannot write the plan as JSON"));
}

BOOST_AUTO_TEST_CASE(base_document_is_valid) { BOOST_CHECK_NO_THROW(plan::plan_from_json(base().dump())); }

BOOST_AUTO_TEST_CASE(not_json) {
  expect_text_error("{\"format\": \"kiln.plan\",\n \"version\": 1,", {"plan.json: invalid JSON", "line 2"});
  expect_text_error("", {"plan.json: invalid JSON"});
  expect_text_error("[1, 2]", {"plan.json: expected a JSON object at the top level, got an array"});
  expect_text_error(std::string(10000, '[') + std::string(10000, ']'), {"plan.json: JSON nested deeper than 64 levels"});
}

BOOST_AUTO_TEST_CASE(format_and_version) {
  json d = base();
  d["format"] = "kiln.graph";
  expect_exact(d, "plan.json: format: expected \"kiln.plan\", got string \"kiln.graph\"");
  d.erase("format");
  expect_exact(d, "plan.json: missing field 'format' (expected \"kiln.plan\")");
  d = base();
  d["version"] = 2;
  expect_exact(d, "plan.json: version: unsupported plan format version 2; this build of Kiln reads version 1");
  d["version"] = "1";
  expect_error(d, {"plan.json: version: unsupported plan format version \"1\""});
  d.erase("version");
  expect_exact(d, "plan.json: missing field 'version' (this build reads version 1)");
}

BOOST_AUTO_TEST_CASE(missing_and_unknown_fields) {
  for (const char* key : {"target", "prelude", "symbols", "facts", "bindings", "buffers", "slots", "kernels", "outputs",
                          "peak_intermediate_bytes", "guards"}) {
    json d = base();
    d.erase(key);
    expect_exact(d, std::string("plan.json: missing field '") + key + "'");
  }
  json d = base();
  d["extra"] = 1;
  expect_error(d, {"plan.json: unknown field 'extra' (expected 'format', 'version', 'target'"});
  d = base();
  d["kernels"][4].erase("grain");
  expect_exact(d, "plan.json: kernels[4]: missing field 'grain'");
  d = base();
  d["kernels"][1].erase("attrs");
  expect_exact(d, "plan.json: kernels[1]: missing field 'attrs'");
  d = base();
  d["buffers"][3].erase("slot");
  expect_exact(d, "plan.json: buffers[3]: missing field 'slot'");
  d = base();
  d["kernels"][0]["op"] = "exp";  // only reference kernels name an op
  expect_error(d, {"plan.json: kernels[0]: unknown field 'op' (expected 'name', 'kind'"});
  d = base();
  d["buffers"][1].erase("data");
  expect_exact(d, "plan.json: buffers[1]: missing field 'data' (a constant buffer holds its data)");
  d = base();
  d["buffers"][0]["data"] = d["buffers"][1]["data"];
  expect_exact(d, "plan.json: buffers[0].data: only constant buffers hold data; this one is an input buffer");
}

BOOST_AUTO_TEST_CASE(mistyped_fields) {
  json d = base();
  d["kernels"][0]["grain"] = "8";
  expect_exact(d, "plan.json: kernels[0].grain: expected an integer, got string \"8\"");
  d = base();
  d["kernels"][0]["source"] = 5;
  expect_exact(d, "plan.json: kernels[0].source: expected a string, got number 5");
  d = base();
  d["buffers"][0]["sizes"] = "s0";
  expect_exact(d, "plan.json: buffers[0].sizes: expected an array, got string \"s0\"");
  d = base();
  d["buffers"][0]["sizes"][1] = 4096.5;
  expect_error(d, {"plan.json: buffers[0].sizes[1]: expected an integer, got number 4096.5"});
  d = base();
  d["kernels"] = json::object();
  expect_exact(d, "plan.json: kernels: expected an array, got an object");
  d = base();
  d["kernels"][2] = 3;
  expect_exact(d, "plan.json: kernels[2]: expected an object, got number 3");
  d = base();
  d["guards"][1] = json::array();
  expect_exact(d, "plan.json: guards[1]: expected a string, got an array");
  d = base();
  d["target"] = nullptr;
  expect_exact(d, "plan.json: target: expected a string, got null");
  d = base();
  d["buffers"][2]["index"] = int64_t{1} << 40;
  expect_exact(d, "plan.json: buffers[2].index: integer 1099511627776 does not fit in 32 bits");
  d = base();
  d["kernels"][0]["provenance"][1] = -1;
  expect_exact(d, "plan.json: kernels[0].provenance[1]: expected a node id (0 or more), got -1");
  d = base();
  d["kernels"][0]["grain"] = 0;
  expect_exact(d, "plan.json: kernels[0].grain: the grain must be at least 1, got 0");
  d = base();
  d["peak_intermediate_bytes"] = -1;
  expect_exact(d, "plan.json: peak_intermediate_bytes: negative byte count -1");
  d = base();
  d["kernels"][0]["parallel_extent"] = -4;
  expect_exact(d, "plan.json: kernels[0].parallel_extent: negative size -4");
  // Checks: their counts are the last outputs, 0-d i64 output buffers.
  d = base();
  d["checks"] = json::array({"an index outside its dim"});
  BOOST_CHECK_EXCEPTION(plan::plan_from_json(d.dump()), Error, [](const Error& e) {
    return std::string(e.what()).find(": checks[0]: its count, outputs[") != std::string::npos &&
           std::string(e.what()).find("must be a 0-d i64 output buffer") != std::string::npos;
  });
  d["checks"] = json::array({"a", "b", "c", "d", "e", "f", "g", "h"});
  BOOST_CHECK_EXCEPTION(plan::plan_from_json(d.dump()), Error, [](const Error& e) {
    return std::string(e.what()).find(": checks: the plan has 8 checks and only") != std::string::npos;
  });
  d["checks"] = json::array({3});
  expect_exact(d, "plan.json: checks[0]: expected a string, got number 3");
}

// A GPU plan's launch fields and the compute capability it was generated for.
BOOST_AUTO_TEST_CASE(gpu_launch_and_arch) {
  plan::KernelPlan p = make_plan();
  p.arch = 90;
  p.kernels[0].launch = plan::PlanLaunch{256, 128, 0, 82944, false};
  p.kernels[4].launch = plan::PlanLaunch{512, 1, 1024, 0, true};
  const std::string text = plan::plan_to_json(p);
  const plan::KernelPlan q = plan::plan_from_json(text, "plan.json");
  BOOST_TEST(q.arch == 90);
  BOOST_TEST((q.kernels[0].launch == p.kernels[0].launch));
  BOOST_TEST((q.kernels[4].launch == p.kernels[4].launch));
  BOOST_TEST(plan::plan_to_json(q) == text);
  BOOST_TEST(!contains(plan::plan_to_json(make_plan()), "\"arch\""));  // 0: not written

  json d = json::parse(text);
  d["kernels"][0]["launch"]["grid_stride"] = "no";
  expect_exact(d, "plan.json: kernels[0].launch.grid_stride: expected true or false");
  d = json::parse(text);
  d["kernels"][0]["launch"]["max_blocks"] = 4;
  expect_error(d, {"kernels[0].launch.max_blocks", "grid_stride false", "max_blocks must be 0, got 4"});
  d = json::parse(text);
  d["arch"] = 1000;
  expect_error(d, {"plan.json: arch", "compute capability 1000 out of range"});
}

// A gemm shader's output tile (how the vulkan runtime sizes its dispatch) round trips, is
// written only where set, and is [rows, cols] of positive sizes.
BOOST_AUTO_TEST_CASE(gemm_tile) {
  plan::KernelPlan p = make_plan();
  plan::PlanGemm g;
  g.a = g.b = 0;
  g.c = 2;
  g.m = 4;
  g.n = 8;
  g.k = 2;
  g.a_row_stride = 2;
  g.a_col_stride = 1;
  g.b_row_stride = 8;
  g.b_col_stride = 1;
  p.kernels[0].kind = "matmul";
  p.kernels[0].gemm = g;
  BOOST_TEST(!contains(plan::plan_to_json(p), "\"tile\""));
  p.kernels[0].gemm->tile = {128, 64};
  const std::string text = plan::plan_to_json(p);
  const plan::KernelPlan q = plan::plan_from_json(text, "plan.json");
  BOOST_REQUIRE(q.kernels[0].gemm);
  BOOST_TEST((q.kernels[0].gemm->tile == std::array<int64_t, 2>{128, 64}));
  BOOST_TEST(plan::plan_to_json(q) == text);
  for (const json& bad : {json::array({0, 64}), json::array({128}), json("big"), json::array({128, 1 << 20})}) {
    json d = json::parse(text);
    d["kernels"][0]["gemm"]["tile"] = bad;
    expect_error(d, {"kernels[0].gemm", "tile", "from 1 to 4096"});
  }
}

BOOST_AUTO_TEST_CASE(buffer_references) {
  json d = base();
  d["kernels"][2]["reads"][0] = 17;
  expect_exact(d, "plan.json: kernels[2].reads[0]: buffer 17 does not exist (the plan has 8 buffers)");
  d = base();
  d["kernels"][0]["writes"][0] = -1;
  expect_exact(d, "plan.json: kernels[0].writes[0]: buffer -1 does not exist (the plan has 8 buffers)");
  d = base();
  d["kernels"][2]["inputs"][1] = 8;
  expect_exact(d, "plan.json: kernels[2].inputs[1]: buffer 8 does not exist (the plan has 8 buffers)");
  d = base();
  d["kernels"][1]["output"] = 99;
  expect_exact(d, "plan.json: kernels[1].output: buffer 99 does not exist (the plan has 8 buffers)");
  d = base();
  d["outputs"][2] = 8;
  expect_exact(d, "plan.json: outputs[2]: buffer 8 does not exist (the plan has 8 buffers)");
  d = base();
  d["buffers"][2]["id"] = 7;
  expect_exact(d, "plan.json: buffers[2].id: buffers must be listed with ids 0, 1, ... in order: expected 2, got 7");
  d = base();
  d["buffers"][2]["slot"] = 9;
  expect_exact(d, "plan.json: buffers[2].slot: slot 9 does not exist (the plan has 2 slots)");
  d["buffers"][2]["slot"] = -1;
  expect_exact(d, "plan.json: buffers[2].slot: an intermediate buffer needs a memory slot, got -1");
  d = base();
  d["buffers"][0]["index"] = -1;
  expect_exact(d, "plan.json: buffers[0].index: an input buffer needs its position among the graph's inputs (0 or more), got -1");
  d = base();
  d["buffers"][2]["index"] = -2;
  expect_exact(d, "plan.json: buffers[2].index: expected a position (0 or more) or -1, got -2");
}

BOOST_AUTO_TEST_CASE(unknown_kinds_ops_and_dtypes) {
  json d = base();
  d["kernels"][0]["kind"] = "fused";
  expect_exact(d, "plan.json: kernels[0].kind: unknown kernel kind 'fused' (valid kinds are pointwise, reduction, "
                  "matmul, attention, convolution, reference, custom)");
  d = base();
  d["buffers"][3]["kind"] = "temp";
  expect_exact(d, "plan.json: buffers[3].kind: unknown buffer kind 'temp' (valid kinds are input, constant, output, "
                  "intermediate)");
  d = base();
  d["kernels"][1]["op"] = "ppad";
  expect_exact(d, "plan.json: kernels[1].op: unknown op 'ppad' (did you mean 'pad'?)");
  d["kernels"][1]["op"] = "input";
  expect_exact(d, "plan.json: kernels[1].op: a reference kernel cannot run 'input' (inputs are buffers)");
  d = base();
  d["buffers"][0]["dtype"] = "float32";
  expect_error(d, {"plan.json: buffers[0].dtype: unknown dtype 'float32'", "valid dtypes are bool, i32"});
  d = base();
  d["buffers"][1]["data"]["dtype"] = "f128";
  expect_error(d, {"plan.json: buffers[1].data.dtype: unknown dtype 'f128'"});
}

BOOST_AUTO_TEST_CASE(reference_kernel_attributes) {
  json d = base();
  d["kernels"][1]["attrs"]["pads"] = "x";
  expect_exact(d, "plan.json: kernels[1].attrs.pads: expected an array, got string \"x\"");
  d = base();
  d["kernels"][1]["attrs"]["pads"][1] = 1.5;
  expect_exact(d, "plan.json: kernels[1].attrs.pads[1]: expected an integer, got number 1.5 (too large, or not whole)");
  d = base();
  d["kernels"][1]["attrs"]["value"] = "-infinity";
  expect_error(d, {"plan.json: kernels[1].attrs.value: expected a number (or \"inf\", \"-inf\", \"nan\")"});
  d = base();
  d["kernels"][1]["attrs"].erase("value");
  expect_exact(d, "plan.json: kernels[1].attrs.value: missing attribute 'value' of kind float");
  d = base();
  d["kernels"][1]["attrs"]["mode"] = "reflect";
  expect_exact(d, "plan.json: kernels[1].attrs: unknown attribute 'mode' (expected 'pads', 'value')");
  d = base();
  d["kernels"][2]["attrs"]["dim"] = "0";
  expect_exact(d, "plan.json: kernels[2].attrs.dim: expected an integer, got string \"0\"");
  d = base();
  d["kernels"][3]["attrs"]["dtype"] = "half";
  expect_error(d, {"plan.json: kernels[3].attrs.dtype: unknown dtype 'half'"});
  d = base();
  d["kernels"][3]["attrs"]["shape"][0] = "s1";
  expect_exact(d, "plan.json: kernels[3].attrs.shape[0]: size expression \"s1\" uses s1, but the plan declares 1 symbols");
  d = base();
  d["kernels"][5]["attrs"]["keepdim"] = 1;
  expect_exact(d, "plan.json: kernels[5].attrs.keepdim: expected true or false, got number 1");
  // The op's shape rule runs on the input buffers: a dim out of range, a wrong arity, an
  // output buffer of another type.
  d = base();
  d["kernels"][2]["attrs"]["dim"] = 5;
  expect_error(d, {"plan.json: kernels[2]: cat:"});
  d = base();
  d["kernels"][1]["inputs"] = json::array({2, 2});
  expect_exact(d, "plan.json: kernels[1].inputs: pad takes 1 input, got 2");
  d = base();
  d["kernels"][1]["output"] = 2;
  expect_exact(d, "plan.json: kernels[1].output: buffer 2 is f32[s0, 4096], but pad of the inputs gives f32[s0, 4100]");
  d = base();
  d["kernels"][2]["attrs"]["dim"] = 1;  // cat along dim 1 is f32[s0, 8200], not b4's f32[2*s0, 4100]
  expect_exact(d, "plan.json: kernels[2].output: buffer 4 is f32[2*s0, 4100], but cat of the inputs gives f32[s0, 8200]");
}

BOOST_AUTO_TEST_CASE(sizes_and_constants) {
  json d = base();
  d["buffers"][0]["sizes"][0] = "s5";
  expect_exact(d, "plan.json: buffers[0].sizes[0]: size expression \"s5\" uses s5, but the plan declares 1 symbols");
  d["buffers"][0]["sizes"][0] = "s0 - 9";
  expect_exact(d, "plan.json: buffers[0].sizes[0]: size \"s0 - 9\" is negative (-1) at the symbols' examples");
  d["buffers"][0]["sizes"][0] = "s0 +* 2";
  expect_error(d, {"plan.json: buffers[0].sizes[0]: bad size expression \"s0 +* 2\""});
  d = base();
  d["slots"][1] = "9223372036854775807*s0";
  expect_error(d, {"plan.json: slots[1]: size expression", "is too large"});
  d = base();
  d["buffers"][0]["strides"] = json::array({1});
  expect_exact(d, "plan.json: buffers[0].strides: has 1 strides for a buffer of rank 2");
  d = base();
  d["buffers"][1]["data"]["data_base64"] = "AAAA";
  expect_exact(d, "plan.json: buffers[1].data.data_base64: holds 3 bytes (or is not base64); a f32 tensor of shape "
                  "[2, 3] needs 24");
  d = base();
  d["buffers"][1]["dtype"] = "i32";
  expect_exact(d, "plan.json: buffers[1].data.dtype: the data is f32, the buffer i32");
  d = base();
  d["buffers"][1]["sizes"] = json::array({3, 2});
  expect_exact(d, "plan.json: buffers[1].data.shape: the data has shape [2, 3], the buffer sizes [3, 2]");
}

BOOST_AUTO_TEST_CASE(symbols_bindings_and_facts) {
  json d = base();
  d["symbols"][0]["name"] = "s1";
  expect_exact(d, "plan.json: symbols[0].name: symbols must be listed as s0, s1, ... in order: expected 's0', got 's1'");
  d = base();
  d["symbols"][0]["example"] = 1;
  expect_exact(d, "plan.json: symbols[0].example: example 1 is outside the range [2, 1048576]");
  d = base();
  d["facts"][0]["lhs"] = "s9";
  expect_exact(d, "plan.json: facts[0].lhs: size expression \"s9\" uses s9, but the plan declares 1 symbols");
  d = base();
  d["bindings"][0]["symbol"] = "s3";
  expect_exact(d, "plan.json: bindings[0].symbol: unknown symbol 's3' (the plan declares 1 symbols, s0..s0)");
  d["bindings"][0]["symbol"] = "s00";
  expect_error(d, {"plan.json: bindings[0].symbol: unknown symbol 's00'"});
  d["bindings"][0]["symbol"] = 0;
  expect_exact(d, "plan.json: bindings[0].symbol: expected a string, got number 0");
  d = base();
  d["bindings"][0]["input"] = 4;
  expect_exact(d, "plan.json: bindings[0].input: no input buffer has index 4");
  d = base();
  d["bindings"][0]["dim"] = 2;
  expect_exact(d, "plan.json: bindings[0].dim: dim 2 is out of range for input 0 (buffer 0, of rank 2)");
  d["bindings"][0]["dim"] = 1;
  expect_exact(d, "plan.json: bindings[0]: input 0 dim 1 has size 4096, not s0");
  d = base();
  d["bindings"] = json::array();
  expect_exact(d, "plan.json: bindings: symbol s0 has no binding, so the plan cannot learn its value");
  d = base();
  d["bindings"].push_back(d["bindings"][0]);
  expect_exact(d, "plan.json: bindings[1].symbol: s0 is already bound by bindings[0]");
}

BOOST_AUTO_TEST_CASE(source_name_starts_every_message) {
  json d = base();
  d["kernels"][1]["op"] = "ppad";
  BOOST_TEST(plan_error(d.dump(), "models/p.json").rfind("models/p.json: kernels[1].op: ", 0) == 0u);
  BOOST_TEST(error_of([] { plan::plan_from_json("{"); }).rfind("<plan>: invalid JSON", 0) == 0u);
}

BOOST_AUTO_TEST_CASE(only_kiln_errors) {
  // Truncations and single-byte corruptions of a valid file: every outcome is a successful
  // parse or a kiln::Error, never a crash or another exception.
  const std::string text = base().dump();
  size_t parsed = 0;
  for (size_t n = 0; n < text.size(); n += 7) {
    try {
      plan::plan_from_json(text.substr(0, n));
      ++parsed;
    } catch (const Error&) {
    }
  }
  for (size_t i = 0; i < text.size(); i += 3) {
    for (char ch : {'0', '-', '"', '}', 'e', '9', ']'}) {
      std::string t = text;
      t[i] = ch;
      try {
        plan::plan_from_json(t);
        ++parsed;
      } catch (const Error&) {
      }
    }
  }
  BOOST_TEST(parsed < text.size());
}

BOOST_AUTO_TEST_SUITE_END()
