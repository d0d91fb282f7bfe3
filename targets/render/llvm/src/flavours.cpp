// The CPU and NVPTX flavours of the LLVM IR printer (llvm.h): what differs between the two.
#include "kiln/render/llvm.h"

namespace kiln::render::llvm {

namespace {

std::string intrinsic(const char* name, CT c) { return std::string("@llvm.") + name + "." + suffix_of(c); }

struct Cpu : Flavour {
  Cpu() {
    codegen = "cpu codegen";
    fold_flags = "reassoc ";
    // nnan nsz let LLVM vectorise the fold (its min/max reductions require them). The codegen
    // tracks NaN in a flag that replaces the result at the end, so a fold that saw a NaN (whose
    // value nnan leaves undefined) is never used; the sign of a zero maximum may differ from the
    // reference's, as torch's vectorised kernels' does.
    extremum_flags = "nnan nsz ";
    round_bf16 = "@kiln_round_bf16";
  }
  Val math(Printer& p, Fn fn, CT c, const std::vector<std::string>& x) const override {
    switch (fn) {
      case Fn::abs: return p.call(intrinsic("fabs", c), c, x);
      // exp: the prelude's inline polynomial for f32 (vectorises without calls), LLVM's
      // intrinsic (libm / libmvec) for f64; tanh likewise from exp for f32, erf from a rational
      // polynomial for f32; libm's for f64.
      case Fn::exp: return p.call(c == CT::f32 ? "@kiln_expf" : intrinsic("exp", c), c, x);
      case Fn::tanh: return p.call(c == CT::f32 ? "@kiln_tanhf" : "@tanh", c, x);
      case Fn::erf: return p.call(c == CT::f32 ? "@kiln_erff" : "@erf", c, x);
      case Fn::log: return p.call(intrinsic("log", c), c, x);
      case Fn::sqrt: return p.call(intrinsic("sqrt", c), c, x);
      case Fn::rsqrt: return divide(p, c, literal(1, c), math(p, Fn::sqrt, c, x).v, false);
      case Fn::sin: return p.call(intrinsic("sin", c), c, x);
      case Fn::cos: return p.call(intrinsic("cos", c), c, x);
      case Fn::floor: return p.call(intrinsic("floor", c), c, x);
      case Fn::ceil: return p.call(intrinsic("ceil", c), c, x);
      case Fn::round: return p.call(intrinsic("roundeven", c), c, x);
      case Fn::pow: return p.call(intrinsic("pow", c), c, x);
    }
    return {};
  }
  // Dividing a row by a per-row value (softmax's sum): one reciprocal per row, hoisted by LLVM,
  // and a product per element instead of a divide (a divide costs as much as the exp of
  // softmax). In f64 and rounded once, so the result is a / b rounded to f32 (a reciprocal in
  // f32 would be 1.5 ulp off and overflow for subnormal b).
  Val divide(Printer& p, CT c, const std::string& a, const std::string& b, bool invariant_divisor) const override {
    if (c != CT::f32 || !invariant_divisor) return p.fbin("fdiv", c, a, b);
    const std::string num = p.convert({a, c}, CT::f64).v;
    const std::string rcp = p.op("fdiv double 1.0, ", p.convert({b, c}, CT::f64).v);
    return {p.op("fptrunc double ", p.op("fmul double ", num, ", ", rcp), " to float"), c};
  }
};

// Numerics as cuda_c.cpp's kernels and torch.compile's Triton kernels compute them.
struct Nvptx : Flavour {
  bool precise = false;
  explicit Nvptx(bool precise_math) : precise(precise_math) {
    codegen = "cuda codegen";
    index_div = "udiv";
    index_rem = "urem";
    c_order = true;
    compensate_long_sums = true;
  }
  // libdevice's function for C math function fn ("sin", "tanh", ...): __nv_sinf / __nv_sin.
  static Val libdevice(Printer& p, const char* fn, CT c, const std::vector<std::string>& x) {
    return p.call(std::string("@__nv_") + fn + (c == CT::f32 ? "f" : ""), c, x);
  }
  Val math(Printer& p, Fn fn, CT c, const std::vector<std::string>& x) const override {
    switch (fn) {
      case Fn::abs: return libdevice(p, "fabs", c, x);
      // f32 exp as Triton's: 2^(x log2 e) by the MUFU (ex2.approx); libdevice's with precise_math.
      case Fn::exp:
        if (c != CT::f32 || precise) return libdevice(p, "exp", c, x);
        return p.call("@llvm.nvvm.ex2.approx.f", c, {p.fbin("fmul", c, x[0], literal(1.44269504, CT::f32)).v});
      case Fn::log: return libdevice(p, "log", c, x);
      // IEEE square root (sqrt.rn): LLVM's intrinsic. libdevice's sqrtf asks __nvvm_reflect for
      // "__CUDA_PREC_SQRT", which LLVM 16's NVVMReflect answers 0: the approximate square root.
      case Fn::sqrt: return p.call(intrinsic("sqrt", c), c, x);
      case Fn::rsqrt:
        if (c != CT::f32 || precise) return divide(p, c, literal(1, c), math(p, Fn::sqrt, c, x).v, false);
        return libdevice(p, "rsqrt", c, x);  // rsqrt.approx.f32, as Triton's libdevice.rsqrt
      case Fn::sin: return libdevice(p, "sin", c, x);
      case Fn::cos: return libdevice(p, "cos", c, x);
      case Fn::tanh: return libdevice(p, "tanh", c, x);
      case Fn::erf: return libdevice(p, "erf", c, x);
      case Fn::floor: return libdevice(p, "floor", c, x);
      case Fn::ceil: return libdevice(p, "ceil", c, x);
      // Round half to even: cvt.rni. (libdevice's rintf calls llvm.nvvm.round.f, which NVVM takes
      // as round-half-even and LLVM 16's NVPTX backend lowers as round-half-away: 0.5 became 1.)
      case Fn::round: {
        const std::string t = type_of(c), r = c == CT::f32 ? "f" : "d", s = suffix_of(c);
        return {p.op("call ", t, " asm \"cvt.rni.", s, ".", s, " $0, $1;\", \"=", r, ",", r, "\"(", t, " ", x[0], ")"), c};
      }
      case Fn::pow: return libdevice(p, "pow", c, x);
    }
    return {};
  }
  // f32 division as Triton's: div.full.f32 (full range, within 2 ulp); IEEE with precise_math.
  Val divide(Printer& p, CT c, const std::string& a, const std::string& b, bool) const override {
    if (c != CT::f32 || precise) return p.fbin("fdiv", c, a, b);
    return {p.op("call float asm \"div.full.f32 $0, $1, $2;\", \"=f,f,f\"(float ", a, ", float ", b, ")"), c};
  }
  // max.NaN / min.NaN for f32 (sm_80); f64 compares and selects (LLVM 16 would print
  // max.NaN.f64, which ptxas does not have).
  bool nan_extremum(CT c) const override { return c == CT::f32; }
};

}  // namespace

const Flavour& cpu() {
  static const Cpu f;
  return f;
}

const Flavour& nvptx(bool precise_math) {
  static const Nvptx precise(true), fast(false);
  return precise_math ? precise : fast;
}

}  // namespace kiln::render::llvm
