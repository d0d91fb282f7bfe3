// The CPU flavour's part of a module's prelude (llvm.h): what the values it prints call.
#include "kiln/render/llvm.h"

namespace kiln::render::llvm {

const char* cpu_declarations() {
  return R"(declare float @llvm.exp.f32(float)
declare double @llvm.exp.f64(double)
declare float @llvm.log.f32(float)
declare double @llvm.log.f64(double)
declare float @llvm.sqrt.f32(float)
declare double @llvm.sqrt.f64(double)
declare float @llvm.sin.f32(float)
declare double @llvm.sin.f64(double)
declare float @llvm.cos.f32(float)
declare double @llvm.cos.f64(double)
declare float @llvm.pow.f32(float, float)
declare double @llvm.pow.f64(double, double)
declare float @llvm.fabs.f32(float)
declare double @llvm.fabs.f64(double)
declare float @llvm.floor.f32(float)
declare double @llvm.floor.f64(double)
declare float @llvm.ceil.f32(float)
declare double @llvm.ceil.f64(double)
declare float @llvm.roundeven.f32(float)
declare double @llvm.roundeven.f64(double)
declare float @llvm.copysign.f32(float, float)
declare float @llvm.maxnum.f32(float, float)
declare double @llvm.maxnum.f64(double, double)
declare float @llvm.minnum.f32(float, float)
declare double @llvm.minnum.f64(double, double)
declare double @erf(double) nounwind readnone
declare double @tanh(double) nounwind readnone
)";
}

const char* cpu_helpers() {
  static const std::string text = std::string(R"(; exp for f32, inline so loops vectorise at full width without calls (as XLA's CPU backend
; does): x = n*ln2 + r with |r| <= ln2/2 (Cody-Waite, ln2 in two parts), exp(r) by Cephes'
; degree-7 polynomial (about 1 ulp), times 2^n applied in two halves so results down in the
; subnormal range and up to overflow (inf) come out right; NaN stays NaN.
define internal float @kiln_expf(float %x0) alwaysinline nounwind {
  %c = call float @llvm.minnum.f32(float %x0, float 89.0)
  %x = call float @llvm.maxnum.f32(float %c, float -104.0)
  %t = fmul float %x, 0x3FF7154760000000
  %nf = call float @llvm.roundeven.f32(float %t)
  %a = fmul float %nf, 0x3FE6300000000000
  %r0 = fsub float %x, %a
  %b = fmul float %nf, 0xBF2BD01060000000
  %r = fsub float %r0, %b
  %y0 = fmul float %r, 0x3F2A0D2CE0000000
  %y1 = fadd float %y0, 0x3F56E879C0000000
  %y2 = fmul float %y1, %r
  %y3 = fadd float %y2, 0x3F81112100000000
  %y4 = fmul float %y3, %r
  %y5 = fadd float %y4, 0x3FA5553820000000
  %y6 = fmul float %y5, %r
  %y7 = fadd float %y6, 0x3FC5555540000000
  %y8 = fmul float %y7, %r
  %y9 = fadd float %y8, 0x3FE0000000000000
  %rr = fmul float %r, %r
  %z0 = fmul float %y9, %rr
  %z1 = fadd float %z0, %r
  %p = fadd float %z1, 1.0
  %n = fptosi float %nf to i32
  %e1 = ashr i32 %n, 1
  %e2 = sub i32 %n, %e1
  %k1 = add i32 %e1, 127
  %k2 = add i32 %e2, 127
  %s1 = shl i32 %k1, 23
  %s2 = shl i32 %k2, 23
  %f1 = bitcast i32 %s1 to float
  %f2 = bitcast i32 %s2 to float
  %q = fmul float %p, %f1
  %res = fmul float %q, %f2
  %nan = fcmp uno float %x0, %x0
  %out = select i1 %nan, float %x0, float %res
  ret float %out
}

; tanh from exp (vectorisable): 1 - 2/(exp(2|x|) + 1), and a Taylor polynomial below 0.3
; where that form cancels; the sign is copied back.
define internal float @kiln_tanhf(float %x) alwaysinline nounwind {
  %a = call float @llvm.fabs.f32(float %x)
  %a2 = fmul float %a, 2.0
  %e = call float @kiln_expf(float %a2)
  %d = fadd float %e, 1.0
  %q = fdiv float 2.0, %d
  %big = fsub float 1.0, %q
  %x2 = fmul float %a, %a
  %p0 = fmul float %x2, 0xBF8226E360000000
  %p1 = fadd float %p0, 0x3F9664F480000000
  %p2 = fmul float %p1, %x2
  %p3 = fadd float %p2, 0xBFABA1BA20000000
  %p4 = fmul float %p3, %x2
  %p5 = fadd float %p4, 0x3FC1111120000000
  %p6 = fmul float %p5, %x2
  %p7 = fadd float %p6, 0xBFD5555560000000
  %ax2 = fmul float %a, %x2
  %t = fmul float %ax2, %p7
  %small = fadd float %a, %t
  %use = fcmp olt float %a, 0x3FD3333340000000
  %r = select i1 %use, float %small, float %big
  %s = call float @llvm.copysign.f32(float %r, float %x)
  ret float %s
}

; erf for f32, inline so loops vectorise (libm's erff is a call per element, which kept GELU
; epilogues scalar): the rational approximation XLA's CPU backend and Eigen use, x * (P(x^2) /
; Q(x^2)) on x clamped to [-4, 4] (erf is 1 to float precision beyond; x multiplies last so a
; subnormal x is rounded once). At most 4.5e-7 from erf (7.4 ulp, near 3.6; measured against
; double erf on a 1e-5 grid of [-6, 6]), relatively as close towards 0; NaN stays NaN.
define internal float @kiln_erff(float %x0) alwaysinline nounwind {
  %c = call float @llvm.minnum.f32(float %x0, float 4.0)
  %x = call float @llvm.maxnum.f32(float %c, float -4.0)
  %x2 = fmul float %x, %x
  %p0 = fmul float %x2, 0xBDF2BBE160000000
  %p1 = fadd float %p0, 0x3E5DBFFDC0000000
  %p2 = fmul float %p1, %x2
  %p3 = fadd float %p2, 0xBEC19FEA20000000
  %p4 = fmul float %p3, %x2
  %p5 = fadd float %p4, 0xBF0DD85A40000000
  %p6 = fmul float %p5, %x2
  %p7 = fadd float %p6, 0xBF48158C60000000
  %p8 = fmul float %p7, %x2
  %p9 = fadd float %p8, 0xBF68343EC0000000
  %p10 = fmul float %p9, %x2
  %pe = fadd float %p10, 0xBF907B7A80000000
  %q0 = fmul float %x2, 0xBEEE8C19A0000000
  %q1 = fadd float %q0, 0xBF2BF7A520000000
  %q2 = fmul float %q1, %x2
  %q3 = fadd float %q2, 0xBF5B9249C0000000
  %q4 = fmul float %q3, %x2
  %q5 = fadd float %q4, 0xBF7E337F00000000
  %q6 = fmul float %q5, %x2
  %q = fadd float %q6, 0xBF8D36D4E0000000
  %pq = fdiv float %pe, %q
  %r = fmul float %pq, %x
  %nan = fcmp uno float %x0, %x0
  %out = select i1 %nan, float %x0, float %r
  ret float %out
}

