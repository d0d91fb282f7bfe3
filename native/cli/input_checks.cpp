#include "input_checks.h"

#include <limits>
#include <optional>

#include "kiln/graph/error.h"

namespace kiln::cli {

namespace {
// The symbol a size is exactly (coefficient 1, one symbol), if any.
std::optional<SymbolId> bare_symbol(const SymInt& s) {
  if (!s.is_symbolic()) return std::nullopt;
  SymExpr e = s.expr();
  if (e.terms().size() == 1 && e.terms()[0].coeff == 1 && e.terms()[0].symbols.size() == 1)
    return e.terms()[0].symbols[0];
  return std::nullopt;
}

std::string fact_str(const ShapeFact& f) {
  return f.str() + (f.reason.empty() ? "" : "   (from " + f.reason + ")");
}
}  // namespace

std::string input_label(const Graph& g, size_t k) {
  std::string s = "input " + std::to_string(k);
  const Node& n = g.node(g.inputs()[k]);
  if (!n.name.empty()) s += " (" + n.name + ")";
  return s;
}

std::string range_str(int64_t min, int64_t max) {
  return "[" + std::to_string(min) + ", " +
         (max == std::numeric_limits<int64_t>::max() ? std::string("inf") : std::to_string(max)) + "]";
}

std::vector<std::string> guard_lines(const Graph& g) {
  std::vector<std::string> lines;
  std::vector<bool> bound(g.shapes().symbols().size(), false);
  for (size_t k = 0; k < g.inputs().size(); ++k) {
    const TensorMeta& m = g.node(g.inputs()[k]).meta;
    const std::string label = input_label(g, k) + ": ";
    lines.push_back(label + "dtype == " + std::string(dtype_name(m.dtype)));
    lines.push_back(label + "device == " + m.device.str());
    lines.push_back(label + "rank == " + std::to_string(m.rank()));
    for (size_t d = 0; d < m.sizes.size(); ++d) {
      const SymInt& s = m.sizes[d];
      std::string what = label + "size[" + std::to_string(d) + "] ";
      if (s.is_static()) {
        lines.push_back(what + "== " + std::to_string(s.hint()));
      } else if (auto sym = bare_symbol(s); sym && *sym < bound.size() && !bound[*sym]) {
        bound[*sym] = true;
        const SymbolInfo& info = g.shapes().symbol(*sym);
        lines.push_back(what + "binds s" + std::to_string(*sym) + ", which must lie in " + range_str(info.min, info.max));
      } else {
        lines.push_back(what + "== " + s.str());
      }
    }
    if (!m.strides.empty()) lines.push_back(label + "strides == " + shape_str(m.strides));
  }
  for (const ShapeFact& f : g.shapes().facts()) lines.push_back("fact: " + fact_str(f));
  return lines;
}

std::vector<int64_t> check_inputs(const Graph& g, std::span<const TensorData> inputs,
                                  std::span<const std::string> origins) {
  KILN_CHECK(inputs.size() == g.inputs().size(), "the graph takes ", g.inputs().size(), " input",
             g.inputs().size() == 1 ? "" : "s", ", got ", inputs.size());
  const auto& symbols = g.shapes().symbols();
  std::vector<int64_t> values(symbols.size(), 0);
  std::vector<bool> bound(symbols.size(), false);
  auto where = [&](size_t k) {
    std::string s = input_label(g, k);
    if (k < origins.size() && !origins[k].empty()) s += " from " + origins[k];
    return s;
  };
  // Pass 1: dtype, rank, static sizes, and bind bare symbols.
  for (size_t k = 0; k < inputs.size(); ++k) {
    const TensorMeta& m = g.node(g.inputs()[k]).meta;
    const TensorData& t = inputs[k];
    KILN_CHECK(t.dtype == m.dtype, where(k), ": expected dtype ", dtype_name(m.dtype), ", got ", dtype_name(t.dtype));
    KILN_CHECK(t.rank() == m.rank(), where(k), ": expected rank ", m.rank(), " (", shape_str(m.sizes), "), got rank ",
               t.rank());
    for (size_t d = 0; d < m.sizes.size(); ++d) {
      const SymInt& s = m.sizes[d];
      const int64_t got = t.sizes[d];
      if (s.is_static()) {
        KILN_CHECK(got == s.hint(), where(k), ": size mismatch at dim ", d, ": expected ", s.hint(), ", got ", got);
      } else if (auto sym = bare_symbol(s); sym && *sym < symbols.size()) {
        if (bound[*sym]) {
          KILN_CHECK(values[*sym] == got, where(k), ": size mismatch at dim ", d, ": expected s", *sym, " = ",
                     values[*sym], " (bound by an earlier size), got ", got);
        } else {
          const SymbolInfo& info = symbols[*sym];
          KILN_CHECK(got >= info.min && got <= info.max, where(k), ": size ", got, " at dim ", d, " is outside s", *sym,
                     "'s range ", range_str(info.min, info.max));
          values[*sym] = got;
          bound[*sym] = true;
        }
      }
    }
  }
  // Pass 2: sizes that are expressions of the bound symbols, then the facts.
  auto all_bound = [&](const SymExpr& e) {
    for (SymbolId s : e.free_symbols())
      if (s >= bound.size() || !bound[s]) return false;
    return true;
  };
  for (size_t k = 0; k < inputs.size(); ++k) {
    const TensorMeta& m = g.node(g.inputs()[k]).meta;
    for (size_t d = 0; d < m.sizes.size(); ++d) {
      const SymInt& s = m.sizes[d];
      if (s.is_static() || bare_symbol(s)) continue;
      KILN_CHECK(all_bound(s.expr()), where(k), ": size ", s.str(), " at dim ", d,
                 " uses a symbol that no input size binds");
      const int64_t want = s.expr().evaluate(values);
      KILN_CHECK(want == inputs[k].sizes[d], where(k), ": size mismatch at dim ", d, ": expected ", s.str(), " = ", want,
                 ", got ", inputs[k].sizes[d]);
    }
  }
  for (const ShapeFact& f : g.shapes().facts()) {
    if (!all_bound(f.lhs) || !all_bound(f.rhs)) continue;
    const int64_t l = f.lhs.evaluate(values), r = f.rhs.evaluate(values);
    KILN_CHECK(relation_holds(f.relation, l, r), "the inputs break the shape fact ", fact_str(f), ": ", f.lhs.str(), " = ", l, ", ",
               f.rhs.str(), " = ", r);
  }
  return values;
}

}  // namespace kiln::cli
