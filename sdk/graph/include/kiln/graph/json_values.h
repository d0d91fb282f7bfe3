// What Kiln's JSON formats share (frontends/graph's graph_json.cpp: "kiln.graph"; sdk/plan's
// plan_json.cpp: "kiln.plan"), so both write and read every value the same way: encoders for
// sizes, shapes, floats, tensor types, constant tensors (base64), attributes, symbols and shape
// facts; the deterministic printer; and ValueReader, the checked decoders for the same values
// plus the document-level checks (nesting depth, "format", "version"). For the formats' own
// code, not their users (they include kiln/format/graph_json.h or kiln/plan/plan_json.h).
//
// Every decoder checks the JSON type before using a value and bounds every size (2^48 per size
// at the symbols' examples, 2^62 elements per shape) so later arithmetic on sizes cannot
// overflow; every problem is a kiln::Error naming the source, where and the field.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/graph/error.h"
#include "kiln/graph/graph.h"

namespace kiln::json_values {

using json = nlohmann::ordered_json;

// Bounds on what a file may describe: every size at its example values stays below 2^48 and
// every tensor below 2^62 elements, so no int64 arithmetic on sizes overflows.
inline constexpr int64_t kMaxDim = int64_t{1} << 48;
inline constexpr int64_t kMaxNumel = int64_t{1} << 62;
inline constexpr int kMaxDepth = 64;  // JSON nesting

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

json size_json(const SymInt& s);                  // 4096 or "4096*s0"
json shape_json(std::span<const SymInt> shape);   // [..sizes..]
json float_json(double v);                        // shortest round-trip; "inf", "-inf", "nan", "-nan"
json meta_json(const TensorMeta& m);              // {"dtype", "shape", "device"[, "strides"]}
// A constant's bytes as a short digest (for keys that hash a graph: kiln::format::key_json).
using ConstantDigest = std::function<std::string(std::span<const std::byte>)>;
// Constants of more bytes than this are written as their digest where one is given.
inline constexpr size_t kDigestAbove = 256;
// {"dtype", "shape", "data_base64"}; with `digest`, a constant of more than kDigestAbove bytes
// gets "data_digest" instead of its data (not readable back).
json tensor_json(const ConstantData& c, const ConstantDigest* digest = nullptr);
json symbol_json(const SymbolInfo& s);            // {"name", "example", "min", "max", "source", "user_dynamic"}
json fact_json(const ShapeFact& f);               // {"lhs", "rhs", "equal", "reason"}
// The attributes of one use of `def`, by name in declared order; `who` starts the error when
// their number does not match the op's ("to_json: node 3 (softmax)").
json attrs_json(const OpDef& def, const Attrs& attrs, const std::string& who, const ConstantDigest* digest = nullptr);

// indent >= 0: the top-level object one key a line, each of its arrays one item a line (items
// inline) unless every item is a number or bool; indent < 0: one line. No trailing newline.
// Throws nlohmann's exception for strings that are not UTF-8.
std::string print_document(const json& doc, int indent);

// ---------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------

std::string describe(const json& v);  // "string \"last\"", "number 1.5", "an array", ...
// "unknown op 'sofmax' (did you mean 'softmax'?)"
std::string unknown_op_message(std::string_view name);

// How messages say where a problem is:
// - labels: "graph.json: node 3 (matmul): field 'inputs[1]': ..." (the graph format);
// - paths:  "plan.json: kernels[2].reads[0]: ..." (the plan format): `where` and `field` are
//   joined with '.'.
enum class Locations : uint8_t { labels, paths };

class ValueReader {
 public:
  // `noun` names the document in messages ("graph", "plan").
  ValueReader(std::string_view source, std::string_view noun, Locations locations)
      : source_(source), noun_(noun), locations_(locations) {}

  [[noreturn]] void fail_at(const std::string& where, std::string_view field, const std::string& message) const;
  // "symbol 3" (labels) or "symbols[3]" (paths).
  std::string item(std::string_view singular, std::string_view list, size_t i) const;

  // Parses `text` (nesting depth first) and checks it is an object with "format" == `format`
  // and "version" == `version`.
  json parse_document(std::string_view text, std::string_view format, int version) const;

  const json& need(const json& obj, const char* key, const std::string& where, std::string_view field = {}) const;
  const json* maybe(const json& obj, const char* key) const;
  void only_keys(const json& obj, std::initializer_list<const char*> keys, const std::string& where,
                 std::string_view field = {}) const;
  const json& object(const json& v, const std::string& where, std::string_view field) const;
  const json& array(const json& v, const std::string& where, std::string_view field) const;
  int64_t integer(const json& v, const std::string& where, std::string_view field) const;
  bool boolean(const json& v, const std::string& where, std::string_view field) const;
  const std::string& string(const json& v, const std::string& where, std::string_view field) const;
  double floating(const json& v, const std::string& where, std::string_view field) const;
  DType dtype(const json& v, const std::string& where, std::string_view field) const;

  // A size expression over the declared symbols (read_symbols first), bounded at the examples.
  SymExpr sym_expr(const std::string& text, const std::string& where, std::string_view field) const;
  // A non-negative size: an integer, or a string in SymExpr::str() form.
  SymInt size(const json& v, const std::string& where, std::string_view field) const;
  // An array of sizes with at most 2^62 elements in all.
  SymShape shape(const json& v, const std::string& where, std::string_view field) const;
  // A tensor type {"dtype", "shape", "device", "strides"} in field `field`.
  TensorMeta meta(const json& v, const std::string& where, std::string_view field) const;
  // A constant tensor {"dtype", "shape", "data_base64"}.
  std::shared_ptr<const ConstantData> tensor(const json& v, const std::string& where, const std::string& field) const;
  AttrValue attr(const json& v, AttrKind kind, const std::string& where, const std::string& field) const;
  // The attributes of one use of `def` from the object `v` in field `field` (nullptr: absent),
  // each required unless `fallback` is given (used for every missing one), no others allowed.
  Attrs attrs(const json* v, const OpDef& def, const std::string& where, const std::string& field,
              const AttrValue* fallback = nullptr) const;

  // Adds the symbols to `env` and makes them available to sym_expr / size.
  void read_symbols(const json& v, ShapeEnv& env);
  std::vector<ShapeFact> read_facts(const json& v) const;

  // Sum of |coeff| * prod(max(1, example)) over the terms: bounds the expression's value at
  // the examples, and the coefficients of any product of such expressions.
  bool magnitude(const SymExpr& e, int64_t* out) const;
  const std::vector<int64_t>& examples() const { return examples_; }

 private:
  std::string source_;
  std::string noun_;
  Locations locations_;
  std::vector<int64_t> examples_;  // symbol example values, by id
  std::vector<int64_t> mags_;      // max(1, example), for magnitude bounds
};

// Checked arithmetic.
inline bool mul_ok(int64_t a, int64_t b, int64_t* r) { return !__builtin_mul_overflow(a, b, r); }
inline bool add_ok(int64_t a, int64_t b, int64_t* r) { return !__builtin_add_overflow(a, b, r); }

}  // namespace kiln::json_values
