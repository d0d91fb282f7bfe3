// The LLVM IR value printer (llvm.h): types, conversions, each op's math, reduction folds.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "kiln/graph/error.h"
#include "kiln/render/llvm.h"

namespace kiln::render::llvm {

using schedule::Affine;
using schedule::Instr;
using schedule::ReduceKind;

CT ct_of(DType t) {
  switch (t) {
    case DType::f32: case DType::f16: case DType::bf16: return CT::f32;
    case DType::f64: return CT::f64;
    case DType::i32: case DType::i64: return CT::i64;
    case DType::bool_: return CT::i1;
  }
  return CT::f32;
}

const char* type_of(CT c) {
  switch (c) {
    case CT::f32: return "float";
    case CT::f64: return "double";
    case CT::i64: return "i64";
    case CT::i1: return "i1";
  }
  return "?";
}
const char* suffix_of(CT c) { return c == CT::f64 ? "f64" : "f32"; }

const char* storage_type(DType t) {
  switch (t) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::f16: return "half";
    case DType::bf16: return "i16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::bool_: return "i8";
  }
  return "?";
}

std::string literal(double v, CT c) {
  switch (c) {
    case CT::f32: case CT::f64: {
      if (c == CT::f32) v = static_cast<double>(static_cast<float>(v));
      uint64_t bits;
      std::memcpy(&bits, &v, 8);
      char buf[32];
      std::snprintf(buf, sizeof buf, "0x%016" PRIX64, bits);
      return buf;
    }
    case CT::i64: return std::to_string(static_cast<int64_t>(v));
    case CT::i1: return v != 0.0 ? "true" : "false";
  }
  return "0";
}

Val Flavour::divide(Printer& p, CT c, const std::string& a, const std::string& b, bool) const {
  return p.fbin("fdiv", c, a, b);
}

// ---- emission ----
std::string Printer::alloca(const char* type) {
  const std::string r = tmp();
  entry_ << "  " << r << " = alloca " << type << "\n";
  return r;
}

Val Printer::call(const std::string& fn, CT c, const std::vector<std::string>& args, const char* flags) {
  std::string sig, operands;
  for (size_t k = 0; k < args.size(); ++k) {
    sig += std::string(k ? ", " : "") + type_of(c);
    operands += std::string(k ? ", " : "") + type_of(c) + " " + args[k];
  }
  declare(std::string("declare ") + type_of(c) + " " + fn + "(" + sig + ")");
  return {op("call ", flags, type_of(c), " ", fn, "(", operands, ")"), c};
}

// bf16 bits of an f32, rounded to nearest even (NaN kept quiet): integer operations, which every
// target has.
std::string Printer::bf16_bits(const std::string& x) {
  helpers_.insert(R"(define internal i16 @kiln_bf16_bits(float %x) alwaysinline {
  %b = bitcast float %x to i32
  %l = lshr i32 %b, 16
  %lsb = and i32 %l, 1
  %bias = add i32 %lsb, 32767
  %r = add i32 %b, %bias
  %h = lshr i32 %r, 16
  %t = trunc i32 %h to i16
  %nan = fcmp uno float %x, %x
  %tn = trunc i32 %l to i16
  %qn = or i16 %tn, 64
  %s = select i1 %nan, i16 %qn, i16 %t
  ret i16 %s
}
)");
  return op("call i16 @kiln_bf16_bits(float ", x, ")");
}

// Integer power by squaring (wrapping); a negative exponent gives 0.
std::string Printer::ipow(const std::string& b, const std::string& e) {
  helpers_.insert(R"(define internal i64 @kiln_ipow(i64 %base, i64 %e) {
entry:
  %neg = icmp slt i64 %e, 0
  br i1 %neg, label %zero, label %loop
zero:
  ret i64 0
loop:
  %r = phi i64 [1, %entry], [%r2, %step]
  %b = phi i64 [%base, %entry], [%b2, %step]
  %k = phi i64 [%e, %entry], [%k2, %step]
  %done = icmp eq i64 %k, 0
  br i1 %done, label %out, label %step
step:
  %odd = and i64 %k, 1
  %isodd = icmp ne i64 %odd, 0
  %rm = mul i64 %r, %b
  %r2 = select i1 %isodd, i64 %rm, i64 %r
  %b2 = mul i64 %b, %b
  %k2 = lshr i64 %k, 1
  br label %loop
out:
  ret i64 %r
}
)");
  return op("call i64 @kiln_ipow(i64 ", b, ", i64 ", e, ")");
}

