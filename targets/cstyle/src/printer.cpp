// The shared C-style printer: kernel IR values as C statements (see printer.h). Mirrors the CPU
// codegen's numerics op for op, so every target computes what the reference computes.
#include "kiln/cstyle/printer.h"

#include <cmath>
#include <cstdio>

#include "kiln/graph/error.h"

namespace kiln::cstyle {

std::string Dialect::literal(double v, CT c) const {
  // Shortest exact decimal form (%.9g round-trips every float, %.17g every double), always with
  // a '.' or an exponent so it parses as floating point; parenthesised when negative.
  auto decimal = [&](double x, const char* fmt) {
    char buf[48];
    std::snprintf(buf, sizeof buf, fmt, x);
    std::string s = buf;
    if (s.find_first_of(".e") == std::string::npos) s += ".0";
    s += float_suffix(c);
    return s[0] == '-' ? "(" + s + ")" : s;
  };
  switch (c) {
    case CT::b: return v != 0.0 ? "true" : "false";
    case CT::i64: return int_literal(static_cast<int64_t>(v));
    case CT::f32: {
      const float f = static_cast<float>(v);
      if (std::isnan(f)) return from_bits(0x7fc00000u, c);
      if (std::isinf(f)) return from_bits(f > 0 ? 0x7f800000u : 0xff800000u, c);
      return decimal(static_cast<double>(f), "%.9g");
    }
    case CT::f64:
      if (std::isnan(v)) return from_bits(0x7ff8000000000000ull, c);
      if (std::isinf(v)) return from_bits(v > 0 ? 0x7ff0000000000000ull : 0xfff0000000000000ull, c);
      return decimal(v, "%.17g");
  }
  return "0";
}

std::string Dialect::convert(const std::string& x, CT from, CT to) const {
  if (to == CT::b) return "(" + x + " != " + literal(0, from) + ")";
  if (from == CT::b) return "(" + x + " ? " + literal(1, to) + " : " + literal(0, to) + ")";
  return cast(x, to);
}

using schedule::Affine;
using schedule::Instr;
using schedule::InstrKind;

const Value* Scope::find(int32_t i) const {
  for (const Scope* s = this; s; s = s->parent) {
    auto it = s->memo.find(i);
    if (it != s->memo.end()) return &it->second;
  }
  return nullptr;
}

Scope Scope::child() const {
  Scope c;
  c.vars = vars;
  c.parent = this;
  return c;
}

KernelPrinter::KernelPrinter(const schedule::Kernel& k, const schedule::Schedule& s, const Dialect& d, bool emulate)
    : k_(k), s_(s), d_(d), emulate_(emulate) {}

void KernelPrinter::line(const std::string& text) {
  for (int i = 0; i < depth_; ++i) out_ << "  ";
  out_ << text << "\n";
}

std::string KernelPrinter::let(CT c, const std::string& expr) {
  const std::string name = temp();
  line("const " + d_.type(c) + " " + name + " = " + expr + ";");
  return name;
}

std::string KernelPrinter::sym(const SymInt& s) const {
  if (s.is_static()) return d_.int_literal(s.hint());
  std::string acc;
  const SymExpr e = s.expr();  // (expr() returns a value: keep it alive while walking its terms)
  for (const SymTerm& term : e.terms()) {
    std::string t = term.coeff == 1 ? "" : d_.int_literal(term.coeff);
    for (SymbolId id : term.symbols) t += (t.empty() ? "" : "*") + d_.symbol_name(id);
    if (t.empty()) t = d_.int_literal(term.coeff);
    acc += (acc.empty() ? "" : " + ") + t;
  }
  return "(" + (acc.empty() ? d_.int_literal(0) : acc) + ")";
}

std::string KernelPrinter::affine(const Affine& a, const Scope& sc, bool value) const {
  if (narrow_indices && !value) {
    auto narrow = [&](const SymInt& x) {
      KILN_INTERNAL_CHECK(x.is_static(), "codegen: kernel ", k_.name, ": a narrow index with a symbolic term");
      return std::to_string(x.hint());
    };
    std::string acc = a.offset == 0 ? "" : narrow(a.offset);
    for (size_t v = 0; v < a.coeffs.size(); ++v) {
      if (a.coeffs[v] == 0) continue;
      KILN_INTERNAL_CHECK(!sc.vars[v].empty(), "codegen: kernel ", k_.name, ": loop variable ", v, " used outside its loop");
      const std::string var = "int(" + sc.vars[v] + ")";
      acc += (acc.empty() ? "" : " + ") + (a.coeffs[v] == 1 ? var : narrow(a.coeffs[v]) + "*" + var);
    }
    return acc.empty() ? "0" : "(" + acc + ")";
  }
  std::string acc = a.offset == 0 ? "" : sym(a.offset);
  for (size_t v = 0; v < a.coeffs.size(); ++v) {
    if (a.coeffs[v] == 0) continue;
    KILN_INTERNAL_CHECK(!sc.vars[v].empty(), "codegen: kernel ", k_.name, ": loop variable ", v, " used outside its loop");
    const std::string term = a.coeffs[v] == 1 ? sc.vars[v] : sym(a.coeffs[v]) + "*" + sc.vars[v];
    acc += (acc.empty() ? "" : " + ") + term;
  }
  return acc.empty() ? d_.int_literal(0) : "(" + acc + ")";
}

Value KernelPrinter::convert(const Value& x, CT to) {
  if (x.ct == to) return x;
  return {d_.convert(x.v, x.ct, to), to};
}

Value KernelPrinter::narrow(const Value& x, DType t) {
  switch (t) {
    case DType::i32: return {let(CT::i64, d_.wrap_i32(x.v)), CT::i64};
    case DType::f16: case DType::bf16: return {let(CT::f32, d_.round_to(t, x.v)), CT::f32};
    default: return x;
  }
}

Value KernelPrinter::to_dtype(const Value& x, DType t) { return narrow(convert(x, compute_type(t)), t); }

Value KernelPrinter::value(int32_t i, Scope& sc) {
  if (const Value* v = sc.find(i)) return *v;
  const Instr& in = k_.instrs[static_cast<size_t>(i)];
  Value r;
  switch (in.kind) {
    case InstrKind::constant: r = {d_.literal(in.value, compute_type(in.dtype)), compute_type(in.dtype)}; break;
    case InstrKind::size: r = {sym(in.size), CT::i64}; break;
    case InstrKind::index: r = {let(CT::i64, affine(in.index, sc, true)), CT::i64}; break;
    case InstrKind::load: {
      const DType t = buffer_dtype(in.buffer);
      Value raw;
      if (auto it = load_reads_.find(i); it != load_reads_.end()) {
        raw = {it->second, compute_type(t)};
      } else {
        std::string index = affine(in.index, sc);
        if (in.gathered) index = "(" + index + " + " + convert(value(in.gather_offset(), sc), CT::i64).v + ")";
        const std::string read = d_.load(t, d_.buffer_name(in.buffer), index);
        if (in.masked) {
          // Only where the mask holds (pad, cat): no read outside the buffer's own range.
          const std::string mask = convert(value(in.mask(), sc), CT::b).v;
          const std::string name = temp();
          line(d_.type(compute_type(t)) + " " + name + " = " + d_.literal(0, compute_type(t)) + ";");
          // A constant negative index is never inside the buffer (its mask never holds), and
          // GLSL compilers reject it even where the branch cannot run: no read at all.
          bool never = !in.gathered && in.index.offset.is_static() && in.index.offset.hint() < 0;
          for (const SymInt& c : in.index.coeffs) never = never && c == 0;
          if (!never) line("if (" + mask + ") " + name + " = " + read + ";");
          raw = {name, compute_type(t)};
        } else {
          raw = {let(compute_type(t), read), compute_type(t)};
        }
        if (auto rec = load_records_.find(i); rec != load_records_.end()) {
          line(rec->second + " = " + raw.v + ";");
          recorded_.insert(i);
        }
      }
      r = to_dtype(raw, in.dtype);
      break;
    }
    case InstrKind::pointwise: r = pointwise(in, sc); break;
    case InstrKind::reduce: {
      auto it = reductions_.find(i);
      KILN_INTERNAL_CHECK(it != reductions_.end(), "codegen: kernel ", k_.name, ": reduction v", i, " read before its pass");
      r = {it->second, compute_type(in.dtype)};
      break;
    }
  }
  sc.memo[i] = r;
  return r;
}

void KernelPrinter::bind_row_values(int32_t pass, Scope& row) {
  for (size_t i = 0; i < k_.instrs.size(); ++i) {
    const Instr& in = k_.instrs[i];
    // Reductions folded in loop p have pass p + 1, and so do the values computed from them.
    if (in.kind == InstrKind::pointwise && !in.inner && in.pass == pass + 1) value(static_cast<int32_t>(i), row);
  }
}

void KernelPrinter::store(const schedule::Store& st, Scope& sc) {
  const DType t = buffer_dtype(st.buffer);
  const Value x = convert(value(st.value, sc), compute_type(t));
  std::string index = affine(st.index, sc);
  if (st.offset >= 0) index = "(" + index + " + " + convert(value(st.offset, sc), CT::i64).v + ")";
  const std::string buffer = d_.buffer_name(st.buffer);
  switch (st.combine) {
    case schedule::Combine::none: line(d_.store(t, buffer, index, x.v)); return;
    case schedule::Combine::add:
      if (!d_.native_atomic_add(t)) break;
      line(d_.accumulate(t, buffer, index, x.v));
      return;
    default: break;
  }
  // The combine's own op between the element's value and x, retried until no other thread wrote
  // the element in between.
  line(d_.cas_begin(t, buffer, index));
  Instr combine;
  combine.kind = InstrKind::pointwise;
  combine.op = schedule::combine_op(st.combine);
  combine.dtype = t;
  const Value next = pointwise_of(combine, {{d_.cas_seen(t), compute_type(t)}, x}, {t, t});
  line(d_.cas_end(t, buffer, convert(next, compute_type(t)).v));
}

Value KernelPrinter::pointwise(const Instr& in, Scope& sc) {
  std::vector<Value> a;
  std::vector<DType> at;
  for (int32_t x : in.args) {
    a.push_back(value(x, sc));
    at.push_back(k_.instrs[static_cast<size_t>(x)].dtype);
  }
  return pointwise_of(in, a, at);
}

Value KernelPrinter::pointwise_of(const Instr& in, const std::vector<Value>& a, const std::vector<DType>& at) {
  const DType out = in.dtype;
  const CT oc = compute_type(out);
  auto v = [&](CT c, const std::string& e) { return Value{let(c, e), c}; };
  auto finish = [&](const Value& x) { return emulate_ ? narrow(x, out) : x; };
  auto lit = [&](double x, CT c) { return d_.literal(x, c); };
  auto sel = [](const std::string& c, const std::string& x, const std::string& y) {
    return "(" + c + " ? " + x + " : " + y + ")";
  };
  switch (in.op) {
    case OpId::cast: return to_dtype(a[0], out);
    case OpId::logical_not: return v(CT::b, "!" + convert(a[0], CT::b).v);
    case OpId::isnan:
      if (!is_float(a[0].ct)) return {d_.literal(0, CT::b), CT::b};
      return v(CT::b, d_.isnan(a[0].v, a[0].ct));
    case OpId::logical_and:
    case OpId::logical_or:
      return v(CT::b, "(" + convert(a[0], CT::b).v + (in.op == OpId::logical_and ? " && " : " || ") +
                          convert(a[1], CT::b).v + ")");
    case OpId::eq: case OpId::ne: case OpId::lt: case OpId::le: case OpId::gt: case OpId::ge: {
      const DType ct = promote_types(at[0], at[1]);
      const CT c = is_floating(ct) ? (ct == DType::f64 ? CT::f64 : CT::f32) : CT::i64;
      static const std::map<OpId, const char*> ops{{OpId::eq, " == "}, {OpId::ne, " != "}, {OpId::lt, " < "},
                                                   {OpId::le, " <= "}, {OpId::gt, " > "},  {OpId::ge, " >= "}};
      return v(CT::b, d_.compare(convert(a[0], c).v, ops.at(in.op), convert(a[1], c).v, c));
    }
    case OpId::where:
      return v(oc, sel(convert(a[0], CT::b).v, to_dtype(a[1], out).v, to_dtype(a[2], out).v));
    default: break;
  }
  // Operands of another dtype are first converted to the op's, rounding or wrapping as the
  // reference does.
  auto operand = [&](size_t k, CT c) { return at[k] == out ? convert(a[k], c) : convert(to_dtype(a[k], out), c); };
  if (is_float(oc)) {
    const CT c = oc;
    std::vector<std::string> x;
    for (size_t k = 0; k < a.size(); ++k) x.push_back(operand(k, c).v);
    auto m = [&](std::string_view fn, std::vector<std::string> args) { return d_.math(fn, c, args); };
    auto sigmoid = [&](const std::string& y) {
      return d_.divide(lit(1, c), "(" + lit(1, c) + " + " + m("exp", {"-" + y}) + ")", c);
    };
    switch (in.op) {
      case OpId::neg: return finish(v(c, "(-" + x[0] + ")"));
      case OpId::abs: return finish(v(c, m("fabs", {x[0]})));
      case OpId::exp: return finish(v(c, m("exp", {x[0]})));
      case OpId::log: return finish(v(c, m("log", {x[0]})));
      case OpId::sqrt: return finish(v(c, m("sqrt", {x[0]})));
      case OpId::rsqrt: return finish(v(c, d_.reciprocal_sqrt(x[0], c)));
      case OpId::reciprocal: return finish(v(c, d_.divide(lit(1, c), x[0], c)));
      case OpId::sin: return finish(v(c, m("sin", {x[0]})));
      case OpId::cos: return finish(v(c, m("cos", {x[0]})));
      case OpId::tanh: return finish(v(c, m("tanh", {x[0]})));
      case OpId::sigmoid: return finish(v(c, sigmoid(x[0])));
      case OpId::silu: return finish(v(c, "(" + x[0] + " * " + sigmoid(x[0]) + ")"));
      case OpId::erf: return finish(v(c, m("erf", {x[0]})));
      case OpId::gelu: {
        std::string inner;
        if (in.attrs.s(0) == "tanh") {
          const std::string u = "(" + x[0] + " + " + lit(0.044715, c) + " * " + x[0] + " * " + x[0] + " * " + x[0] + ")";
          inner = m("tanh", {lit(0.79788456080286535588, c) + " * " + u});
        } else {
          inner = m("erf", {x[0] + " * " + lit(0.70710678118654752440, c)});
        }
        return finish(v(c, "(" + lit(0.5, c) + " * " + x[0] + " * (" + lit(1, c) + " + " + inner + "))"));
      }
      case OpId::relu: return finish(v(c, sel(x[0] + " <= " + lit(0, c), lit(0, c), x[0])));
      case OpId::floor: return finish(v(c, m("floor", {x[0]})));
      case OpId::ceil: return finish(v(c, m("ceil", {x[0]})));
      case OpId::round: return finish(v(c, m("rint", {x[0]})));
      case OpId::sign:
        return finish(v(c, sel(x[0] + " > " + lit(0, c), lit(1, c), sel(x[0] + " < " + lit(0, c), lit(-1, c), x[0]))));
      case OpId::add: return finish(v(c, "(" + x[0] + " + " + x[1] + ")"));
      case OpId::sub: return finish(v(c, "(" + x[0] + " - " + x[1] + ")"));
      case OpId::mul: return finish(v(c, "(" + x[0] + " * " + x[1] + ")"));
      case OpId::div: return finish(v(c, d_.divide(x[0], x[1], c)));
      case OpId::pow: return finish(v(c, m("pow", {x[0], x[1]})));
      case OpId::maximum:
      case OpId::minimum: return finish(v(c, d_.extremum(in.op == OpId::maximum, x[0], x[1], c)));
      default: break;
    }
  } else {
    // Integer (and bool) arithmetic in i64, wrapped to the output's width.
    std::vector<std::string> x;
    for (size_t k = 0; k < a.size(); ++k) x.push_back(convert(operand(k, CT::i64), CT::i64).v);
    const std::string zero = d_.int_literal(0);
    std::string r;
    switch (in.op) {
      case OpId::neg: r = "(-" + x[0] + ")"; break;
      case OpId::abs: r = sel(x[0] + " < " + zero, "(-" + x[0] + ")", x[0]); break;
      case OpId::relu: r = sel(x[0] + " > " + zero, x[0], zero); break;
      case OpId::floor: case OpId::ceil: case OpId::round: r = x[0]; break;
      case OpId::sign: r = sel(x[0] + " > " + zero, d_.int_literal(1), sel(x[0] + " < " + zero, d_.int_literal(-1), zero)); break;
      case OpId::add: r = "(" + x[0] + " + " + x[1] + ")"; break;
      case OpId::sub: r = "(" + x[0] + " - " + x[1] + ")"; break;
      case OpId::mul: r = "(" + x[0] + " * " + x[1] + ")"; break;
      case OpId::pow: r = d_.ipow(x[0], x[1]); break;
      case OpId::philox: {
        const int64_t seed = in.attrs.i(1);
        r = d_.philox(seed == 0 ? x[0] : "(" + x[0] + " + " + d_.int_literal(seed) + ")", x[1], in.attrs.i(0));
        break;
      }
      case OpId::maximum: r = sel(d_.compare(x[0], " > ", x[1], CT::i64), x[0], x[1]); break;
      case OpId::minimum: r = sel(d_.compare(x[0], " < ", x[1], CT::i64), x[0], x[1]); break;
      default: fail("codegen: ", op_name(in.op), " has no integer form (kernel ", k_.name, ")");
    }
    return to_dtype(v(CT::i64, r), out);
  }
  fail("codegen: no code for op ", op_name(in.op), " (kernel ", k_.name, ")");
}

}  // namespace kiln::cstyle
