// GLSL helper functions the generated shaders may call (included into a shader only when its
// body names them). Double-precision transcendental functions are written out here because GLSL
// has exp/log/sin/cos/tanh/pow only for 32-bit floats; they are accurate to a few ulp over the
// ranges Kiln computes (Cody-Waite argument reduction, then Taylor/atanh series).
#pragma once

namespace kiln::vulkan::detail {

struct Helper {
  const char* name;  // a call to it in the body is "<name>("
  const char* deps;  // space-separated helper names it calls
  const char* code;
};

inline constexpr Helper kHelpers[] = {
    {"kiln_f2h", "", R"(uint kiln_f2h(float f) {
  const uint x = floatBitsToUint(f);
  const uint sign = (x >> 16) & 0x8000u;
  const uint ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00u;
  if (ax >= 0x477ff000u) return sign | 0x7c00u;
  if (ax >= 0x38800000u) {
    const uint h = ax - 0x38000000u;
    return sign | ((h + 0xfffu + ((h >> 13) & 1u)) >> 13);
  }
  return sign | uint(roundEven(uintBitsToFloat(ax) * 16777216.0));
}
)"},
    {"kiln_f2bf", "", R"(uint kiln_f2bf(float f) {
  const uint x = floatBitsToUint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;
  return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}
)"},
    {"kiln_ipow", "", R"(int64_t kiln_ipow(int64_t b, int64_t e) {
  if (e < 0l) return 0l;
  int64_t r = 1l;
  while (e != 0l) { if ((e & 1l) != 0l) r *= b; b *= b; e >>= 1; }
  return r;
}
)"},
    // The op philox (kiln/graph/philox.h): Philox4x32-10, the top 24 bits of word `word`.
    {"kiln_philox", "", R"(int64_t kiln_philox(int64_t key, int64_t ctr, int word) {
  uint key0 = uint(key & 0xffffffffl), key1 = uint((key >> 32) & 0xffffffffl);
  uint c0 = uint(ctr & 0xffffffffl), c1 = uint((ctr >> 32) & 0xffffffffl), c2 = 0u, c3 = 0u;
  for (int r = 0; r < 10; ++r) {
    if (r > 0) { key0 += 0x9E3779B9u; key1 += 0xBB67AE85u; }
    uint hi0, lo0, hi1, lo1;
    umulExtended(0xD2511F53u, c0, hi0, lo0);
    umulExtended(0xCD9E8D57u, c2, hi1, lo1);
    c0 = hi1 ^ c1 ^ key0; c1 = lo1; c2 = hi0 ^ c3 ^ key1; c3 = lo0;
  }
  const uint w = word == 0 ? c0 : word == 1 ? c1 : word == 2 ? c2 : c3;
  return int64_t(w >> 8);
}
)"},
    {"kiln_exp_d", "", R"(double kiln_exp_d(double x) {
  if (isnan(x)) return x;
  if (x > 709.782712893384LF) return packDouble2x32(uvec2(0u, 0x7ff00000u));
  if (x < -745.2LF) return 0.0LF;
  const double k = roundEven(x * 1.4426950408889634LF);
  const double r = (x - k * 6.93147180369123816490e-01LF) - k * 1.90821492927058770002e-10LF;
  // Horner's steps written out, not looped: lavapipe (Mesa 22.3, LLVM 15) miscompiled the loop
  // inlined into a two-pass column reduction (f64 logsumexp over 36,864 rows gave a quarter of
  // the sum's terms).
  double p = 1.0LF + r / 13.0LF;
  p = 1.0LF + p * r / 12.0LF;
  p = 1.0LF + p * r / 11.0LF;
  p = 1.0LF + p * r / 10.0LF;
  p = 1.0LF + p * r / 9.0LF;
  p = 1.0LF + p * r / 8.0LF;
  p = 1.0LF + p * r / 7.0LF;
  p = 1.0LF + p * r / 6.0LF;
  p = 1.0LF + p * r / 5.0LF;
  p = 1.0LF + p * r / 4.0LF;
  p = 1.0LF + p * r / 3.0LF;
  p = 1.0LF + p * r / 2.0LF;
  p = 1.0LF + p * r;
  const int ki = int(k);
  return ldexp(ldexp(p, ki / 2), ki - ki / 2);
}
)"},
    {"kiln_expm1_d", "kiln_exp_d", R"(double kiln_expm1_d(double x) {
  if (abs(x) < 0.5LF) {
    double t = x, s = x;
    for (int n = 2; n <= 18; ++n) { t *= x / double(n); s += t; }
    return s;
  }
  return kiln_exp_d(x) - 1.0LF;
}
)"},
    {"kiln_log_d", "", R"(double kiln_log_d(double x) {
  if (isnan(x) || x == packDouble2x32(uvec2(0u, 0x7ff00000u))) return x;
  if (x < 0.0LF) return packDouble2x32(uvec2(0u, 0x7ff80000u));
  if (x == 0.0LF) return packDouble2x32(uvec2(0u, 0xfff00000u));
  int e;
  double m = frexp(x, e);
  if (m < 0.70710678118654752440LF) { m *= 2.0LF; e -= 1; }
  const double f = (m - 1.0LF) / (m + 1.0LF);
  const double s = f * f;
  // Written out as kiln_exp_d's steps are (lavapipe).
  double p = 1.0LF / 23.0LF + s * (1.0LF / 25.0LF);
  p = 1.0LF / 21.0LF + s * p;
  p = 1.0LF / 19.0LF + s * p;
  p = 1.0LF / 17.0LF + s * p;
  p = 1.0LF / 15.0LF + s * p;
  p = 1.0LF / 13.0LF + s * p;
  p = 1.0LF / 11.0LF + s * p;
  p = 1.0LF / 9.0LF + s * p;
  p = 1.0LF / 7.0LF + s * p;
  p = 1.0LF / 5.0LF + s * p;
  p = 1.0LF / 3.0LF + s * p;
  p = 1.0LF + s * p;
  const double de = double(e);
  return (de * 6.93147180369123816490e-01LF + 2.0LF * f * p) + de * 1.90821492927058770002e-10LF;
}
)"},
    {"kiln_sincos_d", "", R"(double kiln_sincos_d(double x, int shift) {
  if (isnan(x) || isinf(x)) return packDouble2x32(uvec2(0u, 0x7ff80000u));
  // x - k pi/2 with pi/2 in three parts (fdlibm's 33 + 33 + 53 bits) and k split into a multiple
  // of 2^20 and the rest, so every product of the first two parts is exact up to |k| ~ 2^40.
  const double k = roundEven(x * 0.63661977236758134308LF);
  // (precise: the compiler must not reassociate the exact steps.)
  precise const double kh = trunc(k / 1048576.0LF) * 1048576.0LF, kl = k - kh;
  precise double r = x - kh * 1.57079632673412561417e+00LF;
  r -= kl * 1.57079632673412561417e+00LF;
  r -= kh * 6.07710050630396597660e-11LF;
  r -= kl * 6.07710050630396597660e-11LF;
  r -= k * 2.02226624871116645580e-21LF;
  const int q = (int(mod(k, 4.0LF)) + shift) & 3;
  const double r2 = r * r;
  double v;
  if ((q & 1) == 0) {
    double t = r, s = r;
    for (int n = 1; n <= 10; ++n) { t *= -r2 / double((2 * n) * (2 * n + 1)); s += t; }
    v = s;
  } else {
    double t = 1.0LF, s = 1.0LF;
    for (int n = 1; n <= 10; ++n) { t *= -r2 / double((2 * n - 1) * (2 * n)); s += t; }
    v = s;
  }
  return q >= 2 ? -v : v;
}
)"},
    {"kiln_sin_d", "kiln_sincos_d", "double kiln_sin_d(double x) { return kiln_sincos_d(x, 0); }\n"},
    {"kiln_cos_d", "kiln_sincos_d", "double kiln_cos_d(double x) { return kiln_sincos_d(x, 1); }\n"},
    // f32 sin/cos: x - k pi/2, for |x| <= 8192 in f32 with pi/2 in three parts (cephes: the
    // first two have 8 and 11 bits, so their products with k < 2^13 are exact), for larger |x| by
    // Payne-Hanek in 32-bit integers (kiln_trig_reduce_f: every f32, no f64 needed; the f64
    // reduction used before was exact only up to |x| ~ 1e12); then minimax polynomials on
    // [-pi/4, pi/4] in f32 (cephes sinf/cosf, ~2 ulp). A branch to the large-|x| path in every
    // sin/cos, never taken, slowed the suite's sincos on the H200 from 0.041 to 0.049 ms (the
    // branches keep the compiler from interleaving the elements' work); pointwise kernels call
    // the fast variants below instead and take the exact path for a whole vector group at once
    // only when one of its elements needs it (0.0445 ms; glsl.cpp, vector_group).
    {"kiln_sincos_poly_f", "", R"(// sin(r + q pi/2), |r| <= pi/4, q in 0..3
float kiln_sincos_poly_f(float r, int q) {
  const float z = r * r;
  // (selects and a sign bit, no branches: lavapipe miscomputes values merged after branches)
  const float vs = ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * r + r;
  const float vc = ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * z * z - 0.5 * z + 1.0;
  const float v = mix(vc, vs, (q & 1) == 0);
  return uintBitsToFloat(floatBitsToUint(v) ^ (uint(q >> 1) << 31));
}
)"},
    {"kiln_trig_cw_f", "", R"(// x - k pi/2 and k (the nearest integer to x * 2/pi), exact for |x| <= 8192
float kiln_trig_cw_f(float x, out int q) {
  const float k = roundEven(x * 0.636619772367581343);
  precise float r = x - k * 1.5703125;
  r -= k * 4.837512969970703125e-4;
  r -= k * 7.54978995489188216e-8;
  q = int(k);
  return r;
}
)"},
    {"kiln_mul_add_carry", "", R"(// The low word of m * a + c; c becomes the high word.
uint kiln_mul_add_carry(uint m, uint a, inout uint c) {
  uint hi, lo;
  umulExtended(m, a, hi, lo);
  const uint w = lo + c;
  c = hi + uint(w < lo);
  return w;
}
)"},
    {"kiln_pick5", "", R"(// (selects, not an array indexed by w: see kiln_trig_reduce_f)
uint kiln_pick5(uint a, uint b, uint c, uint d, uint e, int w) {
  return mix(mix(mix(mix(a, b, w == 1), c, w == 2), d, w == 3), e, w == 4);
}
)"},
    {"kiln_trig_reduce_f", "kiln_mul_add_carry kiln_pick5", R"(// |x| > 8192 (finite): x * 2/pi = q + f, q the nearest integer mod 4, |f| <= 1/2; returns
// f * pi/2 and q. x = m 2^(e-23); m times 224 bits of 2/pi is a 256-bit product P (8 words,
// least significant first) with its binary point at bit 247 - e, and the 96 bits ending two
// bits above it hold q and 94 bits of f.
float kiln_trig_reduce_f(float x, out int q) {
  // (no arrays and no branches: lavapipe ran every sin/cos 30 times slower with arrays here, and
  // lost values merged after divergent branches)
  const uint bits = floatBitsToUint(abs(x));
  const int e = int(bits >> 23) - 127;
  const uint m = (bits & 0x7fffffu) | 0x800000u;
  uint c = 0u;
  const uint p0 = kiln_mul_add_carry(m, 0xFE5163ABu, c), p1 = kiln_mul_add_carry(m, 0x3C439041u, c),
             p2 = kiln_mul_add_carry(m, 0xDB629599u, c), p3 = kiln_mul_add_carry(m, 0xF534DDC0u, c),
             p4 = kiln_mul_add_carry(m, 0xFC2757D1u, c), p5 = kiln_mul_add_carry(m, 0x4E441529u, c),
             p6 = kiln_mul_add_carry(m, 0xA2F9836Eu, c), p7 = c;
  const int b = 153 - e;  // the window's lowest bit
  const int w = b >> 5, sh = b & 31;
  const uint w0 = kiln_pick5(p0, p1, p2, p3, p4, w), w1 = kiln_pick5(p1, p2, p3, p4, p5, w),
             w2 = kiln_pick5(p2, p3, p4, p5, p6, w), w3 = kiln_pick5(p3, p4, p5, p6, p7, w);
  // (the second shift makes a shift by 32 - 0 give 0)
  const uint v0 = (w0 >> uint(sh)) | ((w1 << uint(31 - sh)) << 1u);
  const uint v1 = (w1 >> uint(sh)) | ((w2 << uint(31 - sh)) << 1u);
  const uint v2 = (w2 >> uint(sh)) | ((w3 << uint(31 - sh)) << 1u);
  const uint qu = (v2 + 0x20000000u) >> 30;
  const uint f2 = v2 - (qu << 30);
  const bool neg = int(f2) < 0;
  // the 96-bit magnitude: complemented and incremented where negative
  const uint flip = 0u - uint(neg);
  const uint m0 = (v0 ^ flip) + uint(neg);
  const uint c1 = uint(neg && m0 == 0u);
  const uint m1 = (v1 ^ flip) + c1;
  const uint m2 = (f2 ^ flip) + uint(c1 == 1u && m1 == 0u);
  float f = float(m2) * 9.31322574615478515625e-10 + float(m1) * 2.16840434497100886801e-19 +
            float(m0) * 5.04870979341447555665e-29;  // 2^-30, 2^-62, 2^-94
  const int qn = int(qu & 3u);
  // (the sign bit, not x < 0.0: lavapipe folds that, for x converted from an int64, into a
  // 64-bit compare with 0, which it miscompiles)
  const bool xneg = (floatBitsToUint(x) >> 31) != 0u;
  q = mix(qn, (4 - qn) & 3, xneg);
  f = mix(f, -f, neg != xneg);
  return f * 1.57079632679489661923;
}
)"},
    {"kiln_sincos_f", "kiln_sincos_poly_f kiln_trig_cw_f kiln_trig_reduce_f", R"(float kiln_sincos_f(float x, int shift) {
  int q;
  float r = kiln_trig_cw_f(x, q);
  if (!(abs(x) <= 8192.0)) {
    r = kiln_trig_reduce_f(x, q);
    r = isinf(x) || isnan(x) ? x - x : r;  // NaN
  }
  return kiln_sincos_poly_f(r, (q + shift) & 3);
}
)"},
    // Set (nonzero) by a fast variant whose argument needs the exact function; the kernel then
    // computes the group's elements again with the exact ones (glsl.cpp, vector_group).
    {"kiln_inexact", "", "uint kiln_inexact = 0u;\n"},
    {"kiln_sincos_fast_f", "kiln_sincos_poly_f kiln_trig_cw_f kiln_inexact", R"(// kiln_sincos_f for |x| <= 8192; any other x sets kiln_inexact
float kiln_sincos_fast_f(float x, int shift) {
  // (|=, not ||: a short-circuit is a branch)
  kiln_inexact |= uint(!(abs(x) <= 8192.0));
  int q;
  const float r = kiln_trig_cw_f(x, q);
  return kiln_sincos_poly_f(r, (q + shift) & 3);
}
)"},
    {"kiln_sin_fast_f", "kiln_sincos_fast_f", "float kiln_sin_fast_f(float x) { return kiln_sincos_fast_f(x, 0); }\n"},
    {"kiln_cos_fast_f", "kiln_sincos_fast_f", "float kiln_cos_fast_f(float x) { return kiln_sincos_fast_f(x, 1); }\n"},
    {"kiln_sin_f", "kiln_sincos_f", "float kiln_sin_f(float x) { return kiln_sincos_f(x, 0); }\n"},
    {"kiln_cos_f", "kiln_sincos_f", "float kiln_cos_f(float x) { return kiln_sincos_f(x, 1); }\n"},
    // f32 tanh (cephes tanhf, ~2 ulp): an odd polynomial below 0.625 (tiny values stay exact),
    // 1 - 2 / (exp(2|x|) + 1) above, +-1 past 44, NaN kept.
    {"kiln_tanh_f", "", R"(float kiln_tanh_f(float x) {
  // (selects and a sign bit, no branches: lavapipe lost the sign of values merged after them)
  const float a = abs(x);
  const float z = x * x;
  const float small = x + x * z * ((((-5.70498872745e-3 * z + 2.06390887954e-2) * z - 5.37397155531e-2) * z + 1.33314422036e-1) * z - 3.33332819422e-1);
  const float big = 1.0 - 2.0 / (exp(2.0 * min(a, 44.0)) + 1.0);
  const float r = mix(uintBitsToFloat(floatBitsToUint(big) | (floatBitsToUint(x) & 0x80000000u)), small, a < 0.625);
  return mix(r, x, isnan(x));
}
)"},
    {"kiln_tanh_d", "kiln_expm1_d", R"(double kiln_tanh_d(double x) {
  if (isnan(x)) return x;
  if (abs(x) > 22.0LF) return x > 0.0LF ? 1.0LF : -1.0LF;
  const double e = kiln_expm1_d(2.0LF * x);
  return e / (e + 2.0LF);
}
)"},
    {"kiln_pow_d", "kiln_exp_d kiln_log_d", R"(double kiln_pow_d(double x, double y) {
  const double inf = packDouble2x32(uvec2(0u, 0x7ff00000u));
  if (y == 0.0LF || x == 1.0LF) return 1.0LF;
  if (isnan(x) || isnan(y)) return x + y;
  const bool yint = floor(y) == y;
  const bool yodd = yint && abs(y) < 9007199254740992.0LF && mod(y, 2.0LF) != 0.0LF;
  if (isinf(y)) {
    const double ax = abs(x);
    if (ax == 1.0LF) return 1.0LF;
    return ((ax > 1.0LF) == (y > 0.0LF)) ? inf : 0.0LF;
  }
  const bool neg = (unpackDouble2x32(x).y >> 31) != 0u;
  if (x == 0.0LF) {
    if (y > 0.0LF) return yodd ? x : 0.0LF;
    return (yodd && neg) ? -inf : inf;
  }
  if (isinf(x)) {
    if (!neg) return y > 0.0LF ? inf : 0.0LF;
    if (y > 0.0LF) return yodd ? -inf : inf;
    return yodd ? -0.0LF : 0.0LF;
  }
  if (neg && !yint) return packDouble2x32(uvec2(0u, 0x7ff80000u));
  const double r = kiln_exp_d(y * kiln_log_d(abs(x)));
  return (neg && yodd) ? -r : r;
}
)"},
    // erf by W. J. Cody's rational approximations (Math. Comp. 23, 1969): erf itself up to
    // 0.46875, erfc = exp(-x^2) * P(x) / Q(x) up to 4 and exp(-x^2) / x * (1 / sqrt(pi) - R(1 / x^2))
    // above; a fixed number of steps where a series took up to a few hundred (0.1 ms for a GELU
    // over 3M elements on an H100). exp(-x^2) is exp(-a^2) * exp(-(x - a)(x + a)), a = x rounded down
    // to a 16th, whose square is exact, so that x^2's rounding is not magnified.
    {"kiln_erf_d", "kiln_exp_d", R"(double kiln_erf_d(double x) {
  if (isnan(x)) return x;
  const double y = abs(x);
  if (y >= 6.0LF) return x > 0.0LF ? 1.0LF : -1.0LF;
  if (y <= 0.46875LF) {
    const double z = y * y;
    double num = 1.85777706184603153e-1LF * z, den = z;
    num = (num + 3.16112374387056560LF) * z; den = (den + 2.36012909523441209e1LF) * z;
    num = (num + 1.13864154151050156e2LF) * z; den = (den + 2.44024637934444173e2LF) * z;
    num = (num + 3.77485237685302021e2LF) * z; den = (den + 1.28261652607737228e3LF) * z;
    return x * (num + 3.20937758913846947e3LF) / (den + 2.84423683343917062e3LF);
  }
  double erfc;
  if (y <= 4.0LF) {
    double num = 2.15311535474403846e-8LF * y, den = y;
    num = (num + 5.64188496988670089e-1LF) * y; den = (den + 1.57449261107098347e1LF) * y;
    num = (num + 8.88314979438837594LF) * y; den = (den + 1.17693950891312499e2LF) * y;
    num = (num + 6.61191906371416295e1LF) * y; den = (den + 5.37181101862009858e2LF) * y;
    num = (num + 2.98635138197400131e2LF) * y; den = (den + 1.62138957456669019e3LF) * y;
    num = (num + 8.81952221241769090e2LF) * y; den = (den + 3.29079923573345963e3LF) * y;
    num = (num + 1.71204761263407058e3LF) * y; den = (den + 4.36261909014324716e3LF) * y;
    num = (num + 2.05107837782607147e3LF) * y; den = (den + 3.43936767414372164e3LF) * y;
    erfc = (num + 1.23033935479799725e3LF) / (den + 1.23033935480374942e3LF);
  } else {
    const double z = 1.0LF / (y * y);
    double num = 1.63153871373020978e-2LF * z, den = z;
    num = (num + 3.05326634961232344e-1LF) * z; den = (den + 2.56852019228982242LF) * z;
    num = (num + 3.60344899949804439e-1LF) * z; den = (den + 1.87295284992346047LF) * z;
    num = (num + 1.25781726111229246e-1LF) * z; den = (den + 5.27905102951428412e-1LF) * z;
    num = (num + 1.60837851487422766e-2LF) * z; den = (den + 6.05183413124413191e-2LF) * z;
    erfc = (5.6418958354775628695e-1LF - z * (num + 6.58749161529837803e-4LF) / (den + 2.33520497626869185e-3LF)) / y;
  }
  const double a = floor(y * 16.0LF) / 16.0LF;
  erfc *= kiln_exp_d(-a * a) * kiln_exp_d(-(y - a) * (y + a));
  const double r = (0.5LF - erfc) + 0.5LF;
  return x < 0.0LF ? -r : r;
}
)"},
    // f32 forms for devices without shaderFloat64 (pow with C's special cases; erf by the same
    // approximations in float, whose erfc is below half an ulp of 1 from 4 on).
    {"kiln_pow_f", "", R"(float kiln_pow_f(float x, float y) {
  const float inf = uintBitsToFloat(0x7f800000u);
  if (y == 0.0 || x == 1.0) return 1.0;
  if (isnan(x) || isnan(y)) return x + y;
  const bool yint = floor(y) == y;
  const bool yodd = yint && abs(y) < 16777216.0 && mod(y, 2.0) != 0.0;
  if (isinf(y)) {
    const float ax = abs(x);
    if (ax == 1.0) return 1.0;
    return ((ax > 1.0) == (y > 0.0)) ? inf : 0.0;
  }
  const bool neg = (floatBitsToUint(x) >> 31) != 0u;
  if (x == 0.0) {
    if (y > 0.0) return yodd ? x : 0.0;
    return (yodd && neg) ? -inf : inf;
  }
  if (isinf(x)) {
    if (!neg) return y > 0.0 ? inf : 0.0;
    if (y > 0.0) return yodd ? -inf : inf;
    return yodd ? -0.0 : 0.0;
  }
  if (neg && !yint) return uintBitsToFloat(0x7fc00000u);
  const float r = pow(abs(x), y);
  return (neg && yodd) ? -r : r;
}
)"},
    {"kiln_erf_f", "", R"(float kiln_erf_f(float x) {
  if (isnan(x)) return x;
  const float y = abs(x);
  if (y >= 4.0) return x > 0.0 ? 1.0 : -1.0;
  if (y <= 0.46875) {
    const float z = y * y;
    float num = 1.85777706184603153e-1 * z, den = z;
    num = (num + 3.16112374387056560) * z; den = (den + 2.36012909523441209e1) * z;
    num = (num + 1.13864154151050156e2) * z; den = (den + 2.44024637934444173e2) * z;
    num = (num + 3.77485237685302021e2) * z; den = (den + 1.28261652607737228e3) * z;
    return x * (num + 3.20937758913846947e3) / (den + 2.84423683343917062e3);
  }
  float num = 2.15311535474403846e-8 * y, den = y;
  num = (num + 5.64188496988670089e-1) * y; den = (den + 1.57449261107098347e1) * y;
  num = (num + 8.88314979438837594) * y; den = (den + 1.17693950891312499e2) * y;
  num = (num + 6.61191906371416295e1) * y; den = (den + 5.37181101862009858e2) * y;
  num = (num + 2.98635138197400131e2) * y; den = (den + 1.62138957456669019e3) * y;
  num = (num + 8.81952221241769090e2) * y; den = (den + 3.29079923573345963e3) * y;
  num = (num + 1.71204761263407058e3) * y; den = (den + 4.36261909014324716e3) * y;
  num = (num + 2.05107837782607147e3) * y; den = (den + 3.43936767414372164e3) * y;
  const float a = floor(y * 16.0) / 16.0;
  const float erfc = (num + 1.23033935479799725e3) / (den + 1.23033935480374942e3) * exp(-a * a) * exp(-(y - a) * (y + a));
  const float r = (0.5 - erfc) + 0.5;
  return x < 0.0 ? -r : r;
}
)"},
};

// Helpers with a fast variant (same arguments and result where it is exact; it sets
// kiln_inexact where not): {exact, fast}.
struct FastVariant {
  const char* exact;
  const char* fast;
};
inline constexpr FastVariant kFastVariants[] = {{"kiln_sin_f", "kiln_sin_fast_f"}, {"kiln_cos_f", "kiln_cos_fast_f"}};

}  // namespace kiln::vulkan::detail