// ---- sizes and indices ----
std::string Printer::sym(const SymInt& s) {
  if (s.is_static()) return std::to_string(s.hint());
  const SymExpr e = s.expr();
  const std::string key = e.str();
  if (auto it = syms_.find(key); it != syms_.end()) return it->second;
  auto emit = [&](const std::string& what) {
    const std::string r = tmp();
    entry_ << "  " << r << " = " << what << "\n";
    return r;
  };
  std::string acc;
  for (const SymTerm& term : e.terms()) {
    std::string v = std::to_string(term.coeff);
    bool first = true;
    for (SymbolId id : term.symbols) {
      const std::string name = symbol(id);
      v = first && term.coeff == 1 ? name : emit("mul i64 " + v + ", " + name);
      first = false;
    }
    acc = acc.empty() ? v : emit("add i64 " + acc + ", " + v);
  }
  if (acc.empty()) acc = "0";
  return syms_[key] = acc;
}

std::string Printer::affine(const Affine& a, const std::vector<std::string>& vars) {
  std::string acc = sym(a.offset);
  for (size_t v = 0; v < a.coeffs.size(); ++v) {
    if (a.coeffs[v] == 0) continue;
    KILN_CHECK(!vars[v].empty(), flavour_.codegen, ": kernel ", kernel_, ": loop variable ", v, " used outside its loop");
    std::string term = vars[v];
    if (!(a.coeffs[v] == 1)) term = op("mul i64 ", sym(a.coeffs[v]), ", ", vars[v]);
    acc = acc == "0" ? term : op("add i64 ", acc, ", ", term);
  }
  return acc;
}

void Printer::unflatten(const std::string& flat, const std::vector<SymInt>& extents, size_t first, size_t last,
                        std::vector<std::string>& vars) {
  std::string rest = flat;
  for (size_t d = last; d-- > first;) {
    if (d == first) {
      vars[d] = rest;
      break;
    }
    const std::string e = sym(extents[d]);
    vars[d] = op(flavour_.index_rem, " i64 ", rest, ", ", e);
    rest = op(flavour_.index_div, " i64 ", rest, ", ", e);
  }
}

// ---- values ----
Val Printer::convert(const Val& x, CT to) {
  if (x.ct == to) return x;
  switch (to) {
    case CT::f32: case CT::f64:
      if (is_float(x.ct)) return {op(to == CT::f64 ? "fpext float " : "fptrunc double ", x.v, " to ", type_of(to)), to};
      if (x.ct == CT::i1) return {op("uitofp i1 ", x.v, " to ", type_of(to)), to};
      return {op("sitofp i64 ", x.v, " to ", type_of(to)), to};
    case CT::i64:
      if (x.ct == CT::i1) return {op("zext i1 ", x.v, " to i64"), to};
      return {op("fptosi ", type_of(x.ct), " ", x.v, " to i64"), to};
    case CT::i1:
      if (is_float(x.ct)) return {op("fcmp une ", type_of(x.ct), " ", x.v, ", ", literal(0, x.ct)), to};
      return {op("icmp ne i64 ", x.v, ", 0"), to};
  }
  return x;
}

Val Printer::narrow(const Val& x, DType t) {
  switch (t) {
    case DType::i32: return {op("sext i32 ", op("trunc i64 ", x.v, " to i32"), " to i64"), CT::i64};
    case DType::f16: return {op("fpext half ", op("fptrunc float ", x.v, " to half"), " to float"), CT::f32};
    case DType::bf16:
      if (flavour_.round_bf16) return {op("call float ", flavour_.round_bf16, "(float ", x.v, ")"), CT::f32};
      return from_storage(DType::bf16, bf16_bits(x.v));
    default: return x;
  }
}

Val Printer::from_storage(DType t, const std::string& raw) {
  switch (t) {
    case DType::f32: return {raw, CT::f32};
    case DType::f64: return {raw, CT::f64};
    case DType::f16: return {op("fpext half ", raw, " to float"), CT::f32};
    case DType::bf16: return {op("bitcast i32 ", op("shl i32 ", op("zext i16 ", raw, " to i32"), ", 16"), " to float"), CT::f32};
    case DType::i32: return {op("sext i32 ", raw, " to i64"), CT::i64};
    case DType::i64: return {raw, CT::i64};
    case DType::bool_: return {op("icmp ne i8 ", raw, ", 0"), CT::i1};
  }
  return {raw, CT::f32};
}

