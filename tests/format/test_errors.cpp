// Malformed graph files: each must give a kiln::Error whose message names the problem and
// where it is, never a crash or another exception type.
#include <nlohmann/json.hpp>

#include "helpers.h"

using namespace kiln;
using format_test::meta;
using format_test::parse_error;
using json = nlohmann::ordered_json;

namespace {

// nodes: 0 x f32[4, 3], 1 w f32[3, 5], 2 matmul -> f32[4, 5], 3 softmax, 4 constant f32[2]
json base() {
  Graph g;
  const NodeId x = g.add_input(meta(DType::f32, {4, 3}), "x");
  const NodeId w = g.add_input(meta(DType::f32, {3, 5}), "w");
  const NodeId m = g.add(OpId::matmul, {x, w});
  const NodeId s = g.add(OpId::softmax, {m}, {int64_t{1}});
  auto c = std::make_shared<ConstantData>();
  c->sizes = {2};
  c->bytes.resize(8);
  const NodeId k = g.add(OpId::constant, {}, {std::shared_ptr<const ConstantData>(c)});
  g.set_outputs({s, k});
  return json::parse(format::to_json(g));
}

// The error for `doc` contains every fragment.
void expect_text_error(const std::string& text, std::initializer_list<std::string> fragments) {
  const std::string what = parse_error(text);
  BOOST_TEST_CONTEXT(text) {
    BOOST_TEST(!what.empty(), "parsed without an error");
    for (const std::string& f : fragments)
      BOOST_TEST(what.find(f) != std::string::npos, "message \"" << what << "\" lacks \"" << f << "\"");
  }
}

void expect_error(const json& doc, std::initializer_list<std::string> fragments) {
  expect_text_error(doc.dump(), fragments);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(errors)

BOOST_AUTO_TEST_CASE(base_document_is_valid) { BOOST_TEST(parse_error(base().dump()) == ""); }

BOOST_AUTO_TEST_CASE(bad_json) {
  expect_text_error("{\"format\": \"kiln.graph\",\n \"version\": 1,", {"graph.json: invalid JSON", "line 2"});
  expect_text_error("", {"graph.json: invalid JSON"});
  expect_text_error("[1, 2]", {"expected a JSON object at the top level"});
  expect_text_error(std::string(10000, '[') + std::string(10000, ']'), {"nested deeper than"});
  expect_text_error("{\"format\": \"kiln.graph\", \"version\": 1, \"nodes\": [], \"outputs\": [], \"x\": \"\xff\"}",
                    {"invalid JSON"});
}

BOOST_AUTO_TEST_CASE(format_and_version) {
  json d = base();
  d.erase("version");
  expect_error(d, {"graph.json: missing field 'version'"});
  d = base();
  d["version"] = 2;
  expect_error(d, {"field 'version'", "unsupported graph format version 2", "reads version 1"});
  d["version"] = "1";
  expect_error(d, {"unsupported graph format version \"1\""});
  d = base();
  d["format"] = "onnx";
  expect_error(d, {"field 'format'", "expected \"kiln.graph\""});
  d = base();
  d.erase("format");
  expect_error(d, {"missing field 'format'"});
  d = base();
  d["extra"] = 1;
  expect_error(d, {"unknown field 'extra'"});
  d = base();
  d.erase("nodes");
  expect_error(d, {"missing field 'nodes'"});
}

BOOST_AUTO_TEST_CASE(unknown_op) {
  json d = base();
  d["nodes"][3]["op"] = "sofmax";
  expect_error(d, {"graph.json: node 3: unknown op 'sofmax' (did you mean 'softmax'?)"});
  d["nodes"][3]["op"] = "completely_unknown_thing";
  expect_error(d, {"node 3: unknown op 'completely_unknown_thing'"});
  d["nodes"][3]["op"] = 7;
  expect_error(d, {"node 3: field 'op': expected a string, got number 7"});
}

BOOST_AUTO_TEST_CASE(wrong_arity) {
  json d = base();
  d["nodes"][2]["inputs"] = json::array({0});
  expect_error(d, {"graph.json: node 2 (matmul): field 'inputs': expected 2 inputs, got 1"});
  d["nodes"][2]["inputs"] = json::array({0, 1, 1});
  expect_error(d, {"node 2 (matmul): field 'inputs': expected 2 inputs, got 3"});
  d = base();
  d["nodes"][3]["inputs"] = json::array();
  expect_error(d, {"node 3 (softmax): field 'inputs': expected 1 input, got 0"});
}

BOOST_AUTO_TEST_CASE(forward_and_bad_references) {
  json d = base();
  d["nodes"][2]["inputs"] = json::array({0, 3});
  expect_error(d, {"node 2 (matmul): field 'inputs': input 1 refers to node 3", "listed before it"});
  d["nodes"][2]["inputs"] = json::array({0, 2});
  expect_error(d, {"input 1 refers to node 2"});
  d["nodes"][2]["inputs"] = json::array({-1, 1});
  expect_error(d, {"input 0 refers to node -1"});
  d = base();
  d["outputs"] = json::array({9});
  expect_error(d, {"field 'outputs': output 0 refers to node 9, but the graph has 5 nodes"});
  d = base();
  d["nodes"][1]["id"] = 7;
  expect_error(d, {"node 1 (input): field 'id': nodes must be listed with ids 0, 1, ... in order: expected 1, got 7"});
}

BOOST_AUTO_TEST_CASE(inconsistent_types) {
  json d = base();
  d["nodes"][3]["type"]["shape"] = json::array({4, 4});
  expect_error(d, {"graph.json: node 3 (softmax): type in file f32[4, 4] does not match inferred f32[4, 5]"});
  d = base();
  d["nodes"][3]["type"]["dtype"] = "f16";
  expect_error(d, {"node 3 (softmax): type in file f16[4, 5] does not match inferred f32[4, 5]"});
  d = base();
  d["nodes"][1]["type"]["shape"] = json::array({4, 5});  // w no longer fits matmul
  expect_error(d, {"node 2 (matmul):"});
  d = base();
  d["nodes"][0]["type"]["strides"] = json::array({1});
  expect_error(d, {"node 0 (input): field 'type.strides': has 1 strides for a tensor of rank 2"});
}

BOOST_AUTO_TEST_CASE(bad_dtype_and_device) {
  json d = base();
  d["nodes"][0]["type"]["dtype"] = "float32";
  expect_error(d, {"node 0 (input): field 'type.dtype':", "float32"});
  d = base();
  d["nodes"][0]["type"]["device"] = "tpu:0";
  expect_error(d, {"node 0 (input): field 'type.device':"});
  d = base();
  d["nodes"][4]["attrs"]["value"]["dtype"] = "f128";
  expect_error(d, {"node 4 (constant): field 'attrs.value.dtype':", "f128"});
  d = base();
  d["nodes"][0]["type"].erase("dtype");
  expect_error(d, {"node 0 (input): field 'type': missing field 'dtype'"});
}

BOOST_AUTO_TEST_CASE(bad_attributes) {
  json d = base();
  d["nodes"][3]["attrs"]["dim"] = "last";
  expect_error(d, {"graph.json: node 3 (softmax): field 'attrs.dim': expected an integer, got string \"last\""});
  d["nodes"][3]["attrs"]["dim"] = 1.5;
  expect_error(d, {"field 'attrs.dim': expected an integer, got number 1.5"});
  d["nodes"][3]["attrs"]["dim"] = json::array({1});
  expect_error(d, {"field 'attrs.dim': expected an integer, got an array"});
  d = base();
  d["nodes"][3]["attrs"].erase("dim");
  expect_error(d, {"node 3 (softmax): field 'attrs.dim': missing attribute 'dim'"});
  d = base();
  d["nodes"][3].erase("attrs");
  expect_error(d, {"missing attribute 'dim'"});
  d = base();
  d["nodes"][3]["attrs"]["axis"] = 1;
  expect_error(d, {"node 3 (softmax): field 'attrs': unknown attribute 'axis' (expected 'dim')"});
  d = base();
  d["nodes"][2]["attrs"] = json::object({{"x", 1}});
  expect_error(d, {"node 2 (matmul): field 'attrs': unknown attribute 'x' (the op takes none)"});
  d = base();
  d["nodes"][3]["attrs"]["dim"] = 7;
  expect_error(d, {"node 3 (softmax):"});
  d = base();
  d["nodes"][3]["zzz"] = 1;
  expect_error(d, {"node 3 (softmax): unknown field 'zzz'"});
}

BOOST_AUTO_TEST_CASE(integers_that_overflow) {
  expect_text_error(R"({"format": "kiln.graph", "version": 1, "nodes": [{"id": 0, "op": "input",
      "type": {"dtype": "f32", "shape": [18446744073709551615]}}], "outputs": []})",
                    {"node 0 (input): field 'type.shape[0]': integer 18446744073709551615 does not fit in 64 bits"});
  expect_text_error(R"({"format": "kiln.graph", "version": 1, "nodes": [{"id": 0, "op": "input",
      "type": {"dtype": "f32", "shape": [1e30]}}], "outputs": []})",
                    {"field 'type.shape[0]': expected an integer"});
  expect_text_error(R"({"format": "kiln.graph", "version": 1, "nodes": [{"id": 0, "op": "input",
      "type": {"dtype": "f32", "shape": [99999999999999999999999]}}], "outputs": []})",
                    {"field 'type.shape[0]'"});
}

