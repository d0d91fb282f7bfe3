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

std::set<int32_t> loads_of_pass(const Kernel& k, int32_t pass) {
  std::set<int32_t> loads, seen;
  std::vector<int32_t> todo;
  for (int32_t r : reductions_of_pass(k, pass)) todo.push_back(k.instrs[static_cast<size_t>(r)].args[0]);
  for (const schedule::Store& st : k.stores)
    if (k.store_is_inner(st) && k.instrs[static_cast<size_t>(st.value)].pass == pass) todo.push_back(st.value);
  while (!todo.empty()) {
    const int32_t i = todo.back();
    todo.pop_back();
    if (!seen.insert(i).second) continue;
    const Instr& in = k.instrs[static_cast<size_t>(i)];
    if (in.kind == InstrKind::load) loads.insert(i);
    if (in.kind == InstrKind::reduce) continue;
    for (int32_t a : in.args) todo.push_back(a);
  }
  return loads;
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

std::optional<VectorPlan> plan_vectors(const Kernel& k, size_t first_dim, bool inner_only, int width,
                                       const std::function<bool(int32_t)>& has_form) {
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
    if (!in.plain_load() || (inner_only && !in.inner)) continue;  // masked or gathered: one by one
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
