// Reductions of the C-style targets (see reduction.h).
#include "kiln/cstyle/reduction.h"

#include "kiln/graph/error.h"


namespace kiln::cstyle {

using schedule::Instr;
using schedule::ReduceKind;

using lower::Node;
using Op = Node::Op;

lower::Rule Reductions::rule(int32_t r) const {
  const Dialect& d = p_.dialect();
  return lower::reduction_rule(p_.kernel(), r, {d.fast_extremum(CT::f32), d.fast_extremum(CT::f64), /*compensate_long_sums=*/true});
}

bool Reductions::nan_flag(int32_t r) const { return rule(r).has_nan_flag(); }

bool Reductions::compensated(int32_t r) const { return rule(r).compensated(); }

std::vector<Component> Reductions::state(int32_t r, const std::string& prefix) const {
  const lower::Rule rl = rule(r);
  const bool has_position = rl.state.size() > 1 && rl.state[1].role == lower::Rule::Role::position;
  std::vector<Component> st;
  for (const lower::Rule::Component& c : rl.state) {
    const char* suffix = c.role == lower::Rule::Role::position ? "_idx"
                         : c.role == lower::Rule::Role::nan_seen ? "_nan"
                         : c.role == lower::Rule::Role::compensation ? "_cmp"
                         : has_position                          ? "_val"
                                                                 : "_acc";
    st.push_back({c.ct, prefix + suffix});
  }
  return st;
}

// Node n of rule rl as a C expression over the names in env; `top`: the whole right side of an
// assignment (no parentheses around it).
std::string Reductions::print(const lower::Rule& rl, int32_t n, const Env& env, bool top) const {
  const Dialect& d = p_.dialect();
  const Node& nd = rl.at(n);
  auto arg = [&](int k) { return print(rl, nd.args[k], env); };
  auto wrap = [&](const std::string& e) { return top ? e : "(" + e + ")"; };
  switch (nd.op) {
    case Op::a: return (*env.a)[static_cast<size_t>(nd.index)];
    case Op::b: return (*env.b)[static_cast<size_t>(nd.index)];
    case Op::x: return env.x;
    case Op::j: return env.j;
    case Op::literal: return nd.ct == CT::i64 ? d.int_literal(nd.integer) : d.literal(nd.value, nd.ct);
    case Op::add: return wrap(arg(0) + " + " + arg(1));
    case Op::mul: return wrap(arg(0) + " * " + arg(1));
    case Op::max:
    case Op::min: {
      const bool mx = nd.op == Op::max;
      if (nd.ct == CT::b) return wrap(arg(0) + (mx ? " || " : " && ") + arg(1));
      if (is_float(nd.ct)) {
        KILN_INTERNAL_CHECK(nd.propagate_nan, "cstyle: a NaN-skipping extremum is a statement, not an expression");
        return d.extremum(mx, arg(0), arg(1), nd.ct);
      }
      return "(" + arg(1) + (mx ? " > " : " < ") + arg(0) + " ? " + arg(1) + " : " + arg(0) + ")";
    }
    // (compares bare: every operand is a name, a literal or parenthesised, and a compare binds
    // tighter than the && || ?: around it)
    case Op::gt: return arg(0) + " > " + arg(1);
    case Op::lt: return arg(0) + " < " + arg(1);
    case Op::eq: return arg(0) + " == " + arg(1);
    case Op::land: return wrap(arg(0) + " && " + arg(1));
    case Op::lor: return wrap(arg(0) + " || " + arg(1));
    case Op::lnot: return "!" + arg(0);
    case Op::isnan: return d.isnan(arg(0), nd.operand);
    case Op::select: return "(" + arg(0) + " ? " + arg(1) + " : " + arg(2) + ")";
  }
  internal_fail("cstyle: reduction rule node ", static_cast<int>(nd.op), " has no C form");
}

std::vector<std::string> Reductions::initial(int32_t r) const {
  const lower::Rule rl = rule(r);
  std::vector<std::string> out;
  for (int32_t n : rl.identity) out.push_back(print(rl, n, {}));
  return out;
}

std::vector<std::string> Reductions::element(int32_t r, const Value& x0, const std::string& j) const {
  const lower::Rule rl = rule(r);
  Env env;
  env.x = p_.convert(x0, rl.state[0].ct).v;
  env.j = j;
  std::vector<std::string> out;
  for (int32_t n : rl.element) out.push_back(print(rl, n, env));
  return out;
}

namespace {
// Whether node n of rl reads component k of the state folded into.
bool reads_a(const lower::Rule& rl, int32_t n, int32_t k) {
  if (n < 0) return false;
  const Node& nd = rl.at(n);
  if (nd.op == Op::a) return nd.index == k;
  return reads_a(rl, nd.args[0], k) || reads_a(rl, nd.args[1], k) || reads_a(rl, nd.args[2], k);
}
}  // namespace

void Reductions::merge(int32_t r, const std::vector<Component>& a, const std::vector<std::string>& b) const {
  const Dialect& d = p_.dialect();
  const lower::Rule rl = rule(r);
  std::vector<std::string> names;
  for (const Component& c : a) names.push_back(c.name);
  Env env;
  env.a = &names;
  env.b = &b;
  // A fold that reads a component an earlier one assigns (the compensated sum's error term reads
  // the old sum): every component computed into a temporary first, then assigned.
  bool reads_assigned = false;
  for (size_t i = 1; i < a.size(); ++i)
    for (size_t k = 0; k < i; ++k) reads_assigned |= reads_a(rl, rl.fold[i], static_cast<int32_t>(k));
  if (reads_assigned) {
    KILN_INTERNAL_CHECK(rl.take < 0, "cstyle: a conditional fold reads what it assigns");
    std::vector<std::string> next;
    for (size_t i = 0; i < a.size(); ++i) next.push_back(p_.let(a[i].ct, print(rl, rl.fold[i], env, true)));
    for (size_t i = 0; i < a.size(); ++i) p_.line(a[i].name + " = " + next[i] + ";");
    return;
  }
  if (rl.take >= 0) {  // a conditional fold: every component assigned where take holds
    p_.line("if (" + print(rl, rl.take, env) + ") {");
    for (size_t i = 0; i < a.size(); ++i) p_.line("  " + a[i].name + " = " + print(rl, rl.fold[i], env, true) + ";");
    p_.line("}");
    return;
  }
  // Each component's fold, in C's forms: compound assignments, the dialect's extremum
  // statements. (No fold here reads a component another one assigns before it.)
  for (size_t i = 0; i < a.size(); ++i) {
    const Node& f = rl.at(rl.fold[i]);
    const std::string& lhs = a[i].name;
    const bool onto_self = f.args[0] >= 0 && rl.at(f.args[0]).op == Op::a && rl.at(f.args[0]).index == static_cast<int32_t>(i);
    const std::string y = onto_self ? print(rl, f.args[1], env) : "";
    if (onto_self && (f.op == Op::add || f.op == Op::mul)) {
      p_.line(lhs + (f.op == Op::add ? " += " : " *= ") + y + ";");
    } else if (onto_self && (f.op == Op::max || f.op == Op::min) && is_float(f.ct) && !f.propagate_nan) {
      p_.line(d.extremum_skipping_nan(f.op == Op::max, lhs, y, f.ct));
    } else if (onto_self && (f.op == Op::max || f.op == Op::min) && f.ct == CT::i64) {
      p_.line(d.assign_select(lhs, y + (f.op == Op::max ? " > " : " < ") + lhs, y, lhs));
    } else {
      p_.line(lhs + " = " + print(rl, rl.fold[i], env, true) + ";");
    }
  }
}

std::string Reductions::finish(int32_t r, const std::vector<std::string>& st) const {
  const lower::Rule rl = rule(r);
  Env env;
  env.a = &st;
  return p_.to_dtype({print(rl, rl.finish, env), rl.finish_ct}, at(r).dtype).v;
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
