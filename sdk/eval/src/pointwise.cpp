// Pointwise kernels: unary, binary and where. Every input is read through broadcast strides
// against the output's sizes; each element is loaded into the compute domain, computed, and
// stored (rounded or wrapped) into the output dtype.
//
// Which domain an op computes in:
// - float-only unary ops (exp ... erf) and div: floating, in the output dtype (f64 if the
//   output is not floating);
// - other arithmetic (neg, abs, relu, floor, ceil, round, sign, add, sub, mul, pow, maximum,
//   minimum, where): the output dtype: floating domain for floating outputs, int64 otherwise;
// - comparisons: the inputs' result_type, output bool;
// - logical ops, logical_not: truthiness (value != 0); isnan: NaN test of floating inputs;
// - philox: exact 64-bit integers (random.h).
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "kernels.h"
#include "kiln/eval/random.h"
#include "kiln/graph/error.h"
#include "values.h"

namespace kiln::eval::detail {

namespace {

// Runs fn(input element pointers, output element pointer) over every output element, reading
// the N inputs with broadcasting.
template <size_t N, class Fn>
void pointwise(const KernelArgs& a, Fn&& fn) {
  KILN_CHECK(a.inputs.size() == N, "reference: ", op_name(a.op), " takes ", N, " inputs, got ",
             a.inputs.size());
  std::array<std::vector<int64_t>, N> in_strides;
  std::array<Elements, N> in;
  std::array<std::span<const int64_t>, N + 1> strides;
  for (size_t k = 0; k < N; ++k) {
    in_strides[k] = broadcast_strides(a.inputs[k], a.out.sizes,
                                      "input " + std::to_string(k) + " of " + std::string(op_name(a.op)));
    in[k] = Elements(a.inputs[k]);
    strides[k] = in_strides[k];
  }
  strides[N] = a.out.strides;
  const Elements out(a.out);
  for_each_index<N + 1>(a.out.sizes, strides, [&](const std::array<int64_t, N + 1>& o) {
    std::array<const std::byte*, N> p;
    for (size_t k = 0; k < N; ++k) p[k] = in[k].at(o[k]);
    fn(p, out.at(o[N]));
  });
}

// ---- Unary -------------------------------------------------------------------------------

constexpr double kSqrt2 = 1.41421356237309504880;
constexpr double kSqrt2OverPi = 0.79788456080286535588;

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double gelu_exact(double x) { return 0.5 * x * (1.0 + std::erf(x / kSqrt2)); }
double gelu_tanh(double x) { return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x))); }
double sign_f(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : x; }  // keeps 0 and NaN
int64_t sign_i(int64_t x) { return x > 0 ? 1 : x < 0 ? -1 : 0; }

struct UnaryFns {
  double (*f)(double);
  int64_t (*i)(int64_t);  // null: the op computes in floating point whatever its input
};

UnaryFns unary_fns(const KernelArgs& a) {
  switch (a.op) {
    case OpId::neg: return {[](double x) { return -x; }, [](int64_t x) { return wrap_sub(0, x); }};
    case OpId::abs:
      return {[](double x) { return std::fabs(x); }, [](int64_t x) { return x < 0 ? wrap_sub(0, x) : x; }};
    case OpId::relu:
      return {[](double x) { return std::isnan(x) ? x : (x > 0 ? x : 0.0); },
              [](int64_t x) { return x > 0 ? x : int64_t{0}; }};
    case OpId::floor: return {[](double x) { return std::floor(x); }, [](int64_t x) { return x; }};
    case OpId::ceil: return {[](double x) { return std::ceil(x); }, [](int64_t x) { return x; }};
    // nearbyint in the default rounding mode (to nearest) rounds halves to even.
    case OpId::round: return {[](double x) { return std::nearbyint(x); }, [](int64_t x) { return x; }};
    case OpId::sign: return {sign_f, sign_i};
    case OpId::exp: return {[](double x) { return std::exp(x); }, nullptr};
    case OpId::log: return {[](double x) { return std::log(x); }, nullptr};
    case OpId::sqrt: return {[](double x) { return std::sqrt(x); }, nullptr};
    case OpId::rsqrt: return {[](double x) { return 1.0 / std::sqrt(x); }, nullptr};
    case OpId::reciprocal: return {[](double x) { return 1.0 / x; }, nullptr};
    case OpId::sin: return {[](double x) { return std::sin(x); }, nullptr};
    case OpId::cos: return {[](double x) { return std::cos(x); }, nullptr};
    case OpId::tanh: return {[](double x) { return std::tanh(x); }, nullptr};
    case OpId::erf: return {[](double x) { return std::erf(x); }, nullptr};
    case OpId::sigmoid: return {sigmoid, nullptr};
    case OpId::silu: return {[](double x) { return x * sigmoid(x); }, nullptr};
    case OpId::gelu: {
      const std::string& mode = a.attrs.s(attr_slot(a.op, "approximate"));
      if (mode == "none") return {gelu_exact, nullptr};
      if (mode == "tanh") return {gelu_tanh, nullptr};
      fail("gelu: approximate must be \"none\" or \"tanh\", got \"", mode, "\"");
    }
    default: break;
  }
  internal_fail("reference: ", op_name(a.op), " is not a unary arithmetic op");
}

