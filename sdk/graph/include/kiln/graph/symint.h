// Sizes that may be symbolic. A SymInt is either a plain integer or a polynomial over
// size symbols (s0, s1, ...) with integer coefficients, kept in one canonical form so
// two sizes are equal exactly when their forms are. Every symbolic SymInt also carries
// its example value (the "hint": the size seen while tracing), which is what tracing
// decisions are made on; equality and hashing ignore hints.
#pragma once

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

using SymbolId = uint32_t;

// A canonical polynomial: a sorted list of terms coeff * s_a * s_b * ..., no zero coefficients.
struct SymTerm {
  int64_t coeff = 0;
  std::vector<SymbolId> symbols;  // sorted, with repetition for powers; empty = constant
  bool operator==(const SymTerm&) const = default;
};

class SymExpr {
 public:
  static SymExpr constant(int64_t v);
  static SymExpr symbol(SymbolId id);

  const std::vector<SymTerm>& terms() const { return terms_; }
  bool is_constant() const { return terms_.empty() || (terms_.size() == 1 && terms_[0].symbols.empty()); }
  int64_t constant_value() const;  // value when is_constant()
  // Evaluates with symbol i bound to values[i]; throws if a symbol is unbound.
  int64_t evaluate(std::span<const int64_t> values) const;
  std::vector<SymbolId> free_symbols() const;
  // Divides by an integer when every coefficient is divisible; nullopt otherwise.
  std::optional<SymExpr> exact_div(int64_t d) const;
  std::string str() const;  // "2*s0*s1 + 3"
  uint64_t hash() const;

  friend SymExpr operator+(const SymExpr& a, const SymExpr& b);
  friend SymExpr operator-(const SymExpr& a, const SymExpr& b);
  friend SymExpr operator*(const SymExpr& a, const SymExpr& b);
  bool operator==(const SymExpr&) const = default;

 private:
  std::vector<SymTerm> terms_;
  void normalize();
};

// Parses the text form written by SymExpr::str() ("s0*4 + s1 - 2"); throws kiln::Error.
SymExpr parse_sym_expr(std::string_view text);

class SymInt {
 public:
  SymInt() = default;
  // Implicit from any integer, so {1024, 4096} builds a shape.
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  SymInt(T v) : hint_(static_cast<int64_t>(v)) {}  // NOLINT
  SymInt(SymExpr expr, int64_t hint);

  static SymInt symbol(SymbolId id, int64_t hint) { return SymInt(SymExpr::symbol(id), hint); }

  bool is_static() const { return expr_ == nullptr; }
  bool is_symbolic() const { return expr_ != nullptr; }
  // The size seen while tracing (exact when static).
  int64_t hint() const { return hint_; }
  std::optional<int64_t> static_value() const {
    return is_static() ? std::optional<int64_t>(hint_) : std::nullopt;
  }
  // The canonical expression; for a static value, a constant expression.
  SymExpr expr() const { return expr_ ? *expr_ : SymExpr::constant(hint_); }
  int64_t evaluate(std::span<const int64_t> symbol_values) const {
    return expr_ ? expr_->evaluate(symbol_values) : hint_;
  }
  std::string str() const;
  uint64_t hash() const;

  // Structural equality: the same integer, or the same canonical polynomial.
  bool operator==(const SymInt& o) const;
  bool operator==(int64_t v) const { return is_static() && hint_ == v; }

  friend SymInt operator+(const SymInt& a, const SymInt& b);
  friend SymInt operator-(const SymInt& a, const SymInt& b);
  friend SymInt operator*(const SymInt& a, const SymInt& b);
  // Exact division by a constant; nullopt when the result would not be an integer polynomial.
  std::optional<SymInt> exact_div(int64_t d) const;

 private:
  int64_t hint_ = 0;
  std::shared_ptr<const SymExpr> expr_;  // null when static
};

// A tensor's sizes (or strides).
using SymShape = std::vector<SymInt>;

std::string shape_str(std::span<const SymInt> shape);  // "[s0, 4096]"
SymInt shape_numel(std::span<const SymInt> shape);
bool shape_is_static(std::span<const SymInt> shape);
std::vector<int64_t> shape_hints(std::span<const SymInt> shape);
SymShape static_shape(std::span<const int64_t> sizes);

}  // namespace kiln
