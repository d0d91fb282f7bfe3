// Kernel structure shared by the GPU codegens (see structure.h).
#include "kiln/cstyle/structure.h"

#include <algorithm>

namespace kiln::cstyle {

using schedule::Instr;
using schedule::InstrKind;
using schedule::Kernel;

std::vector<int32_t> reductions_of_pass(const Kernel& k, int32_t pass) {
  std::vector<int32_t> reds;
  for (size_t i = 0; i < k.instrs.size(); ++i)
    if (k.instrs[i].kind == InstrKind::reduce && k.instrs[i].pass - 1 == pass) reds.push_back(static_cast<int32_t>(i));
  return reds;
}

namespace {
// Every instruction pass `pass` evaluates (its reductions' arguments and inner stores, through
// their arguments but not through earlier reductions' results), but through none of `kept`.
std::set<int32_t> evaluated_in_pass(const Kernel& k, int32_t pass, const std::set<int32_t>& kept = {}) {
  std::set<int32_t> seen(kept);
  std::vector<int32_t> todo;
  for (int32_t r : reductions_of_pass(k, pass)) todo.push_back(k.instrs[static_cast<size_t>(r)].args[0]);
  for (const schedule::Store& st : k.stores)
    if (k.store_is_inner(st) && k.instrs[static_cast<size_t>(st.value)].pass == pass) todo.push_back(st.value);
  while (!todo.empty()) {
    const int32_t i = todo.back();
    todo.pop_back();
    if (!seen.insert(i).second) continue;
    const Instr& in = k.instrs[static_cast<size_t>(i)];
    if (in.kind == InstrKind::reduce) continue;
    for (int32_t a : in.args) todo.push_back(a);
  }
  for (int32_t i : kept) seen.erase(i);
  return seen;
}
}  // namespace

std::set<int32_t> loads_of_pass(const Kernel& k, int32_t pass, const std::set<int32_t>& kept) {
  std::set<int32_t> loads;
  for (int32_t i : evaluated_in_pass(k, pass, kept))
    if (k.instrs[static_cast<size_t>(i)].kind == InstrKind::load) loads.insert(i);
  return loads;
}

std::set<int32_t> row_values_to_keep(const Kernel& k) {
  if (k.num_passes() < 2) return {};
  // The first pass's inner values read where later passes evaluate: the arguments of their
  // reductions' arguments and of their inner values (a reduction of Instr::pass p runs in pass
  // p - 1; any other instruction in pass Instr::pass).
  auto runs_in = [&](const Instr& in) { return in.kind == InstrKind::reduce ? in.pass - 1 : in.pass; };
  // What the first pass evaluates anyway: a value only later passes read (a norm's scale) is
  // computed where it is read, not kept.
  const std::set<int32_t> first = evaluated_in_pass(k, 0);
  std::set<int32_t> kept, seen;
  std::vector<int32_t> todo;
  for (size_t i = 0; i < k.instrs.size(); ++i) {
    const Instr& in = k.instrs[i];
    if (runs_in(in) < 1 || (!in.inner && in.kind != InstrKind::reduce)) continue;
    for (int32_t a : in.args) todo.push_back(a);
  }
  while (!todo.empty()) {
    const int32_t i = todo.back();
    todo.pop_back();
    if (!seen.insert(i).second) continue;
    const Instr& in = k.instrs[static_cast<size_t>(i)];
    if (!in.inner || in.kind == InstrKind::reduce) continue;  // outer values and results: at hand
    if (in.pass == 0) {
      if (in.kind != InstrKind::index && in.kind != InstrKind::constant && first.count(i)) kept.insert(i);
      continue;
    }
    for (int32_t a : in.args) todo.push_back(a);
  }
  // The loads those values are computed from.
  std::set<int32_t> loads;
  seen.clear();
  todo.assign(kept.begin(), kept.end());
  while (!todo.empty()) {
    const int32_t i = todo.back();
    todo.pop_back();
    if (!seen.insert(i).second) continue;
    const Instr& in = k.instrs[static_cast<size_t>(i)];
    if (!in.inner) continue;
    if (in.kind == InstrKind::load) loads.insert(i);
    for (int32_t a : in.args) todo.push_back(a);
  }
  if (kept.empty() || kept.size() >= loads.size()) return {};
  return kept;
}

SymInt inner_extent(const Kernel& k) {
  SymInt n = 1;
  for (size_t d = static_cast<size_t>(k.num_outer); d < k.domain.size(); ++d) n = n * k.domain[d];
  return n;
}

void store_outer(KernelPrinter& p, const Scope& outer, const std::string& who) {
  const Kernel& k = p.kernel();
  bool any = false;
  for (const schedule::Store& st : k.stores) any = any || !k.store_is_inner(st);
  if (!any) return;
  p.line("if (" + who + ") {");
  p.indent();
  Scope sc = outer.child();
  for (const schedule::Store& st : k.stores)
    if (!k.store_is_inner(st)) p.store(st, sc);
  p.dedent();
  p.line("}");
}

void declare_row_cache(KernelPrinter& p, int32_t load, int64_t entries) {
  const DType t = p.buffer_dtype(p.kernel().instrs[static_cast<size_t>(load)].buffer);
  p.line(p.dialect().type(compute_type(t)) + " lc" + std::to_string(load) + "[" + std::to_string(entries) + "];");
}

void cache_row_loads(KernelPrinter& p, const std::vector<int32_t>& loads, const std::string& slot) {
  p.load_reads().clear();
  for (int32_t i : loads) {
    const std::string at = "lc" + std::to_string(i) + "[" + slot + "]";
    p.load_records()[i] = at;
    if (p.recorded().count(i)) p.load_reads()[i] = at;
  }
}

std::string VectorPlan::flag(const KernelPrinter& p) const {
  const Dialect& d = p.dialect();
  std::vector<std::string> conditions;
  for (const SymInt& x : multiples)
    conditions.push_back("(" + p.sym(x) + ") % " + d.int_literal(width) + " == " + d.int_literal(0));
  std::sort(conditions.begin(), conditions.end());
  conditions.erase(std::unique(conditions.begin(), conditions.end()), conditions.end());
  std::string f;
  for (const std::string& c : conditions) f += (f.empty() ? "" : " && ") + c;
  return f.empty() ? "true" : f;
}

namespace {
// Whether value i may differ between positions that differ along domain dim `dim` only (a load
// is taken to vary: its value may).
bool varies_along(const Kernel& k, int32_t i, size_t dim) {
  const Instr& in = k.instrs[static_cast<size_t>(i)];
  switch (in.kind) {
    case InstrKind::constant: case InstrKind::size: return false;
    case InstrKind::index: return !(in.index.coeffs[dim] == 0);
    case InstrKind::load: case InstrKind::reduce: return true;
    case InstrKind::pointwise: break;
  }
  for (int32_t a : in.args)
    if (varies_along(k, a, dim)) return true;
  return false;
}
}  // namespace

std::optional<VectorPlan> plan_vectors(const Kernel& k, size_t first_dim, bool inner_only, int width,
                                       const std::function<bool(int32_t)>& has_form,
                                       const std::function<bool(int32_t)>& masked_form) {
  const size_t n = k.domain.size();
  if (n == 0 || n - 1 < first_dim) return std::nullopt;
  VectorPlan plan;
  plan.dim = n - 1;
  plan.width = width;
  const SymInt& ext = k.domain[plan.dim];
  if (!ext.is_static() || ext.hint() % width != 0 || ext.hint() == 0) return std::nullopt;
  auto usable = [&](int32_t buffer, const schedule::Affine& a) {
    if (!has_form(buffer) || !(a.coeffs[plan.dim] == 1)) return false;
    std::vector<SymInt> m;
    auto multiple = [&](const SymInt& x) {
      if (x.is_static()) return x.hint() % width == 0;
      m.push_back(x);
      return true;
    };
    if (!multiple(a.offset)) return false;
    for (size_t dim = 0; dim < n; ++dim)
      if (dim != plan.dim && !multiple(a.coeffs[dim])) return false;
    plan.multiples.insert(plan.multiples.end(), m.begin(), m.end());
    return true;
  };
  for (size_t i = 0; i < k.instrs.size(); ++i) {
    const Instr& in = k.instrs[i];
    if (in.kind != InstrKind::load || in.gathered || (inner_only && !in.inner)) continue;  // gathered: one by one
    if (in.masked && (!masked_form || !masked_form(in.buffer) || varies_along(k, in.mask(), plan.dim))) continue;
    if (usable(in.buffer, in.index)) plan.loads.insert(static_cast<int32_t>(i));
  }
  for (size_t si = 0; si < k.stores.size(); ++si) {
    const schedule::Store& st = k.stores[si];
    if (!st.plain() || (inner_only && !k.store_is_inner(st))) continue;  // a scatter's: one by one
    if (usable(st.buffer, st.index)) plan.stores.insert(si);
  }
  if (plan.loads.empty() && plan.stores.empty()) return std::nullopt;
  return plan;
}

}  // namespace kiln::cstyle