; bf16: round to nearest even (NaN stays a quiet NaN).
define internal i16 @kiln_bf16_bits(float %x) alwaysinline nounwind {
  %b = bitcast float %x to i32
  %l = lshr i32 %b, 16
  %lsb = and i32 %l, 1
  %bias = add i32 %lsb, 32767
  %r = add i32 %b, %bias
  %h = lshr i32 %r, 16
  %t = trunc i32 %h to i16
  %nan = fcmp uno float %x, %x
  %hn = lshr i32 %b, 16
  %tn = trunc i32 %hn to i16
  %q = or i16 %tn, 64
  %s = select i1 %nan, i16 %q, i16 %t
  ret i16 %s
}
define internal float @kiln_round_bf16(float %x) alwaysinline nounwind {
  %h = call i16 @kiln_bf16_bits(float %x)
  %w = zext i16 %h to i32
  %s = shl i32 %w, 16
  %f = bitcast i32 %s to float
  ret float %f
}

; Integer power by squaring (wrapping); a negative exponent gives 0.
define internal i64 @kiln_ipow(i64 %base, i64 %e) nounwind {
entry:
  %neg = icmp slt i64 %e, 0
  br i1 %neg, label %zero, label %loop
zero:
  ret i64 0
loop:
  %r = phi i64 [1, %entry], [%r2, %next]
  %b = phi i64 [%base, %entry], [%b2, %next]
  %k = phi i64 [%e, %entry], [%k2, %next]
  %done = icmp eq i64 %k, 0
  br i1 %done, label %out, label %step
step:
  %odd = and i64 %k, 1
  %isodd = icmp ne i64 %odd, 0
  %rm = mul i64 %r, %b
  %r1 = select i1 %isodd, i64 %rm, i64 %r
  br label %next
next:
  %r2 = phi i64 [%r1, %step]
  %b2 = mul i64 %b, %b
  %k2 = lshr i64 %k, 1
  br label %loop
out:
  ret i64 %r
}
)") + philox_helper();
  return text.c_str();
}

}  // namespace kiln::render::llvm