// ---- Binary ------------------------------------------------------------------------------

int64_t int_pow(int64_t base, int64_t exponent) {
  KILN_CHECK(exponent >= 0, "pow: Integers to negative integer powers are not allowed (", base, " ** ",
             exponent, ")");
  int64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1) result = wrap_mul(result, base);
    base = wrap_mul(base, base);
    exponent >>= 1;
  }
  return result;
}

double max_f(double x, double y) { return std::isnan(x) || std::isnan(y) ? NAN : (x > y ? x : y); }
double min_f(double x, double y) { return std::isnan(x) || std::isnan(y) ? NAN : (x < y ? x : y); }

struct BinaryFns {
  double (*f)(double, double);
  int64_t (*i)(int64_t, int64_t);  // null: the op computes in floating point (div)
};

BinaryFns arithmetic_fns(OpId op) {
  switch (op) {
    case OpId::add: return {[](double x, double y) { return x + y; }, wrap_add};
    case OpId::sub: return {[](double x, double y) { return x - y; }, wrap_sub};
    case OpId::mul: return {[](double x, double y) { return x * y; }, wrap_mul};
    case OpId::div: return {[](double x, double y) { return x / y; }, nullptr};
    case OpId::pow: return {[](double x, double y) { return std::pow(x, y); }, int_pow};
    case OpId::maximum: return {max_f, [](int64_t x, int64_t y) { return x > y ? x : y; }};
    case OpId::minimum: return {min_f, [](int64_t x, int64_t y) { return x < y ? x : y; }};
    default: break;
  }
  internal_fail("reference: ", op_name(op), " is not a binary arithmetic op");
}

template <class T>
bool compare(OpId op, T x, T y) {
  switch (op) {
    case OpId::eq: return x == y;
    case OpId::ne: return x != y;
    case OpId::lt: return x < y;
    case OpId::le: return x <= y;
    case OpId::gt: return x > y;
    default: return x >= y;  // ge
  }
}

}  // namespace

void unary_kernel(const KernelArgs& a) {
  const DType src = a.inputs.empty() ? DType::f32 : a.inputs[0].dtype, dst = a.out.dtype;
  using P = std::array<const std::byte*, 1>;
  switch (a.op) {
    case OpId::cast:
      // copy_elements: a dense tensor in one linear loop (weights cast at import).
      if (a.inputs[0].sizes == a.out.sizes) copy_elements(a.inputs[0], a.out);
      else pointwise<1>(a, [&](const P& p, std::byte* o) { cast_element(p[0], src, o, dst); });
      return;
    case OpId::logical_not:
      pointwise<1>(a, [&](const P& p, std::byte* o) { store_int(o, dst, load_int(p[0], src, DType::bool_) ? 0 : 1); });
      return;
    case OpId::isnan:
      pointwise<1>(a, [&](const P& p, std::byte* o) {
        store_int(o, dst, is_floating(src) && std::isnan(load_float(p[0], src, DType::f64)) ? 1 : 0);
      });
      return;
    default: break;
  }
  const UnaryFns fns = unary_fns(a);
  if (fns.i == nullptr || is_floating(dst)) {
    const DType compute = is_floating(dst) ? dst : DType::f64;
    pointwise<1>(a, [&](const P& p, std::byte* o) { store_float(o, dst, fns.f(load_float(p[0], src, compute))); });
  } else {
    pointwise<1>(a, [&](const P& p, std::byte* o) { store_int(o, dst, fns.i(load_int(p[0], src, dst))); });
  }
}