std::string Printer::to_storage(DType t, const Val& x0) {
  const Val x = convert(x0, ct_of(t));
  switch (t) {
    case DType::f16: return op("fptrunc float ", x.v, " to half");
    case DType::bf16: return bf16_bits(x.v);
    case DType::i32: return op("trunc i64 ", x.v, " to i32");
    case DType::bool_: return op("zext i1 ", x.v, " to i8");
    default: return x.v;
  }
}

std::string Printer::masked_load(DType t, const std::string& mask, const std::function<std::string()>& load) {
  const std::string slot = alloca(storage_type(t));
  const std::string ld = label("mload"), join = label("mjoin");
  line("store ", storage_type(t), " ", t == DType::f32 || t == DType::f64 || t == DType::f16 ? "0.0" : "0", ", ptr ", slot);
  line("br i1 ", mask, ", label %", ld, ", label %", join);
  block(ld);
  line("store ", storage_type(t), " ", load(), ", ptr ", slot);
  line("br label %", join);
  block(join);
  return op("load ", storage_type(t), ", ptr ", slot);
}

Val Printer::select(const std::string& cond, CT c, const std::string& a, const std::string& b) {
  return {op("select i1 ", cond, ", ", type_of(c), " ", a, ", ", type_of(c), " ", b), c};
}
Val Printer::fbin(const char* o, CT c, const std::string& a, const std::string& b) {
  return {op(o, " ", type_of(c), " ", a, ", ", b), c};
}

// NaN when either operand is NaN (torch.maximum / minimum): the target's instruction, or
// compares and selects.
Val Printer::extremum(bool max, CT c, const std::string& a, const std::string& b) {
  if (flavour_.nan_extremum(c))
    return call(std::string("@llvm.") + (max ? "maximum." : "minimum.") + suffix_of(c), c, {a, b});
  const std::string uno = op("fcmp uno ", type_of(c), " ", a, ", ", b);
  const std::string pick = select(op("fcmp ", max ? "ogt " : "olt ", type_of(c), " ", a, ", ", b), c, a, b).v;
  return select(uno, c, literal(NAN, c), pick);
}