BOOST_AUTO_TEST_CASE(constant_data) {
  json d = base();
  d["nodes"][4]["attrs"]["value"]["data_base64"] = "AAAA";
  expect_error(d, {"node 4 (constant): field 'attrs.value.data_base64': holds 3 bytes",
                   "f32 tensor of shape [2] needs 8"});
  d["nodes"][4]["attrs"]["value"]["data_base64"] = "AAAAAAA!AAA=";
  expect_error(d, {"field 'attrs.value.data_base64': is not valid base64"});
  d["nodes"][4]["attrs"]["value"]["shape"] = json::array({1 << 30, 1 << 30, 1 << 30});
  expect_error(d, {"field 'attrs.value.shape': the constant is too large"});
  d = base();
  d["nodes"][4]["attrs"]["value"]["shape"] = json::array({-2});
  expect_error(d, {"field 'attrs.value.shape': negative size -2"});
  d = base();
  d["nodes"][4]["attrs"]["value"] = json::object({{"dtype", "bool"}, {"shape", json::array({2})}, {"data_base64", "AAI="}});
  expect_error(d, {"a bool element is neither 0 nor 1"});
}

BOOST_AUTO_TEST_CASE(sizes) {
  json d = base();
  d["nodes"][0]["type"]["shape"] = json::array({-3, 3});
  expect_error(d, {"node 0 (input): field 'type.shape[0]': negative size -3"});
  d["nodes"][0]["type"]["shape"] = json::array({int64_t{1} << 50, 3});
  expect_error(d, {"field 'type.shape[0]': size 1125899906842624 is too large"});
  d["nodes"][0]["type"]["shape"] = json::array({int64_t{1} << 40, int64_t{1} << 40});
  expect_error(d, {"field 'type.shape'", "too many elements"});
  d = base();
  d["nodes"][0]["type"]["shape"] = json::array({"s0", 3});
  expect_error(d, {"field 'type.shape[0]': size expression \"s0\" uses s0, but the graph declares 0 symbols"});
  d["symbols"] = json::array({json::object({{"name", "s0"}, {"example", 4}})});
  d["nodes"][0]["type"]["shape"] = json::array({"s0 - 9", 3});
  expect_error(d, {"size \"s0 - 9\" is negative (-5)"});
  d["nodes"][0]["type"]["shape"] = json::array({"s0 +* 2", 3});
  expect_error(d, {"field 'type.shape[0]': bad size expression \"s0 +* 2\""});
  d["nodes"][0]["type"]["shape"] = json::array({"9223372036854775807*s0", 3});
  expect_error(d, {"too large"});
}