void binary_kernel(const KernelArgs& a) {
  KILN_CHECK(a.inputs.size() == 2, "reference: ", op_name(a.op), " takes 2 inputs, got ", a.inputs.size());
  const DType s0 = a.inputs[0].dtype, s1 = a.inputs[1].dtype, dst = a.out.dtype;
  using P = std::array<const std::byte*, 2>;
  switch (a.op) {
    case OpId::eq: case OpId::ne: case OpId::lt: case OpId::le: case OpId::gt: case OpId::ge: {
      const TensorMeta m0 = a.inputs[0].meta(), m1 = a.inputs[1].meta();
      const std::array<const TensorMeta*, 2> metas{&m0, &m1};
      const DType compute = result_type(metas);
      const OpId op = a.op;
      if (is_floating(compute)) {
        pointwise<2>(a, [&](const P& p, std::byte* o) {
          store_int(o, dst, compare(op, load_float(p[0], s0, compute), load_float(p[1], s1, compute)) ? 1 : 0);
        });
      } else {
        pointwise<2>(a, [&](const P& p, std::byte* o) {
          store_int(o, dst, compare(op, load_int(p[0], s0, compute), load_int(p[1], s1, compute)) ? 1 : 0);
        });
      }
      return;
    }
    case OpId::logical_and:
    case OpId::logical_or: {
      const bool is_and = a.op == OpId::logical_and;
      pointwise<2>(a, [&](const P& p, std::byte* o) {
        const bool x = load_int(p[0], s0, DType::bool_) != 0, y = load_int(p[1], s1, DType::bool_) != 0;
        store_int(o, dst, (is_and ? (x && y) : (x || y)) ? 1 : 0);
      });
      return;
    }
    case OpId::philox: {  // exact 64-bit integers, as every target (random.h)
      const uint64_t seed = static_cast<uint64_t>(a.attrs.i(1));
      const int word = static_cast<int>(a.attrs.i(0));
      pointwise<2>(a, [&](const P& p, std::byte* o) {
        const uint64_t key = seed + static_cast<uint64_t>(load_int(p[0], s0, DType::i64));
        store_int(o, dst, philox_bits(key, static_cast<uint64_t>(load_int(p[1], s1, DType::i64)), word));
      });
      return;
    }
    default: break;
  }
  const BinaryFns fns = arithmetic_fns(a.op);
  if (fns.i == nullptr || is_floating(dst)) {
    const DType compute = is_floating(dst) ? dst : DType::f64;
    pointwise<2>(a, [&](const P& p, std::byte* o) {
      store_float(o, dst, fns.f(load_float(p[0], s0, compute), load_float(p[1], s1, compute)));
    });
  } else {
    pointwise<2>(a, [&](const P& p, std::byte* o) {
      store_int(o, dst, fns.i(load_int(p[0], s0, dst), load_int(p[1], s1, dst)));
    });
  }
}

void where_kernel(const KernelArgs& a) {
  KILN_CHECK(a.inputs.size() == 3, "reference: where takes 3 inputs, got ", a.inputs.size());
  const DType sc = a.inputs[0].dtype, s1 = a.inputs[1].dtype, s2 = a.inputs[2].dtype, dst = a.out.dtype;
  using P = std::array<const std::byte*, 3>;
  if (is_floating(dst)) {
    pointwise<3>(a, [&](const P& p, std::byte* o) {
      const bool c = load_int(p[0], sc, DType::bool_) != 0;
      store_float(o, dst, c ? load_float(p[1], s1, dst) : load_float(p[2], s2, dst));
    });
  } else {
    pointwise<3>(a, [&](const P& p, std::byte* o) {
      const bool c = load_int(p[0], sc, DType::bool_) != 0;
      store_int(o, dst, c ? load_int(p[1], s1, dst) : load_int(p[2], s2, dst));
    });
  }
}

}  // namespace kiln::eval::detail