Val Printer::pointwise(const Instr& in, const std::vector<Val>& a, const std::vector<DType>& at, bool emulate,
                       bool invariant_divisor) {
  const DType out = in.dtype;
  const CT oc = ct_of(out);
  auto finish = [&](const Val& v) { return emulate ? narrow(v, out) : v; };
  switch (in.op) {
    case OpId::cast: return to_dtype(a[0], out);
    case OpId::logical_not: return {op("xor i1 ", convert(a[0], CT::i1).v, ", true"), CT::i1};
    case OpId::isnan:
      if (!is_float(a[0].ct)) return {"false", CT::i1};
      return {op("fcmp uno ", type_of(a[0].ct), " ", a[0].v, ", ", a[0].v), CT::i1};
    case OpId::logical_and:
    case OpId::logical_or: {
      const std::string x = convert(a[0], CT::i1).v, y = convert(a[1], CT::i1).v;
      return {op(in.op == OpId::logical_and ? "and i1 " : "or i1 ", x, ", ", y), CT::i1};
    }
    case OpId::eq: case OpId::ne: case OpId::lt: case OpId::le: case OpId::gt: case OpId::ge: {
      const DType ct = promote_types(at[0], at[1]);
      const CT c = is_floating(ct) ? (ct == DType::f64 ? CT::f64 : CT::f32) : CT::i64;
      const Val x = convert(a[0], c), y = convert(a[1], c);
      static const std::map<OpId, std::pair<const char*, const char*>> preds{
          {OpId::eq, {"oeq", "eq"}}, {OpId::ne, {"une", "ne"}}, {OpId::lt, {"olt", "slt"}},
          {OpId::le, {"ole", "sle"}}, {OpId::gt, {"ogt", "sgt"}}, {OpId::ge, {"oge", "sge"}}};
      const auto& p = preds.at(in.op);
      return {op(is_float(c) ? "fcmp " : "icmp ", is_float(c) ? p.first : p.second, " ", type_of(c), " ", x.v, ", ", y.v),
              CT::i1};
    }
    case OpId::where: {
      const Val c = convert(a[0], CT::i1);
      const std::string x = to_dtype(a[1], out).v, y = to_dtype(a[2], out).v;
      return select(c.v, oc, x, y);
    }
    default: break;
  }
  // Operands of another dtype are first converted to the op's, rounding or wrapping as the
  // reference does (a 0-d f16 added to bf16 is a bf16 number first).
  auto operand = [&](size_t k, CT c) { return at[k] == out ? convert(a[k], c) : convert(to_dtype(a[k], out), c); };
  const Flavour& f = flavour_;
  if (is_float(oc)) {
    const CT c = oc;
    std::vector<std::string> x;
    for (size_t k = 0; k < a.size(); ++k) x.push_back(operand(k, c).v);
    auto math = [&](Fn fn, const std::string& arg) { return f.math(*this, fn, c, {arg}); };
    auto sigmoid = [&] {
      const Val e = math(Fn::exp, op("fneg ", type_of(c), " ", x[0]));
      return f.divide(*this, c, literal(1, c), fbin("fadd", c, literal(1, c), e.v).v, false);
    };
    switch (in.op) {
      case OpId::neg: return finish({op("fneg ", type_of(c), " ", x[0]), c});
      case OpId::abs: return finish(math(Fn::abs, x[0]));
      case OpId::exp: return finish(math(Fn::exp, x[0]));
      case OpId::log: return finish(math(Fn::log, x[0]));
      case OpId::sqrt: return finish(math(Fn::sqrt, x[0]));
      case OpId::rsqrt: return finish(math(Fn::rsqrt, x[0]));
      case OpId::reciprocal: return finish(f.divide(*this, c, literal(1, c), x[0], false));
      case OpId::sin: return finish(math(Fn::sin, x[0]));
      case OpId::cos: return finish(math(Fn::cos, x[0]));
      case OpId::tanh: return finish(math(Fn::tanh, x[0]));
      case OpId::sigmoid: return finish(sigmoid());
      case OpId::silu: return finish(fbin("fmul", c, x[0], sigmoid().v));
      case OpId::erf: return finish(math(Fn::erf, x[0]));
      case OpId::gelu: {
        std::string half, inner;
        if (!f.c_order) half = fbin("fmul", c, literal(0.5, c), x[0]).v;
        if (in.attrs.s(0) == "tanh") {
          std::string u;
          if (f.c_order) {  // 0.044715 * x * x * x
            const std::string cx = fbin("fmul", c, literal(0.044715, c), x[0]).v;
            const std::string x3 = fbin("fmul", c, fbin("fmul", c, cx, x[0]).v, x[0]).v;
            u = fbin("fadd", c, x[0], x3).v;
          } else {
            const std::string x3 = fbin("fmul", c, fbin("fmul", c, x[0], x[0]).v, x[0]).v;
            u = fbin("fadd", c, x[0], fbin("fmul", c, literal(0.044715, c), x3).v).v;
          }
          inner = math(Fn::tanh, fbin("fmul", c, literal(0.79788456080286535588, c), u).v).v;
        } else {
          inner = math(Fn::erf, fbin("fmul", c, x[0], literal(0.70710678118654752440, c)).v).v;
        }
        if (f.c_order) half = fbin("fmul", c, literal(0.5, c), x[0]).v;
        return finish(fbin("fmul", c, half, fbin("fadd", c, literal(1, c), inner).v));
      }
      case OpId::relu:
        return finish(select(op("fcmp ole ", type_of(c), " ", x[0], ", ", literal(0, c)), c, literal(0, c), x[0]));
      case OpId::floor: return finish(math(Fn::floor, x[0]));
      case OpId::ceil: return finish(math(Fn::ceil, x[0]));
      case OpId::round: return finish(math(Fn::round, x[0]));
      case OpId::sign: {
        const std::string gt = op("fcmp ogt ", type_of(c), " ", x[0], ", ", literal(0, c));
        const std::string lt = op("fcmp olt ", type_of(c), " ", x[0], ", ", literal(0, c));
        return finish(select(gt, c, literal(1, c), select(lt, c, literal(-1, c), x[0]).v));
      }
      case OpId::add: return finish(fbin("fadd", c, x[0], x[1]));
      case OpId::sub: return finish(fbin("fsub", c, x[0], x[1]));
      case OpId::mul: return finish(fbin("fmul", c, x[0], x[1]));
      case OpId::div: return finish(f.divide(*this, c, x[0], x[1], invariant_divisor));
      case OpId::pow: return finish(f.math(*this, Fn::pow, c, {x[0], x[1]}));
      case OpId::maximum:
      case OpId::minimum: return finish(extremum(in.op == OpId::maximum, c, x[0], x[1]));
      default: break;
    }
  } else {
    // Integer (and bool) arithmetic in i64, wrapped to the output's width.
    std::vector<std::string> x;
    for (size_t k = 0; k < a.size(); ++k) x.push_back(convert(operand(k, CT::i64), CT::i64).v);
    Val r{"", CT::i64};
    switch (in.op) {
      case OpId::neg: r.v = op("sub i64 0, ", x[0]); break;
      case OpId::abs: {
        const std::string neg = op("icmp slt i64 ", x[0], ", 0"), minus = op("sub i64 0, ", x[0]);
        r = select(neg, CT::i64, minus, x[0]);
        break;
      }
      case OpId::relu: r = select(op("icmp sgt i64 ", x[0], ", 0"), CT::i64, x[0], "0"); break;
      case OpId::floor: case OpId::ceil: case OpId::round: r.v = x[0]; break;
      case OpId::sign:
        if (f.c_order) {  // x > 0 ? 1 : (x < 0 ? -1 : 0)
          const std::string neg = select(op("icmp slt i64 ", x[0], ", 0"), CT::i64, "-1", "0").v;
          r = select(op("icmp sgt i64 ", x[0], ", 0"), CT::i64, "1", neg);
        } else {  // (x > 0) - (x < 0)
          const std::string gt = op("zext i1 ", op("icmp sgt i64 ", x[0], ", 0"), " to i64");
          const std::string lt = op("zext i1 ", op("icmp slt i64 ", x[0], ", 0"), " to i64");
          r.v = op("sub i64 ", gt, ", ", lt);
        }
        break;
      case OpId::add: r.v = op("add i64 ", x[0], ", ", x[1]); break;
      case OpId::sub: r.v = op("sub i64 ", x[0], ", ", x[1]); break;
      case OpId::mul: r.v = op("mul i64 ", x[0], ", ", x[1]); break;
      case OpId::pow: r.v = ipow(x[0], x[1]); break;
      case OpId::maximum: r = select(op("icmp sgt i64 ", x[0], ", ", x[1]), CT::i64, x[0], x[1]); break;
      case OpId::minimum: r = select(op("icmp slt i64 ", x[0], ", ", x[1]), CT::i64, x[0], x[1]); break;
      default: fail(f.codegen, ": ", op_name(in.op), " has no integer form (kernel ", kernel_, ")");
    }
    return to_dtype(r, out);
  }
  fail(f.codegen, ": no code for op ", op_name(in.op), " (kernel ", kernel_, ")");
}

