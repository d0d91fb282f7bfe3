#include "kiln/graph/symint.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <sstream>

#include "kiln/graph/error.h"

namespace kiln {

namespace {
uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h;
}
bool term_less(const SymTerm& a, const SymTerm& b) {
  // Higher degree first, then lexicographic symbols: "s0*s1 + s0 + 3".
  if (a.symbols.size() != b.symbols.size()) return a.symbols.size() > b.symbols.size();
  return a.symbols < b.symbols;
}
}  // namespace

SymExpr SymExpr::constant(int64_t v) {
  SymExpr e;
  if (v != 0) e.terms_.push_back({v, {}});
  return e;
}

SymExpr SymExpr::symbol(SymbolId id) {
  SymExpr e;
  e.terms_.push_back({1, {id}});
  return e;
}

void SymExpr::normalize() {
  std::sort(terms_.begin(), terms_.end(), term_less);
  std::vector<SymTerm> merged;
  for (auto& t : terms_) {
    if (merged.empty() || merged.back().symbols != t.symbols) {
      merged.push_back(std::move(t));
    } else if (__builtin_add_overflow(merged.back().coeff, t.coeff, &merged.back().coeff)) {
      fail("size arithmetic overflows 64-bit integers: a coefficient sum");
    }
  }
  std::erase_if(merged, [](const SymTerm& t) { return t.coeff == 0; });
  terms_ = std::move(merged);
}

int64_t SymExpr::constant_value() const { return terms_.empty() ? 0 : terms_[0].coeff; }

int64_t SymExpr::evaluate(std::span<const int64_t> values) const {
  int64_t total = 0;
  for (const auto& t : terms_) {
    int64_t v = t.coeff;
    for (SymbolId s : t.symbols) {
      KILN_CHECK(s < values.size(), "size symbol s", s, " has no value bound");
      if (__builtin_mul_overflow(v, values[s], &v)) fail("size ", str(), " overflows 64-bit integers at s", s, " = ", values[s]);
    }
    if (__builtin_add_overflow(total, v, &total)) fail("size ", str(), " overflows 64-bit integers");
  }
  return total;
}

