// Reductions of the C-style targets (see reduction.h).
#include "kiln/cstyle/reduction.h"

#include <cmath>

namespace kiln::cstyle {

using schedule::Instr;
using schedule::ReduceKind;

namespace {
bool is_arg(ReduceKind k) { return k == ReduceKind::argmax || k == ReduceKind::argmin; }
bool takes_max(ReduceKind k) { return k == ReduceKind::max || k == ReduceKind::argmax; }
}  // namespace

bool Reductions::nan_flag(int32_t r) const {
  const Instr& in = at(r);
  const CT ac = compute_type(at(in.args[0]).dtype);
  if (is_arg(in.reduce)) return is_float(ac);
  if (in.reduce == ReduceKind::max || in.reduce == ReduceKind::min) return is_float(ac) && !p_.dialect().fast_extremum(ac);
  return false;
}

std::vector<Component> Reductions::state(int32_t r, const std::string& prefix) const {
  const Instr& in = at(r);
  const CT c = compute_type(in.dtype);
  const CT ac = compute_type(at(in.args[0]).dtype);
  switch (in.reduce) {
    case ReduceKind::sum: case ReduceKind::prod: return {{c, prefix + "_acc"}};
    case ReduceKind::max: case ReduceKind::min:
      if (nan_flag(r)) return {{ac, prefix + "_acc"}, {CT::b, prefix + "_nan"}};
      return {{ac, prefix + "_acc"}};
    case ReduceKind::argmax: case ReduceKind::argmin: {
      const CT vc = ac == CT::b ? CT::i64 : ac;  // bools compared as 0 and 1
      if (nan_flag(r)) return {{vc, prefix + "_val"}, {CT::i64, prefix + "_idx"}, {CT::b, prefix + "_nan"}};
      return {{vc, prefix + "_val"}, {CT::i64, prefix + "_idx"}};
    }
  }
  return {};
}

std::vector<std::string> Reductions::initial(int32_t r) const {
  const Dialect& d = p_.dialect();
  const Instr& in = at(r);
  const std::vector<Component> st = state(r, "");
  const bool mx = takes_max(in.reduce);
  auto extreme = [&](CT c) {
    if (is_float(c)) return d.literal(mx ? -INFINITY : INFINITY, c);
    if (c == CT::i64) return d.int_literal(mx ? INT64_MIN : INT64_MAX);
    return std::string(mx ? "false" : "true");
  };
  switch (in.reduce) {
    case ReduceKind::sum: return {d.literal(0, st[0].ct)};
    case ReduceKind::prod: return {d.literal(1, st[0].ct)};
    case ReduceKind::max: case ReduceKind::min:
      if (st.size() == 2) return {extreme(st[0].ct), "false"};
      return {extreme(st[0].ct)};
    case ReduceKind::argmax: case ReduceKind::argmin:
      if (st.size() == 3) return {extreme(st[0].ct), d.int_literal(INT64_MAX), "false"};
      return {extreme(st[0].ct), d.int_literal(INT64_MAX)};
  }
  return {};
}

std::vector<std::string> Reductions::element(int32_t r, const Value& x0, const std::string& j) const {
  const Instr& in = at(r);
  const std::vector<Component> st = state(r, "");
  const Value x = p_.convert(x0, st[0].ct);
  switch (in.reduce) {
    case ReduceKind::sum: case ReduceKind::prod: return {x.v};
    case ReduceKind::max: case ReduceKind::min:
      if (st.size() == 2) return {x.v, p_.dialect().isnan(x.v, x.ct)};
      return {x.v};
    case ReduceKind::argmax: case ReduceKind::argmin:
      if (st.size() == 3) return {x.v, j, p_.dialect().isnan(x.v, x.ct)};
      return {x.v, j};
  }
  return {};
}

void Reductions::merge(int32_t r, const std::vector<Component>& a, const std::vector<std::string>& b) const {
  const Dialect& d = p_.dialect();
  const Instr& in = at(r);
  const CT c = a[0].ct;
  switch (in.reduce) {
    case ReduceKind::sum: p_.line(a[0].name + " += " + b[0] + ";"); return;
    case ReduceKind::prod: p_.line(a[0].name + " *= " + b[0] + ";"); return;
    case ReduceKind::max: case ReduceKind::min: {
      const bool mx = in.reduce == ReduceKind::max;
      if (a.size() == 2) {  // floats with a NaN flag: the value skips NaN, the flag remembers it
        p_.line(d.extremum_skipping_nan(mx, a[0].name, b[0], c));
        p_.line(a[1].name + " = " + a[1].name + " || " + b[1] + ";");
      } else if (is_float(c)) {
        p_.line(a[0].name + " = " + d.extremum(mx, a[0].name, b[0], c) + ";");
      } else if (c == CT::i64) {
        p_.line(d.assign_select(a[0].name, b[0] + (mx ? " > " : " < ") + a[0].name, b[0], a[0].name));
      } else {
        p_.line(a[0].name + " = " + a[0].name + (mx ? " || " : " && ") + b[0] + ";");
      }
      return;
    }
    case ReduceKind::argmax: case ReduceKind::argmin: {
      // b wins when better, or equal at a smaller position; with NaN flags a NaN wins over every
      // number and the first NaN over later ones.
      const char* better = in.reduce == ReduceKind::argmax ? " > " : " < ";
      const std::string tie = "(" + b[0] + " == " + a[0].name + " && " + b[1] + " < " + a[1].name + ")";
      std::string take = "(" + b[0] + better + a[0].name + " || " + tie + ")";
      if (a.size() == 3)
        take = "(" + b[2] + " ? (!" + a[2].name + " || " + b[1] + " < " + a[1].name + ") : (!" + a[2].name + " && " + take + "))";
      p_.line("if (" + take + ") {");
      for (size_t i = 0; i < a.size(); ++i) p_.line("  " + a[i].name + " = " + b[i] + ";");
      p_.line("}");
      return;
    }
  }
}

std::string Reductions::finish(int32_t r, const std::vector<std::string>& st) const {
  const Instr& in = at(r);
  const std::vector<Component> comps = state(r, "");
  Value v;
  switch (in.reduce) {
    case ReduceKind::sum: case ReduceKind::prod: v = {st[0], comps[0].ct}; break;
    case ReduceKind::max: case ReduceKind::min:
      v = {st[0], comps[0].ct};
      if (comps.size() == 2) v.v = "(" + st[1] + " ? " + p_.dialect().literal(NAN, v.ct) + " : " + st[0] + ")";
      break;
    case ReduceKind::argmax: case ReduceKind::argmin: v = {st[1], CT::i64}; break;
  }
  return p_.to_dtype(v, in.dtype).v;
}

void Reductions::declare(int32_t r) const {
  const std::vector<Component> st = running(r);
  const std::vector<std::string> init = initial(r);
  for (size_t i = 0; i < st.size(); ++i) p_.line(p_.dialect().type(st[i].ct) + " " + st[i].name + " = " + init[i] + ";");
}

void Reductions::fold(int32_t r, Scope& sc, const std::string& j) const {
  const Value x = p_.value(at(r).args[0], sc);
  merge(r, running(r), element(r, x, j));
}

void Reductions::step(int32_t pass, const std::vector<int32_t>& reds, Scope& sc, const std::string& j) const {
  for (int32_t r : reds) fold(r, sc, j);
  const schedule::Kernel& k = p_.kernel();
  for (const schedule::Store& st : k.stores)
    if (k.store_is_inner(st) && at(st.value).pass == pass) p_.store(st, sc);
}

}  // namespace kiln::cstyle
