#include "kiln/graph/shape_env.h"

#include "kiln/graph/error.h"

namespace kiln {

SymInt ShapeEnv::create_symbol(int64_t example, int64_t min, int64_t max, std::string source,
                               bool user_dynamic) {
  KILN_CHECK(min <= example && example <= max, "size ", example, " of ", source,
             " is outside its dynamic range [", min, ", ", max, "]");
  const auto id = static_cast<SymbolId>(symbols_.size());
  symbols_.push_back({id, example, min, max, std::move(source), user_dynamic});
  return SymInt::symbol(id, example);
}

void ShapeEnv::add_symbol(SymbolInfo info) {
  KILN_CHECK(info.id == symbols_.size(), "symbol s", info.id, " is out of order: expected s",
             symbols_.size());
  KILN_CHECK(info.min <= info.max, "symbol s", info.id, " has an empty range [", info.min, ", ",
             info.max, "]");
  symbols_.push_back(std::move(info));
}

void ShapeEnv::add_fact(ShapeFact fact) {
  for (const SymExpr* e : {&fact.lhs, &fact.rhs})
    for (SymbolId s : e->free_symbols())
      KILN_CHECK(s < symbols_.size(), "shape fact refers to unknown symbol s", s);
  facts_.push_back(std::move(fact));
}

const SymbolInfo& ShapeEnv::symbol(SymbolId id) const {
  KILN_CHECK(id < symbols_.size(), "unknown size symbol s", id);
  return symbols_[id];
}

std::vector<int64_t> ShapeEnv::examples() const {
  std::vector<int64_t> out;
  out.reserve(symbols_.size());
  for (const auto& s : symbols_) out.push_back(s.example);
  return out;
}

void ShapeEnv::record(SymExpr lhs, SymExpr rhs, bool equal, std::string_view op) {
  for (const auto& f : facts_)
    if (f.equal == equal && ((f.lhs == lhs && f.rhs == rhs) || (f.lhs == rhs && f.rhs == lhs))) return;
  facts_.push_back({std::move(lhs), std::move(rhs), equal, std::string(op)});
}

bool ShapeEnv::decide_equal(const SymInt& a, const SymInt& b, std::string_view op) {
  if (a == b) return true;
  if (a.is_static() && b.is_static()) return false;
  const bool equal = a.hint() == b.hint();
  // A lone symbol against a constant outside its range needs no fact: the range guard covers it.
  auto lone = [&](const SymInt& s, const SymInt& c) -> const SymbolInfo* {
    if (!s.is_symbolic() || !c.is_static()) return nullptr;
    const SymExpr e = s.expr();
    if (e.terms().size() != 1 || e.terms()[0].coeff != 1 || e.terms()[0].symbols.size() != 1) return nullptr;
    return &symbol(e.terms()[0].symbols[0]);
  };
  for (auto [s, c] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
    if (const SymbolInfo* info = lone(*s, *c)) {
      if (c->hint() < info->min || c->hint() > info->max) return false;
      if (equal) {
        specialize(*s, op);
        return true;
      }
    }
  }
  if (equal) {
    // Equating two expressions must not pin a user-dynamic symbol to a constant.
    if (a.is_static() || b.is_static()) {
      specialize(a.is_static() ? b : a, op);
      return true;
    }
  }
  record(a.expr(), b.expr(), equal, op);
  return equal;
}

int64_t ShapeEnv::specialize(const SymInt& a, std::string_view op) {
  if (a.is_static()) return a.hint();
  for (SymbolId s : a.expr().free_symbols()) {
    const SymbolInfo& info = symbol(s);
    KILN_CHECK(!info.user_dynamic, op, " needs ", info.source, " to be the static size ", a.hint(),
               ", but it was marked dynamic with mark_dynamic (symbol s", s, "); remove the mark or ",
               "change the program so that size can vary");
  }
  record(a.expr(), SymExpr::constant(a.hint()), true, op);
  return a.hint();
}

bool ShapeEnv::known_equal(const SymInt& a, const SymInt& b) const {
  if (a == b) return true;
  const SymExpr d = a.expr() - b.expr();
  for (const ShapeFact& f : facts_) {
    if (!f.equal) continue;
    const SymExpr fd = f.lhs - f.rhs;
    if (fd == d || fd == SymExpr::constant(0) - d) return true;
  }
  return false;
}

std::optional<std::vector<std::pair<size_t, size_t>>> reshape_split_runs(const SymShape& from, const SymShape& to,
                                                                          const ShapeEnv& env) {
  std::vector<std::pair<size_t, size_t>> runs;
  size_t k = 0;
  for (const SymInt& s : from) {
    const size_t first = k;
    SymInt product = 1;
    while (!env.known_equal(product, s) && k < to.size()) product = product * to[k++];
    if (!env.known_equal(product, s)) return std::nullopt;
    runs.emplace_back(first, k);
  }
  for (; k < to.size(); ++k)
    if (!(to[k] == 1)) return std::nullopt;
  return runs;
}

}  // namespace kiln
