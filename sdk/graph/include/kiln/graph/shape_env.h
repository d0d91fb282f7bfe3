// ShapeEnv: the size symbols of one graph and the facts about them that the graph's
// shapes rely on. Shape rules never branch on a symbolic size directly: they ask the
// ShapeEnv, which answers from the example values and records the answer as a fact.
// The capture stage turns symbols (with their ranges) and facts into guards.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/graph/symint.h"

namespace kiln {

struct SymbolInfo {
  SymbolId id = 0;
  int64_t example = 0;  // the size seen while tracing
  int64_t min = 2;      // sizes 0 and 1 are always specialised, so symbols start at 2
  int64_t max = std::numeric_limits<int64_t>::max();
  std::string source;        // where it came from: "input 0 (x) dim 1"
  bool user_dynamic = false;  // from mark_dynamic: specialising it is an error
  bool operator==(const SymbolInfo&) const = default;
};

// How a fact's two sides relate (lt only as the negation of ge, in messages).
enum class Relation : uint8_t { eq, ne, ge, lt };
const char* relation_str(Relation r);  // "==", "!=", ">=", "<"
Relation negation(Relation r);
bool relation_holds(Relation r, int64_t lhs, int64_t rhs);

// lhs == rhs, lhs != rhs or lhs >= rhs, decided while tracing.
struct ShapeFact {
  SymExpr lhs;
  SymExpr rhs;
  Relation relation = Relation::eq;
  std::string reason;  // the op that needed it
  bool operator==(const ShapeFact&) const = default;
  std::string str() const;  // "s0 >= 5"
  bool holds(std::span<const int64_t> symbol_values) const {
    return relation_holds(relation, lhs.evaluate(symbol_values), rhs.evaluate(symbol_values));
  }
};

class ShapeEnv {
 public:
  // A new symbol s<N> with the given example value and range.
  SymInt create_symbol(int64_t example, int64_t min, int64_t max, std::string source,
                       bool user_dynamic);
  // Adds an existing symbol description (the graph parser uses this); ids must be dense.
  void add_symbol(SymbolInfo info);
  void add_fact(ShapeFact fact);

  const std::vector<SymbolInfo>& symbols() const { return symbols_; }
  const std::vector<ShapeFact>& facts() const { return facts_; }
  const SymbolInfo& symbol(SymbolId id) const;
  bool empty() const { return symbols_.empty(); }

  // Answers a == b from the example values. When the answer depends on symbols it is
  // recorded as a fact (unless the symbols' ranges already imply it). An answer of
  // "equal" that pins a user-marked dynamic symbol to a constant throws naming `op`.
  bool decide_equal(const SymInt& a, const SymInt& b, std::string_view op);
  // Answers a >= k from the example values, recorded as a fact (a >= k, or k - 1 >= a) unless
  // static or implied by a lone symbol's range: a slice's bound or TopK's k within a symbolic
  // dim keeps the dim symbolic where specialising it would pin it.
  bool decide_at_least(const SymInt& a, int64_t k, std::string_view op);
  // Forces a size to its example value and records that; throws naming `op` when the
  // size involves a symbol the user marked dynamic.
  int64_t specialize(const SymInt& a, std::string_view op);
  // True when a == b is known without deciding anything new: the same expression, or a
  // recorded equality fact between them. False means "not known equal", not "unequal".
  bool known_equal(const SymInt& a, const SymInt& b) const;

  // Example values of all symbols, indexed by id (for evaluating hints).
  std::vector<int64_t> examples() const;

 private:
  std::vector<SymbolInfo> symbols_;
  std::vector<ShapeFact> facts_;
  void record(SymExpr lhs, SymExpr rhs, Relation relation, std::string_view op);
};

// When reshaping `from` to `to` only splits dims (and inserts or removes dims of size 1): for
// each dim of `from`, the run [first, last) of `to`'s dims whose sizes multiply to its size
// (sizes compared by `env.known_equal`). Each index of `from` is then an affine sum of `to`'s (a
// flat [n * m] read as [n, m]: i0 * m + i1). nullopt when the reshape merges dims (a division).
std::optional<std::vector<std::pair<size_t, size_t>>> reshape_split_runs(const SymShape& from, const SymShape& to,
                                                                          const ShapeEnv& env);

}  // namespace kiln