BOOST_AUTO_TEST_CASE(symbols_and_facts) {
  json d = base();
  d["symbols"] = json::array({json::object({{"name", "s1"}, {"example", 4}})});
  expect_error(d, {"symbol 0: field 'name': symbols must be listed as s0, s1, ... in order: expected 's0', got 's1'"});
  d["symbols"] = json::array({json::object({{"name", "s0"}, {"example", 1}, {"min", 2}})});
  expect_error(d, {"symbol s0: field 'example': example 1 is outside the range [2, 9223372036854775807]"});
  d["symbols"] = json::array({json::object({{"name", "s0"}, {"example", 4}, {"min", 9}, {"max", 3}})});
  expect_error(d, {"symbol s0: field 'max': range [9, 3] is empty"});
  d["symbols"] = json::array({json::object({{"name", "s0"}})});
  expect_error(d, {"symbol s0: missing field 'example'"});
  d = base();
  d["facts"] = json::array({json::object({{"lhs", "s3"}, {"rhs", "4"}})});
  expect_error(d, {"fact 0: field 'lhs': size expression \"s3\" uses s3"});
  d["facts"] = json::array({json::object({{"lhs", json::array()}, {"rhs", "4"}})});
  expect_error(d, {"fact 0: field 'lhs': expected a string"});
  d["facts"] = json::array({json::object({{"lhs", 4}, {"rhs", 3}, {"relation", "<"}})});
  expect_error(d, {"fact 0: field 'relation': '<' is not a relation (==, != or >=)"});
  d["facts"] = json::array({json::object({{"lhs", 4}, {"rhs", 3}, {"relation", ">="}, {"equal", true}})});
  expect_error(d, {"fact 0: field 'equal': a fact gives its relation or equal, not both"});
}

BOOST_AUTO_TEST_CASE(source_name_starts_every_message) {
  json d = base();
  d["nodes"][3]["op"] = "sofmax";
  BOOST_TEST(parse_error(d.dump(), "models/a.json").rfind("models/a.json: node 3:", 0) == 0u);
}

BOOST_AUTO_TEST_CASE(only_kiln_errors) {
  // A sweep of truncations and single-byte corruptions of a valid file: every outcome is
  // a successful parse or a kiln::Error.
  const std::string text = base().dump();
  for (size_t n = 0; n < text.size(); n += 3) {
    try {
      format::from_json(text.substr(0, n));
    } catch (const Error&) {
    }
  }
  for (size_t i = 0; i < text.size(); i += 2) {
    for (char c : {'0', '-', '"', '}', 'e', '9'}) {
      std::string t = text;
      t[i] = c;
      try {
        format::from_json(t);
      } catch (const Error&) {
      }
    }
  }
  BOOST_TEST(true);
}

BOOST_AUTO_TEST_SUITE_END()