// ---- reductions ----
std::string Printer::identity(ReduceKind k, CT c) const {
  switch (k) {
    case ReduceKind::sum: return literal(0, c);
    case ReduceKind::prod: return literal(1, c);
    default: break;
  }
  const bool mx = k == ReduceKind::max || k == ReduceKind::argmax;
  if (is_float(c)) return literal(mx ? -INFINITY : INFINITY, c);
  if (c == CT::i64) return std::to_string(mx ? INT64_MIN : INT64_MAX);
  return mx ? "false" : "true";
}

std::string Printer::fold(ReduceKind k, CT c, const std::string& acc, const std::string& x) {
  switch (k) {
    case ReduceKind::sum:
    case ReduceKind::prod: {
      const bool sum = k == ReduceKind::sum;
      if (is_float(c)) return op(sum ? "fadd " : "fmul ", flavour_.fold_flags, type_of(c), " ", acc, ", ", x);
      return op(c == CT::i1 ? (sum ? "or i1 " : "and i1 ") : (sum ? "add i64 " : "mul i64 "), acc, ", ", x);
    }
    case ReduceKind::max:
    case ReduceKind::min: {
      const bool mx = k == ReduceKind::max;
      if (is_float(c)) {
        if (flavour_.nan_extremum(c)) return extremum(mx, c, acc, x).v;
        return call(std::string("@llvm.") + (mx ? "maxnum." : "minnum.") + suffix_of(c), c, {acc, x},
                    flavour_.extremum_flags)
            .v;
      }
      if (c == CT::i64) return select(op("icmp ", mx ? "sgt" : "slt", " i64 ", x, ", ", acc), c, x, acc).v;
      return op(mx ? "or i1 " : "and i1 ", acc, ", ", x);
    }
    default: break;
  }
  fail(flavour_.codegen, ": kernel ", kernel_, ": an arg reduction has no fold of values alone");
}

}  // namespace kiln::render::llvm
