#include "kiln/graph/shape_env.h"

#include "kiln/graph/error.h"

namespace kiln {

const char* relation_str(Relation r) {
  switch (r) {
    case Relation::eq: return "==";
    case Relation::ne: return "!=";
    case Relation::ge: return ">=";
    case Relation::lt: return "<";
  }
  return "?";
}

Relation negation(Relation r) {
  switch (r) {
    case Relation::eq: return Relation::ne;
    case Relation::ne: return Relation::eq;
    case Relation::ge: return Relation::lt;
    case Relation::lt: return Relation::ge;
  }
  return r;
}

bool relation_holds(Relation r, int64_t lhs, int64_t rhs) {
  switch (r) {
    case Relation::eq: return lhs == rhs;
    case Relation::ne: return lhs != rhs;
    case Relation::ge: return lhs >= rhs;
    case Relation::lt: return lhs < rhs;
  }
  return false;
}

std::string ShapeFact::str() const { return lhs.str() + " " + relation_str(relation) + " " + rhs.str(); }

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

void ShapeEnv::record(SymExpr lhs, SymExpr rhs, Relation relation, std::string_view op) {
  const bool symmetric = relation != Relation::ge;
  for (const auto& f : facts_)
    if (f.relation == relation && ((f.lhs == lhs && f.rhs == rhs) || (symmetric && f.lhs == rhs && f.rhs == lhs))) return;
  facts_.push_back({std::move(lhs), std::move(rhs), relation, std::string(op)});
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
  record(a.expr(), b.expr(), equal ? Relation::eq : Relation::ne, op);
  return equal;
}

bool ShapeEnv::decide_at_least(const SymInt& a, int64_t k, std::string_view op) {
  const bool at_least = a.hint() >= k;
  if (a.is_static()) return at_least;
  const SymExpr e = a.expr();
  // A lone symbol plus a constant, s + c: its range may answer already.
  const SymbolInfo* lone = nullptr;
  int64_t c = 0;
  bool affine = true;
  for (const SymTerm& t : e.terms()) {
    if (t.symbols.empty()) c = t.coeff;
    else if (t.symbols.size() == 1 && t.coeff == 1 && !lone) lone = &symbol(t.symbols[0]);
    else affine = false;
  }
  if (affine && lone) {
    if (lone->min >= k - c) return true;
    if (lone->max < k - c) return false;
  }
  if (at_least) record(e, SymExpr::constant(k), Relation::ge, op);
  else record(SymExpr::constant(k - 1), e, Relation::ge, op);
  return at_least;
}

int64_t ShapeEnv::specialize(const SymInt& a, std::string_view op) {
  if (a.is_static()) return a.hint();
  for (SymbolId s : a.expr().free_symbols()) {
    const SymbolInfo& info = symbol(s);
    KILN_CHECK(!info.user_dynamic, op, " needs ", info.source, " to be the static size ", a.hint(),
               ", but it was marked dynamic with mark_dynamic (symbol s", s, "); remove the mark or ",
               "change the program so that size can vary");
  }
  record(a.expr(), SymExpr::constant(a.hint()), Relation::eq, op);
  return a.hint();
}

bool ShapeEnv::known_equal(const SymInt& a, const SymInt& b) const {
  if (a == b) return true;
  const SymExpr d = a.expr() - b.expr();
  for (const ShapeFact& f : facts_) {
    if (f.relation != Relation::eq) continue;
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