std::vector<SymbolId> SymExpr::free_symbols() const {
  std::vector<SymbolId> out;
  for (const auto& t : terms_) out.insert(out.end(), t.symbols.begin(), t.symbols.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::optional<SymExpr> SymExpr::exact_div(int64_t d) const {
  if (d == 0) return std::nullopt;
  SymExpr e = *this;
  for (auto& t : e.terms_) {
    if (t.coeff % d != 0) return std::nullopt;
    t.coeff /= d;
  }
  return e;
}

std::string SymExpr::str() const {
  if (terms_.empty()) return "0";
  std::ostringstream out;
  for (size_t i = 0; i < terms_.size(); ++i) {
    const SymTerm& t = terms_[i];
    int64_t c = t.coeff;
    if (i > 0) {
      out << (c < 0 ? " - " : " + ");
      c = c < 0 ? -c : c;
    } else if (c < 0 && !t.symbols.empty()) {
      out << "-";
      c = -c;
    }
    bool first = true;
    if (c != 1 || t.symbols.empty()) {
      out << c;
      first = false;
    }
    for (SymbolId s : t.symbols) {
      out << (first ? "" : "*") << 's' << s;
      first = false;
    }
  }
  return out.str();
}

uint64_t SymExpr::hash() const {
  uint64_t h = 0x5EED;
  for (const auto& t : terms_) {
    h = mix(h, static_cast<uint64_t>(t.coeff));
    for (SymbolId s : t.symbols) h = mix(h, s + 1);
    h = mix(h, 0xFF);
  }
  return h;
}

SymExpr operator+(const SymExpr& a, const SymExpr& b) {
  SymExpr e = a;
  e.terms_.insert(e.terms_.end(), b.terms_.begin(), b.terms_.end());
  e.normalize();
  return e;
}

SymExpr operator-(const SymExpr& a, const SymExpr& b) {
  SymExpr e = a;
  for (SymTerm t : b.terms_) {
    t.coeff = -t.coeff;
    e.terms_.push_back(std::move(t));
  }
  e.normalize();
  return e;
}

SymExpr operator*(const SymExpr& a, const SymExpr& b) {
  SymExpr e;
  for (const auto& x : a.terms_)
    for (const auto& y : b.terms_) {
      int64_t c = 0;
      if (__builtin_mul_overflow(x.coeff, y.coeff, &c))
        fail("size arithmetic overflows 64-bit integers: a coefficient ", x.coeff, " * ", y.coeff);
      SymTerm t{c, x.symbols};
      t.symbols.insert(t.symbols.end(), y.symbols.begin(), y.symbols.end());
      std::sort(t.symbols.begin(), t.symbols.end());
      e.terms_.push_back(std::move(t));
    }
  e.normalize();
  return e;
}

// Grammar: expr := term (('+'|'-') term)*; term := factor ('*' factor)*; factor := INT | 's' INT.
SymExpr parse_sym_expr(std::string_view text) {
  size_t pos = 0;
  auto skip = [&] {
    while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
  };
  auto bad = [&](std::string_view what) -> SymExpr {
    fail("bad size expression '", text, "' at character ", pos, ": ", what);
  };
  auto number = [&](int64_t& out) {
    auto [end, ec] = std::from_chars(text.data() + pos, text.data() + text.size(), out);
    if (ec != std::errc()) return false;
    pos = static_cast<size_t>(end - text.data());
    return true;
  };
  auto factor = [&]() -> SymExpr {
    skip();
    if (pos < text.size() && text[pos] == 's') {
      ++pos;
      int64_t id = 0;
      if (!number(id) || id < 0 || id > 1000000) return bad("expected a symbol number after 's'");
      return SymExpr::symbol(static_cast<SymbolId>(id));
    }
    int64_t v = 0;
    if (!number(v)) return bad("expected an integer or a symbol sN");
    return SymExpr::constant(v);
  };
  auto term = [&]() -> SymExpr {
    SymExpr e = factor();
    skip();
    while (pos < text.size() && text[pos] == '*') {
      ++pos;
      e = e * factor();
      skip();
    }
    return e;
  };
  skip();
  bool negate = false;
  if (pos < text.size() && text[pos] == '-') {
    negate = true;
    ++pos;
  }
  SymExpr e = term();
  if (negate) e = SymExpr::constant(0) - e;
  skip();
  while (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    const bool minus = text[pos] == '-';
    ++pos;
    SymExpr t = term();
    e = minus ? e - t : e + t;
    skip();
  }
  if (pos != text.size()) return bad("unexpected text");
  return e;
}

SymInt::SymInt(SymExpr expr, int64_t hint) : hint_(hint) {
  if (expr.is_constant())
    hint_ = expr.constant_value();
  else
    expr_ = std::make_shared<const SymExpr>(std::move(expr));
}

std::string SymInt::str() const { return expr_ ? expr_->str() : std::to_string(hint_); }
uint64_t SymInt::hash() const { return expr_ ? expr_->hash() : mix(0xC0257, static_cast<uint64_t>(hint_)); }

bool SymInt::operator==(const SymInt& o) const {
  if (is_static() != o.is_static()) return false;
  if (is_static()) return hint_ == o.hint_;
  return expr_ == o.expr_ || *expr_ == *o.expr_;
}

// Static sizes that overflow int64 are an error (a shape from a file or a model multiplying past
// 2^63, issue 31); a symbolic value's hint is only an example, so it wraps instead.
namespace {
int64_t wrapped(uint64_t v) { return static_cast<int64_t>(v); }
[[noreturn]] void overflows(const SymInt& a, const char* op, const SymInt& b) {
  fail("size arithmetic overflows 64-bit integers: ", a.str(), " ", op, " ", b.str());
}
}  // namespace

SymInt operator+(const SymInt& a, const SymInt& b) {
  int64_t r = 0;
  if (a.is_static() && b.is_static()) {
    if (__builtin_add_overflow(a.hint_, b.hint_, &r)) overflows(a, "+", b);
    return SymInt(r);
  }
  return SymInt(a.expr() + b.expr(), wrapped(static_cast<uint64_t>(a.hint_) + static_cast<uint64_t>(b.hint_)));
}
SymInt operator-(const SymInt& a, const SymInt& b) {
  int64_t r = 0;
  if (a.is_static() && b.is_static()) {
    if (__builtin_sub_overflow(a.hint_, b.hint_, &r)) overflows(a, "-", b);
    return SymInt(r);
  }
  return SymInt(a.expr() - b.expr(), wrapped(static_cast<uint64_t>(a.hint_) - static_cast<uint64_t>(b.hint_)));
}
SymInt operator*(const SymInt& a, const SymInt& b) {
  int64_t r = 0;
  if (a.is_static() && b.is_static()) {
    if (__builtin_mul_overflow(a.hint_, b.hint_, &r)) overflows(a, "*", b);
    return SymInt(r);
  }
  return SymInt(a.expr() * b.expr(), wrapped(static_cast<uint64_t>(a.hint_) * static_cast<uint64_t>(b.hint_)));
}

std::optional<SymInt> SymInt::exact_div(int64_t d) const {
  if (d == 0) return std::nullopt;
  if (is_static()) {
    if (hint_ % d != 0) return std::nullopt;
    return SymInt(hint_ / d);
  }
  auto e = expr_->exact_div(d);
  if (!e) return std::nullopt;
  return SymInt(std::move(*e), hint_ / d);
}

std::string shape_str(std::span<const SymInt> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += shape[i].str();
  }
  return s + "]";
}

SymInt shape_numel(std::span<const SymInt> shape) {
  SymInt n = 1;
  for (const auto& d : shape) n = n * d;
  return n;
}

bool shape_is_static(std::span<const SymInt> shape) {
  return std::all_of(shape.begin(), shape.end(), [](const SymInt& d) { return d.is_static(); });
}

std::vector<int64_t> shape_hints(std::span<const SymInt> shape) {
  std::vector<int64_t> out;
  out.reserve(shape.size());
  for (const auto& d : shape) out.push_back(d.hint());
  return out;
}

SymShape static_shape(std::span<const int64_t> sizes) { return SymShape(sizes.begin(), sizes.end()); }

}  // namespace kiln
