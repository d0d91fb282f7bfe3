// The LLVM IR value printer (llvm.h): types, conversions, each op's math, reduction folds.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "kiln/graph/error.h"
#include "kiln/graph/philox.h"
#include "kiln/render/llvm.h"

namespace kiln::render::llvm {

using schedule::Affine;
using schedule::Instr;
using schedule::ReduceKind;

const char* type_of(CT c) {
  switch (c) {
    case CT::f32: return "float";
    case CT::f64: return "double";
    case CT::i64: return "i64";
    case CT::b: return "i1";
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
    case CT::b: return v != 0.0 ? "true" : "false";
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

// The op philox (kiln/graph/philox.h): Philox4x32-10 written out round by
// round as 32-bit integer arithmetic, the top 24 bits of one word; `word` is a constant at
// every call, so inlining keeps only what that word needs (and a kernel computing two words of
// one counter shares the rounds).
const std::string& philox_helper() {
  static const std::string text = [] {
    std::string f = "define internal i64 @kiln_philox(i64 %key, i64 %ctr, i32 %word) alwaysinline {\n";
    f += "  %k0.0 = trunc i64 %key to i32\n  %kh = lshr i64 %key, 32\n  %k1.0 = trunc i64 %kh to i32\n";
    f += "  %c0.0 = trunc i64 %ctr to i32\n  %ch = lshr i64 %ctr, 32\n  %c1.0 = trunc i64 %ch to i32\n";
    f += "  %c2.0 = add i32 0, 0\n  %c3.0 = add i32 0, 0\n";
    for (int r = 0; r < 10; ++r) {
      const std::string i = std::to_string(r), o = std::to_string(r + 1);
      std::string k0 = "%k0.0", k1 = "%k1.0";
      if (r > 0) {
        f += "  %k0." + i + " = add i32 %k0." + std::to_string(r - 1) + ", " + std::to_string(static_cast<int32_t>(kPhiloxW0)) + "\n";
        f += "  %k1." + i + " = add i32 %k1." + std::to_string(r - 1) + ", " + std::to_string(static_cast<int32_t>(kPhiloxW1)) + "\n";
        k0 = "%k0." + i;
        k1 = "%k1." + i;
      }
      f += "  %a." + i + " = zext i32 %c0." + i + " to i64\n  %p0." + i + " = mul i64 %a." + i + ", " +
           std::to_string(kPhiloxM0) + "\n";
      f += "  %b." + i + " = zext i32 %c2." + i + " to i64\n  %p1." + i + " = mul i64 %b." + i + ", " +
           std::to_string(kPhiloxM1) + "\n";
      f += "  %h0s." + i + " = lshr i64 %p0." + i + ", 32\n  %hi0." + i + " = trunc i64 %h0s." + i + " to i32\n";
      f += "  %h1s." + i + " = lshr i64 %p1." + i + ", 32\n  %hi1." + i + " = trunc i64 %h1s." + i + " to i32\n";
      f += "  %x0." + i + " = xor i32 %hi1." + i + ", %c1." + i + "\n  %c0." + o + " = xor i32 %x0." + i + ", " + k0 + "\n";
      f += "  %c1." + o + " = trunc i64 %p1." + i + " to i32\n";
      f += "  %x2." + i + " = xor i32 %hi0." + i + ", %c3." + i + "\n  %c2." + o + " = xor i32 %x2." + i + ", " + k1 + "\n";
      f += "  %c3." + o + " = trunc i64 %p0." + i + " to i32\n";
    }
    f += "  %is1 = icmp eq i32 %word, 1\n  %is2 = icmp eq i32 %word, 2\n  %is3 = icmp eq i32 %word, 3\n";
    f += "  %w3 = select i1 %is3, i32 %c3.10, i32 %c0.10\n  %w2 = select i1 %is2, i32 %c2.10, i32 %w3\n";
    f += "  %w = select i1 %is1, i32 %c1.10, i32 %w2\n  %top = lshr i32 %w, 8\n  %r = zext i32 %top to i64\n  ret i64 %r\n}\n";
    return f;
  }();
  return text;
}

std::string Printer::philox(const std::string& key, const std::string& counter, int64_t word, int64_t seed) {
  helpers_.insert(philox_helper());
  const std::string k = seed == 0 ? key : op("add i64 ", key, ", ", seed);
  return op("call i64 @kiln_philox(i64 ", k, ", i64 ", counter, ", i32 ", word, ")");
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
      if (x.ct == CT::b) return {op("uitofp i1 ", x.v, " to ", type_of(to)), to};
      return {op("sitofp i64 ", x.v, " to ", type_of(to)), to};
    case CT::i64:
      if (x.ct == CT::b) return {op("zext i1 ", x.v, " to i64"), to};
      return {op("fptosi ", type_of(x.ct), " ", x.v, " to i64"), to};
    case CT::b:
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
    case DType::bool_: return {op("icmp ne i8 ", raw, ", 0"), CT::b};
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

void Printer::atomic_combine(schedule::Combine c, DType t, const std::string& ptr_type, const std::string& p,
                             const Val& x) {
  const std::string align = std::to_string(dtype_size(t));
  if (c == schedule::Combine::add) {
    op(is_floating(t) ? "atomicrmw fadd " : "atomicrmw add ", ptr_type, " ", p, ", ", storage_type(t), " ",
       to_storage(t, x), " monotonic, align ", align);
    return;
  }
  // cmpxchg takes integers: floats go through their bits.
  const char* bits = dtype_size(t) == 8 ? "i64" : "i32";
  const bool floating = is_floating(t);
  const std::string slot = alloca(bits), retry = label("cas"), done = label("casdone");
  line("store ", bits, " ", op("load atomic ", bits, ", ", ptr_type, " ", p, " monotonic, align ", align), ", ptr ", slot);
  line("br label %", retry);
  block(retry);
  const std::string old = op("load ", bits, ", ptr ", slot);
  const std::string old_raw = floating ? op("bitcast ", bits, " ", old, " to ", storage_type(t)) : old;
  Instr combine;
  combine.kind = schedule::InstrKind::pointwise;
  combine.op = schedule::combine_op(c);
  combine.dtype = t;
  const std::string next_raw = to_storage(t, pointwise(combine, {from_storage(t, old_raw), convert(x, ct_of(t))}, {t, t}, false));
  const std::string next = floating ? op("bitcast ", storage_type(t), " ", next_raw, " to ", bits) : next_raw;
  const std::string pair = op("cmpxchg ", ptr_type, " ", p, ", ", bits, " ", old, ", ", bits, " ", next,
                              " monotonic monotonic, align ", align);
  line("store ", bits, " ", op("extractvalue { ", bits, ", i1 } ", pair, ", 0"), ", ptr ", slot);
  line("br i1 ", op("extractvalue { ", bits, ", i1 } ", pair, ", 1"), ", label %", done, ", label %", retry);
  block(done);
}

Val Printer::pointwise(const Instr& in, const std::vector<Val>& a, const std::vector<DType>& at, bool emulate,
                       bool invariant_divisor) {
  const DType out = in.dtype;
  const CT oc = ct_of(out);
  auto finish = [&](const Val& v) { return emulate ? narrow(v, out) : v; };
  switch (in.op) {
    case OpId::cast: return to_dtype(a[0], out);
    case OpId::logical_not: return {op("xor i1 ", convert(a[0], CT::b).v, ", true"), CT::b};
    case OpId::isnan:
      if (!is_float(a[0].ct)) return {"false", CT::b};
      return {op("fcmp uno ", type_of(a[0].ct), " ", a[0].v, ", ", a[0].v), CT::b};
    case OpId::logical_and:
    case OpId::logical_or: {
      const std::string x = convert(a[0], CT::b).v, y = convert(a[1], CT::b).v;
      return {op(in.op == OpId::logical_and ? "and i1 " : "or i1 ", x, ", ", y), CT::b};
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
              CT::b};
    }
    case OpId::philox:
      return {philox(convert(a[0], CT::i64).v, convert(a[1], CT::i64).v, in.attrs.i(0), in.attrs.i(1)), CT::i64};
    case OpId::where: {
      const Val c = convert(a[0], CT::b);
      // A branch of the op's dtype is already a number of it (no rounding: convnext's bf16
      // depthwise taps, each a where of a loaded bf16 and 0, rounded every tap again).
      auto branch = [&](size_t k) { return at[k] == out ? convert(a[k], oc).v : to_dtype(a[k], out).v; };
      const std::string x = branch(1), y = branch(2);
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
Val Printer::rule_value(const lower::Rule& r, int32_t n, const std::function<std::string(const lower::Node&)>& leaf,
                        std::map<int32_t, Val>& memo) {
  using Op = lower::Node::Op;
  if (auto it = memo.find(n); it != memo.end()) return it->second;
  const lower::Node& nd = r.at(n);
  auto arg = [&](int k) { return rule_value(r, nd.args[k], leaf, memo).v; };
  const char* t = type_of(nd.ct);
  Val v{"", nd.ct};
  switch (nd.op) {
    case Op::a: case Op::b: case Op::x: case Op::j: v.v = leaf(nd); break;
    case Op::literal:
      v.v = nd.ct == CT::i64 ? std::to_string(nd.integer) : nd.ct == CT::b ? (nd.value != 0 ? "true" : "false") : literal(nd.value, nd.ct);
      break;
    case Op::add: case Op::mul: {
      const bool add = nd.op == Op::add;
      const std::string x = arg(0), y = arg(1);
      if (is_float(nd.ct)) v.v = op(add ? "fadd " : "fmul ", flavour_.fold_flags, t, " ", x, ", ", y);
      else v.v = op(nd.ct == CT::b ? (add ? "or i1 " : "and i1 ") : (add ? "add i64 " : "mul i64 "), x, ", ", y);
      break;
    }
    case Op::max: case Op::min: {
      const bool mx = nd.op == Op::max;
      const std::string x = arg(0), y = arg(1);
      if (is_float(nd.ct) && nd.propagate_nan) v = extremum(mx, nd.ct, x, y);
      else if (is_float(nd.ct))
        v = call(std::string("@llvm.") + (mx ? "maxnum." : "minnum.") + suffix_of(nd.ct), nd.ct, {x, y}, flavour_.extremum_flags);
      else if (nd.ct == CT::i64) v = select(op("icmp ", mx ? "sgt" : "slt", " i64 ", y, ", ", x), nd.ct, y, x);
      else v.v = op(mx ? "or i1 " : "and i1 ", x, ", ", y);
      break;
    }
    case Op::gt: case Op::lt: case Op::eq: {
      const std::string x = arg(0), y = arg(1);
      const char* pred = nd.op == Op::gt ? (is_float(nd.operand) ? "ogt " : "sgt ")
                         : nd.op == Op::lt ? (is_float(nd.operand) ? "olt " : "slt ")
                                           : (is_float(nd.operand) ? "oeq " : "eq ");
      v.v = op(is_float(nd.operand) ? "fcmp " : "icmp ", pred, type_of(nd.operand), " ", x, ", ", y);
      break;
    }
    case Op::land: case Op::lor: {
      const std::string x = arg(0), y = arg(1);
      v.v = op(nd.op == Op::land ? "and i1 " : "or i1 ", x, ", ", y);
      break;
    }
    case Op::lnot: v.v = op("xor i1 ", arg(0), ", true"); break;
    case Op::isnan: {
      const std::string x = arg(0);
      v.v = is_float(nd.operand) ? op("fcmp uno ", type_of(nd.operand), " ", x, ", ", x) : "false";
      break;
    }
    case Op::select: {
      const std::string c = arg(0), x = arg(1), y = arg(2);
      v = select(c, nd.ct, x, y);
      break;
    }
  }
  memo[n] = v;
  return v;
}

lower::Rule Printer::reduction_rule(const schedule::Kernel& k, int32_t r) const {
  return lower::reduction_rule(k, r, {flavour_.nan_extremum(CT::f32), flavour_.nan_extremum(CT::f64), flavour_.compensate_long_sums});
}

std::vector<std::string> Printer::identity_values(const lower::Rule& r) {
  std::map<int32_t, Val> memo;
  std::vector<std::string> out;
  for (int32_t n : r.identity) out.push_back(rule_value(r, n, {}, memo).v);
  return out;
}

void Printer::store_identity(const lower::Rule& r, const std::vector<std::string>& slots) {
  const std::vector<std::string> init = identity_values(r);
  for (size_t c = 0; c < r.state.size(); ++c) line("store ", type_of(r.state[c].ct), " ", init[c], ", ptr ", slots[c]);
}

std::vector<std::string> Printer::element_state(const lower::Rule& r, const Val& x0, const std::string& j) {
  const std::string x = convert(x0, r.state[0].ct).v;
  std::map<int32_t, Val> memo;
  auto leaf = [&](const lower::Node& n) { return n.op == lower::Node::Op::x ? x : j; };
  std::vector<std::string> out;
  for (int32_t n : r.element) out.push_back(rule_value(r, n, leaf, memo).v);
  return out;
}

void Printer::fold_into(const lower::Rule& r, const std::vector<std::string>& slots, const std::vector<std::string>& b) {
  std::map<int32_t, Val> memo;
  std::map<int32_t, std::string> old;  // component -> its loaded value
  auto a = [&](size_t c) -> const std::string& {
    auto it = old.find(static_cast<int32_t>(c));
    if (it == old.end()) it = old.emplace(static_cast<int32_t>(c), op("load ", type_of(r.state[c].ct), ", ptr ", slots[c])).first;
    return it->second;
  };
  auto leaf = [&](const lower::Node& n) {
    return n.op == lower::Node::Op::a ? a(static_cast<size_t>(n.index)) : b[static_cast<size_t>(n.index)];
  };
  const std::string take = r.take >= 0 ? rule_value(r, r.take, leaf, memo).v : "";
  std::vector<std::string> next;
  for (size_t c = 0; c < r.state.size(); ++c) {
    const std::string f = rule_value(r, r.fold[c], leaf, memo).v;
    next.push_back(take.empty() ? f : select(take, r.state[c].ct, f, a(c)).v);
  }
  for (size_t c = 0; c < r.state.size(); ++c) line("store ", type_of(r.state[c].ct), " ", next[c], ", ptr ", slots[c]);
}

Val Printer::finish_state(const lower::Rule& r, const std::vector<std::string>& a, DType result) {
  std::map<int32_t, Val> memo;
  auto leaf = [&](const lower::Node& n) { return a[static_cast<size_t>(n.index)]; };
  return to_dtype(rule_value(r, r.finish, leaf, memo), result);
}


}  // namespace kiln::render::llvm
