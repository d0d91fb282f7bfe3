// Kernel IR -> CUDA C (see codegen.h for the strategies). Values come from the shared C-style
// printer; this file writes parameters, the thread structure and the reductions' combines.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "internal.h"
#include "kiln/plan/replay.h"
#include "kiln/lower/skeleton.h"
#include "kiln/config/config.h"
#include "kiln/cstyle/printer.h"
#include "kiln/cstyle/reduction.h"
#include "kiln/cstyle/structure.h"
#include "kiln/cuda/codegen.h"
#include "kiln/graph/error.h"

namespace kiln::cuda {

using cstyle::Component;
using cstyle::CT;
using cstyle::KernelPrinter;
using cstyle::Scope;
using cstyle::Value;
using schedule::Instr;
using schedule::InstrKind;
using schedule::Kernel;
using schedule::KernelKind;
using schedule::ReduceKind;

CodegenOptions CodegenOptions::from_config() {
  CodegenOptions o;
  o.emulate_precision_casts = config::get<bool>("emulate_precision_casts");
  o.precise_math = config::get<bool>("cuda.precise_math");
  o.compiler = config::get<std::string>("cuda.compiler");
  o.column_loads_ahead = config::get<int64_t>("cuda.column_loads_ahead");
  return o;
}

namespace {

const char* storage_type(DType t) {
  switch (t) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::f16: case DType::bf16: return "unsigned short";
    case DType::i32: return "int";
    case DType::i64: return "long long";
    case DType::bool_: return "unsigned char";
  }
  return "?";
}

struct CudaDialect final : cstyle::Dialect {
  // false: f32 exp and division as torch.compile's Triton kernels compute them (kiln_exp,
  // kiln_div in the prelude: ex2.approx of x * log2(e), div.full.f32; a few ulp, and much less
  // code for ptxas than libdevice's expf and IEEE division, which cuda.precise_math keeps).
  bool precise = false;
  std::string type(CT c) const override {
    switch (c) {
      case CT::f32: return "float";
      case CT::f64: return "double";
      case CT::i64: return "long long";
      case CT::b: return "bool";
    }
    return "?";
  }
  std::string float_suffix(CT c) const override { return c == CT::f32 ? "f" : ""; }
  std::string from_bits(uint64_t bits, CT c) const override {
    char buf[64];
    if (c == CT::f32) std::snprintf(buf, sizeof buf, "__int_as_float(0x%08x)", static_cast<unsigned>(bits));
    else std::snprintf(buf, sizeof buf, "__longlong_as_double(0x%016llxLL)", static_cast<unsigned long long>(bits));
    return buf;
  }
  std::string int_literal(int64_t v) const override {
    if (v == INT64_MIN) return "(-9223372036854775807LL - 1LL)";
    return v < 0 ? "(" + std::to_string(v) + "LL)" : std::to_string(v) + "LL";
  }
  std::string cast(const std::string& x, CT to) const override { return "((" + type(to) + ")" + x + ")"; }
  std::string math(std::string_view fn, CT c, const std::vector<std::string>& args) const override {
    std::string name(fn);
    if (c == CT::f32) name += "f";
    if (c == CT::f32 && !precise && fn == "exp") name = "kiln_exp";
    std::string s = name + "(";
    for (size_t i = 0; i < args.size(); ++i) s += (i ? ", " : "") + args[i];
    return s + ")";
  }
  std::string load(DType t, const std::string& buffer, const std::string& index) const override {
    const std::string e = buffer + "[" + index + "]";
    switch (t) {
      case DType::f16: return "kiln_h2f(" + e + ")";
      case DType::bf16: return "kiln_bf2f(" + e + ")";
      case DType::i32: return "((long long)" + e + ")";
      case DType::bool_: return "(" + e + " != 0)";
      default: return e;
    }
  }
  std::string accumulate(DType t, const std::string& buffer, const std::string& index, const std::string& x) const override {
    const std::string p = "&" + buffer + "[" + index + "]";
    switch (t) {
      case DType::f32: return "atomicAdd(" + p + ", " + x + ");";
      case DType::f64: return "atomicAdd(" + p + ", " + x + ");";
      case DType::i32: return "atomicAdd(" + p + ", (int)" + x + ");";
      // Two's complement: adding the unsigned bits adds the signed values.
      case DType::i64: return "atomicAdd((unsigned long long*)" + p + ", (unsigned long long)" + x + ");";
      default: fail("cuda codegen: no atomic add of ", dtype_name(t));
    }
  }
  // atomicCAS on the element's bits: unsigned int (f32, i32) or unsigned long long (f64, i64).
  static const char* cas_bits(DType t) { return dtype_size(t) == 8 ? "unsigned long long" : "unsigned int"; }
  std::string cas_begin(DType t, const std::string& buffer, const std::string& index) const override {
    const std::string u = cas_bits(t);
    return "{ " + u + "* kp = (" + u + "*)&" + buffer + "[" + index + "]; " + u + " kold = *kp, kseen; do { kseen = kold;";
  }
  std::string cas_seen(DType t) const override {
    switch (t) {
      case DType::f32: return "__uint_as_float(kseen)";
      case DType::f64: return "__longlong_as_double((long long)kseen)";
      case DType::i32: return "((long long)(int)kseen)";
      case DType::i64: return "((long long)kseen)";
      default: fail("cuda codegen: no atomic compare-and-swap of ", dtype_name(t));
    }
  }
  std::string cas_end(DType t, const std::string&, const std::string& next) const override {
    std::string bits;
    switch (t) {
      case DType::f32: bits = "__float_as_uint(" + next + ")"; break;
      case DType::f64: bits = "(unsigned long long)__double_as_longlong(" + next + ")"; break;
      case DType::i32: bits = "(unsigned int)(int)" + next; break;
      default: bits = "(unsigned long long)" + next; break;
    }
    return "kold = atomicCAS(kp, kseen, " + bits + "); } while (kold != kseen); }";
  }
  std::string store(DType t, const std::string& buffer, const std::string& index, const std::string& x) const override {
    std::string v = x;
    switch (t) {
      case DType::f16: v = "kiln_f2h(" + x + ")"; break;
      case DType::bf16: v = "kiln_f2bf(" + x + ")"; break;
      case DType::i32: v = "(int)" + x; break;
      case DType::bool_: v = "(unsigned char)" + x; break;
      default: break;
    }
    return buffer + "[" + index + "] = " + v + ";";
  }
  std::string round_to(DType t, const std::string& x) const override {
    return t == DType::f16 ? "kiln_h2f(kiln_f2h(" + x + "))" : "kiln_bf2f(kiln_f2bf(" + x + "))";
  }
  std::string wrap_i32(const std::string& x) const override { return "((long long)(int)" + x + ")"; }
  std::string ipow(const std::string& x, const std::string& y) const override { return "kiln_ipow(" + x + ", " + y + ")"; }
  std::string isnan(const std::string& x, CT) const override { return "(" + x + " != " + x + ")"; }
  std::string divide(const std::string& x, const std::string& y, CT c) const override {
    if (c == CT::f32 && !precise) return "kiln_div(" + x + ", " + y + ")";
    return "(" + x + " / " + y + ")";
  }
  std::string reciprocal_sqrt(const std::string& x, CT c) const override {
    if (c == CT::f32 && !precise) return "rsqrtf(" + x + ")";  // rsqrt.approx.f32, as Triton's libdevice.rsqrt
    return Dialect::reciprocal_sqrt(x, c);
  }
  std::string extremum(bool max, const std::string& x, const std::string& y, CT c) const override {
    if (c == CT::f32) return std::string(max ? "kiln_fmaxn(" : "kiln_fminn(") + x + ", " + y + ")";
    return Dialect::extremum(max, x, y, c);
  }
  bool fast_extremum(CT c) const override { return c == CT::f32; }  // max.NaN.f32 from sm_80
  // f64: fmax and fmin return the other operand where one is NaN.
  std::string extremum_skipping_nan(bool max, const std::string& acc, const std::string& x, CT c) const override {
    return acc + " = " + math(max ? "fmax" : "fmin", c, {acc, x}) + ";";
  }
  std::string assign_select(const std::string& lhs, const std::string& c, const std::string& x,
                            const std::string& y) const override {
    return lhs + " = " + c + " ? " + x + " : " + y + ";";
  }
};

const CudaDialect kDialect;                                    // fast f32 exp and division
const CudaDialect kPreciseDialect = [] { CudaDialect d; d.precise = true; return d; }();

constexpr const char* kPrelude = R"(// Kiln CUDA kernels (NVRTC)
__device__ __forceinline__ float kiln_h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ unsigned short kiln_f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float kiln_bf2f(unsigned short b) { return __uint_as_float(((unsigned)b) << 16); }
__device__ __forceinline__ unsigned short kiln_f2bf(float f) {
#if __CUDA_ARCH__ >= 800
  unsigned short b; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f)); return b;
#else
  // No bf16 conversion before sm_80: round to nearest even by hand, NaN kept quiet.
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
}
__device__ __forceinline__ long long kiln_ipow(long long b, long long e) {
  if (e < 0) return 0;
  long long r = 1;
  while (e) { if (e & 1) r *= b; b *= b; e >>= 1; }
  return r;
}
// The op philox (kiln/graph/philox.h): Philox4x32-10, the top 24 bits of word `word`.
__device__ __forceinline__ long long kiln_philox(long long key, long long ctr, int word) {
  unsigned key0 = (unsigned)key, key1 = (unsigned)((unsigned long long)key >> 32);
  unsigned c0 = (unsigned)ctr, c1 = (unsigned)((unsigned long long)ctr >> 32), c2 = 0u, c3 = 0u;
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    if (r > 0) { key0 += 0x9E3779B9u; key1 += 0xBB67AE85u; }
    const unsigned hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const unsigned hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ key0; c1 = lo1; c2 = hi0 ^ c3 ^ key1; c3 = lo0;
  }
  const unsigned w = word == 0 ? c0 : word == 1 ? c1 : word == 2 ? c2 : c3;
  return (long long)(w >> 8);
}
// f32 exp and division as torch.compile's Triton kernels compute them (CodegenOptions::precise_math
// off; 1 / sqrt is rsqrtf then): 2^(x log2 e) by the MUFU, full-range division within 2 ulp.
__device__ __forceinline__ float kiln_exp(float x) { float y; asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x * 1.44269504f)); return y; }
__device__ __forceinline__ float kiln_div(float a, float b) { float y; asm("div.full.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b)); return y; }
// Maximum and minimum that return NaN when either operand is NaN (one instruction from sm_80;
// the negations of the minimum are operand modifiers).
__device__ __forceinline__ float kiln_fmaxn(float a, float b) {
#if __CUDA_ARCH__ >= 800
  float y; asm("max.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b)); return y;
#else
  return (a != a || b != b) ? __int_as_float(0x7fc00000) : fmaxf(a, b);
#endif
}
__device__ __forceinline__ float kiln_fminn(float a, float b) { return -kiln_fmaxn(-a, -b); }
)";

// Column strategy: outer points per block (one warp's width, so loads coalesce) and thread
// groups splitting the inner dims.
constexpr int64_t kColumnLanes = 32;
// Groups per block: 8, or 32 (1024 threads) when the reduced extent is long enough to keep them
// busy, so that few outer points (sum(x, 0) of [8192, 8192]: 256 blocks) still fill the GPU with
// loads in flight.
int64_t column_groups(int64_t inner) { return inner >= 1024 ? 32 : 8; }
using detail::kMaxCachedItems;
using detail::row_block;

}  // namespace

namespace detail {

// Online softmax (internal.h).
std::optional<OnlinePair> online_pair(const Kernel& k_, const CodegenOptions& o_) {
  if (!o_.online_softmax || k_.num_passes() < 2) return std::nullopt;
  const std::vector<int32_t> p0 = cstyle::reductions_of_pass(k_, 0), p1 = cstyle::reductions_of_pass(k_, 1);
  if (p0.size() != 1 || p1.size() != 1) return std::nullopt;
  auto at = [&](int32_t i) -> const Instr& { return k_.instrs[static_cast<size_t>(i)]; };
  const Instr& m = at(p0[0]);
  const Instr& s = at(p1[0]);
  if (m.reduce != ReduceKind::max || s.reduce != ReduceKind::sum) return std::nullopt;
  const Instr& e = at(s.args[0]);
  if (e.kind != InstrKind::pointwise || e.op != OpId::exp) return std::nullopt;
  const Instr& d = at(e.args[0]);
  if (d.kind != InstrKind::pointwise || d.op != OpId::sub || d.args[0] != m.args[0] || d.args[1] != p0[0])
    return std::nullopt;
  const DType t = m.dtype;
  if (t != DType::f32 && t != DType::f64) return std::nullopt;
  for (const Instr* x : {&s, &e, &d, &at(m.args[0])})
    if (x->dtype != t) return std::nullopt;
  for (const schedule::Store& st : k_.stores)
    if (k_.store_is_inner(st) && at(st.value).pass <= 1) return std::nullopt;
  return OnlinePair{p0[0], p1[0], m.args[0]};
}

int64_t row_cache_steps(const Kernel& k, const CodegenOptions& o, int64_t block, int64_t width) {
  SymInt inner = 1;
  for (size_t d = static_cast<size_t>(k.num_outer); d < k.domain.size(); ++d) inner = inner * k.domain[d];
  if (!o.cache_rows || k.num_passes() < 2 || !inner.is_static() || block <= 0) return 0;
  const int64_t steps = (inner.hint() + block * width - 1) / (block * width);
  return steps >= 1 && steps * width <= kMaxCachedItems ? steps : 0;
}

// Threads per block of a row reduction: about 8 inner elements per thread, 32 to 512.
int64_t row_block(int64_t inner) {
  int64_t b = 32;
  while (b < 512 && b * 8 < inner) b *= 2;
  return b;
}

RowGeometry row_geometry(int64_t inner, int64_t rows) {
  constexpr int64_t kPerThread = 16, kBlock = 256, kEnoughBlocks = 264;  // two per SM of an H100
  if (inner > kPerThread * 32) return {row_block(inner), 1};
  int64_t t = 1;
  while (t * kPerThread < inner) t *= 2;
  int64_t r = kBlock / t;
  while (r > 1 && (rows + r - 1) / r < kEnoughBlocks) r /= 2;
  return {t, r};
}

}  // namespace detail

namespace {

// 128-bit (f32, i32) or 64-bit (f16, bf16) accesses: kVec consecutive elements of the last
// domain dim per thread, as one vector load or store.
constexpr int kVec = 4;
static_assert(kBufferAlignment % (4 * kVec) == 0, "a vector of 4-byte elements must fit the buffers' alignment");
const char* vec_type(DType t) {
  switch (t) {
    case DType::f32: return "float4";
    case DType::i32: return "int4";
    case DType::f16: case DType::bf16: return "ushort4";
    default: return nullptr;
  }
}
constexpr const char* kLane[kVec] = {"x", "y", "z", "w"};
// A stored element (as its storage type) read as its compute type, like Dialect::load.
std::string from_storage(DType t, const std::string& e) {
  switch (t) {
    case DType::f16: return "kiln_h2f(" + e + ")";
    case DType::bf16: return "kiln_bf2f(" + e + ")";
    case DType::i32: return "((long long)" + e + ")";
    default: return e;
  }
}
// A compute value as the storage type, like Dialect::store.
std::string to_storage(DType t, const std::string& x) {
  switch (t) {
    case DType::f16: return "kiln_f2h(" + x + ")";
    case DType::bf16: return "kiln_f2bf(" + x + ")";
    case DType::i32: return "(int)" + x;
    default: return x;
  }
}

}  // namespace

namespace detail {

// Buffers in id order (pointers; const where only read; __restrict__ unless two of them share
// memory, as in-place intermediates do), then every plan symbol.
std::string kernel_params(const Kernel& k, const schedule::Schedule& s) {
  std::set<int32_t> bufs;
  for (int32_t b : k.reads()) bufs.insert(b);
  const std::vector<int32_t> writes = k.writes();
  for (int32_t b : writes) bufs.insert(b);
  std::map<std::string, int> memories;
  auto memory_of = [&](int32_t b) {
    const schedule::Buffer& buf = s.buffers[static_cast<size_t>(b)];
    return buf.kind == schedule::BufferKind::intermediate ? "slot" + std::to_string(buf.slot) : "b" + std::to_string(b);
  };
  for (int32_t b : bufs) memories[memory_of(b)] += 1;
  std::string out;
  for (int32_t b : bufs) {
    const bool written = std::find(writes.begin(), writes.end(), b) != writes.end();
    const bool shared = memories[memory_of(b)] > 1;
    out += out.empty() ? "" : ", ";
    out += std::string(written ? "" : "const ") + storage_type(s.buffers[static_cast<size_t>(b)].dtype) +
           (shared ? "* " : "* __restrict__ ") + kDialect.buffer_name(b);
  }
  for (const SymbolInfo& sym : s.graph.shapes().symbols())
    out += (out.empty() ? "" : ", ") + std::string("long long ") + kDialect.symbol_name(sym.id);
  return out;
}

std::string sym_c(const SymInt& v) {
  if (v.is_static()) return kDialect.int_literal(v.hint());
  std::string acc;
  const SymExpr e = v.expr();
  for (const SymTerm& term : e.terms()) {
    std::string t = term.coeff == 1 ? "" : kDialect.int_literal(term.coeff);
    for (SymbolId id : term.symbols) t += (t.empty() ? "" : "*") + kDialect.symbol_name(id);
    if (t.empty()) t = kDialect.int_literal(term.coeff);
    acc += (acc.empty() ? "" : " + ") + t;
  }
  return "(" + acc + ")";
}

}  // namespace detail

namespace {

class KernelEmitter {
 public:
  KernelEmitter(const Kernel& k, const schedule::Schedule& s, const CodegenOptions& o)
      : k_(k), s_(s), o_(o), d_(o.precise_math ? kPreciseDialect : kDialect), p_(k, s, d_, o.emulate_precision_casts) {}

  // The kernel's source and its launch.
  std::string emit(plan::PlanLaunch& launch) {
    const int64_t block = choose_block();
    block_ = block;
    launch.block = block;
    if (k_.kind == KernelKind::reduction && k_.num_passes() > 0) {
      if (uses_column_strategy(k_)) {
        launch.items_per_block = kColumnLanes;
        emit_column();
      } else {
        emit_row(launch);
      }
    } else {
      launch.items_per_block = block * o_.pointwise_items_per_thread;
      emit_pointwise(launch);
    }
    std::string src = "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(block) + ") " + k_.name + "(" +
                      params() + ") {\n" + p_.out().str() + "}\n";
    return src;
  }

 private:
  const Kernel& k_;
  const schedule::Schedule& s_;
  const CodegenOptions& o_;
  const CudaDialect& d_;
  KernelPrinter p_;
  cstyle::Reductions red_{p_};
  int64_t block_ = 0;

  int64_t choose_block() const {
    if (k_.kind != KernelKind::reduction || k_.num_passes() == 0) return o_.pointwise_block;
    if (uses_column_strategy(k_)) {
      int64_t groups = column_groups(inner_extent().evaluate(s_.graph.shapes().examples()));
      // Shared memory holds every reduction's state per thread: stay well under 48 KiB.
      int64_t state_bytes = 0;
      for (size_t i = 0; i < k_.instrs.size(); ++i)
        if (k_.instrs[i].kind == InstrKind::reduce)
          for (const Component& c : red_.state(static_cast<int32_t>(i), ""))
            state_bytes += c.ct == CT::b ? 1 : c.ct == CT::f32 ? 4 : 8;
      if (state_bytes * kColumnLanes * groups > 16384) groups = 8;
      return kColumnLanes * groups;
    }
    return row_block(inner_extent().evaluate(s_.graph.shapes().examples()));
  }

  SymInt inner_extent() const { return cstyle::inner_extent(k_); }

  std::string params() const { return detail::kernel_params(k_, s_); }

  // Splits flat (an expression) over dims [first, last) into sc.vars, row-major.
  void unflatten(const std::string& flat, size_t first, size_t last, Scope& sc) {
    std::string rest = flat;
    for (size_t d = last; d-- > first;) {
      if (d == first) {
        sc.vars[d] = rest;
        break;
      }
      const std::string e = p_.sym(k_.domain[d]);
      sc.vars[d] = p_.let(CT::i64, rest + " % " + e);
      rest = p_.let(CT::i64, rest + " / " + e);
    }
  }

  // ---- vector accesses ----
  // The loads (instructions) and stores (indices into k_.stores) done kVec elements at a time:
  // unit stride in the last domain dim, whose extent is a static multiple of kVec, so a group of
  // kVec consecutive positions of that dim never crosses a row. Symbolic offsets and other
  // strides are checked (multiples of kVec) once per launch into `vec`; where that fails the
  // group's elements are loaded and stored one by one (same results). Addresses need no check
  // (kBufferAlignment): with static sizes `vec` is true and NVRTC drops the scalar path.
  size_t vd_ = 0;
  std::set<int32_t> vec_loads_;
  std::set<size_t> vec_stores_;

  bool plan_vectors(size_t first_dim, bool inner_loads_only) {
    vec_loads_.clear();
    vec_stores_.clear();
    if (!o_.vector_accesses) return false;
    const std::optional<cstyle::VectorPlan> plan = cstyle::plan_vectors(
        k_, first_dim, inner_loads_only, kVec, [&](int32_t b) { return vec_type(p_.buffer_dtype(b)) != nullptr; });
    if (!plan) return false;
    vd_ = plan->dim;
    vec_loads_ = plan->loads;
    vec_stores_ = plan->stores;
    p_.line("const bool vec = " + plan->flag(p_) + ";");
    return true;
  }

  // `const T name` holding the kVec elements of load i from the group at scope base.
  void vector_load(int32_t i, const Scope& base, const std::string& name) {
    const Instr& in = k_.instrs[static_cast<size_t>(i)];
    const DType t = p_.buffer_dtype(in.buffer);
    const std::string vt = vec_type(t), at = p_.let(CT::i64, p_.affine(in.index, base));
    const std::string buf = d_.buffer_name(in.buffer);
    p_.line(vt + " " + name + ";");
    std::string scalar;
    for (int c = 0; c < kVec; ++c) scalar += " " + name + "." + kLane[c] + " = " + buf + "[" + at + " + " + std::to_string(c) + "];";
    p_.line("if (vec) " + name + " = *(const " + vt + "*)(" + buf + " + " + at + "); else {" + scalar + " }");
  }
  void vector_store(size_t si, const Scope& base, const std::string& name) {
    const schedule::Store& st = k_.stores[si];
    const DType t = p_.buffer_dtype(st.buffer);
    const std::string vt = vec_type(t), at = p_.let(CT::i64, p_.affine(st.index, base));
    const std::string buf = d_.buffer_name(st.buffer);
    std::string scalar;
    for (int c = 0; c < kVec; ++c) scalar += " " + buf + "[" + at + " + " + std::to_string(c) + "] = " + name + "." + kLane[c] + ";";
    p_.line("if (vec) *(" + vt + "*)(" + buf + " + " + at + ") = " + name + "; else {" + scalar + " }");
  }
  // Component c of a vector store: the store's value at scope sc.
  void vector_store_lane(size_t si, Scope& sc, const std::string& name, int c) {
    const schedule::Store& st = k_.stores[si];
    const DType t = p_.buffer_dtype(st.buffer);
    const Value x = p_.convert(p_.value(st.value, sc), cstyle::compute_type(t));
    p_.line(name + "." + kLane[c] + " = " + to_storage(t, x.v) + ";");
  }
  // The scope of element c of the group at base (the last dim's variable advanced by c).
  Scope lane_scope(const Scope& base, int c) const {
    Scope sc = base.child();
    if (c > 0) sc.vars[vd_] = "(" + base.vars[vd_] + " + " + std::to_string(c) + ")";
    return sc;
  }

  // Opens `for (long long var = start; var < bound; var += stride) {`, a grid-stride loop, or,
  // where the launch gives each block or thread exactly one iteration (`once`), just that one
  // (`if (var < bound) {`; launch.grid_stride false): NVRTC compiles the body 8-10% sooner
  // without the loop around it.
  void open_grid_loop(plan::PlanLaunch& launch, bool once, const std::string& var, const std::string& start,
                      const std::string& bound, const std::string& stride) {
    if (once) {
      launch.grid_stride = false;
      p_.line("const long long " + var + " = " + start + ";");
      p_.line("if (" + var + " < " + bound + ") {");
    } else {
      p_.line("for (long long " + var + " = " + start + "; " + var + " < " + bound + "; " + var + " += " + stride + ") {");
    }
  }
  // The loop over a thread's elements, `step` consecutive ones per iteration: one iteration where
  // the launch's elements per thread are `step` and the total is static.
  void open_pointwise_loop(plan::PlanLaunch& launch, const SymInt& total, int64_t step) {
    const std::string start = step == 1 ? "(long long)blockIdx.x * blockDim.x + threadIdx.x"
                                        : "((long long)blockIdx.x * blockDim.x + threadIdx.x) * " + std::to_string(step);
    const int64_t per_block = block_ * step;
    const bool once = total.is_static() && o_.pointwise_items_per_thread == step &&
                      (total.hint() + per_block - 1) / per_block <= 0x7fffffff;
    open_grid_loop(launch, once, "i", start, "total",
                   "(long long)gridDim.x * blockDim.x" + (step == 1 ? std::string() : " * " + std::to_string(step)));
  }

  void emit_pointwise(plan::PlanLaunch& launch) {
    const size_t n = k_.domain.size();
    SymInt total = 1;
    for (const SymInt& e : k_.domain) total = total * e;
    p_.line("const long long total = " + p_.sym(total) + ";");
    if (plan_vectors(0, false)) {
      // Each thread takes kVec consecutive elements (one vector per access) per step.
      open_pointwise_loop(launch, total, kVec);
      p_.indent();
      Scope base;
      base.vars.assign(n, "");
      unflatten("i", 0, n, base);
      std::map<int32_t, std::string> vl;
      for (int32_t li : vec_loads_) vector_load(li, base, vl[li] = p_.temp("vl"));
      std::map<size_t, std::string> vs;
      for (size_t si : vec_stores_) p_.line(std::string(vec_type(p_.buffer_dtype(k_.stores[si].buffer))) + " " + (vs[si] = p_.temp("vs")) + ";");
      for (int c = 0; c < kVec; ++c) {
        p_.line("{");
        p_.indent();
        for (const auto& [li, name] : vl)
          p_.load_reads()[li] = from_storage(p_.buffer_dtype(k_.instrs[static_cast<size_t>(li)].buffer), name + "." + kLane[c]);
        Scope sc = lane_scope(base, c);
        for (size_t si = 0; si < k_.stores.size(); ++si) {
          if (vs.count(si)) vector_store_lane(si, sc, vs[si], c);
          else p_.store(k_.stores[si], sc);
        }
        p_.dedent();
        p_.line("}");
      }
      p_.load_reads().clear();
      for (const auto& [si, name] : vs) vector_store(si, base, name);
      p_.dedent();
      p_.line("}");
      return;
    }
    open_pointwise_loop(launch, total, 1);
    p_.indent();
    Scope sc;
    sc.vars.assign(n, "");
    if (n > 0) unflatten("i", 0, n, sc);
    for (const schedule::Store& st : k_.stores) p_.store(st, sc);
    p_.dedent();
    p_.line("}");
  }

  // ---- reductions (state, identity, fold and finish: cstyle::Reductions) ----

  void shared_arrays(int32_t r, int64_t entries) {
    for (const Component& c : red_.state(r, "sh" + std::to_string(r)))
      p_.line("__shared__ " + d_.type(c.ct) + " " + c.name + "[" + std::to_string(entries) + "];");
  }

  // A shuffle of component value x across the warp (xor lane mask `off`).
  static std::string shuffle(const Component& c, const std::string& x, const std::string& off) {
    if (c.ct == CT::b) return "(__shfl_xor_sync(0xffffffffu, (int)" + x + ", " + off + ") != 0)";
    return "__shfl_xor_sync(0xffffffffu, " + x + ", " + off + ")";
  }

  void warp_combine(int32_t r, const std::vector<Component>& a) {
    p_.line("for (int off = 16; off > 0; off >>= 1) {");
    p_.indent();
    std::vector<std::string> other;
    for (const Component& c : a) {
      const std::string o = p_.temp("o");
      p_.line(d_.type(c.ct) + " " + o + " = " + shuffle(c, c.name, "off") + ";");
      other.push_back(o);
    }
    red_.merge(r, a, other);
    p_.dedent();
    p_.line("}");
  }

  // Combines each reduction of `reds` over the block (warp shuffles, then shared memory) and
  // binds its result r<id>, the same in every thread.
  void block_combine(const std::vector<int32_t>& reds) {
    for (int32_t r : reds) {
      const std::string id = std::to_string(r);
      const std::vector<Component> a = red_.state(r, "a" + id), sh = red_.state(r, "sh" + id);
      warp_combine(r, a);
      p_.line("if (lane == 0) {");
      for (size_t i = 0; i < a.size(); ++i) p_.line("  " + sh[i].name + "[warp] = " + a[i].name + ";");
      p_.line("}");
      p_.line("__syncthreads();");
      p_.line("if (warp == 0) {");
      p_.indent();
      const std::vector<std::string> init = red_.initial(r);
      for (size_t i = 0; i < a.size(); ++i)
        p_.line(a[i].name + " = lane < warps ? " + sh[i].name + "[lane] : " + init[i] + ";");
      warp_combine(r, a);
      p_.line("if (lane == 0) {");
      for (size_t i = 0; i < a.size(); ++i) p_.line("  " + sh[i].name + "[0] = " + a[i].name + ";");
      p_.line("}");
      p_.dedent();
      p_.line("}");
      p_.line("__syncthreads();");
      std::vector<std::string> fin;
      for (const Component& c : sh) fin.push_back(c.name + "[0]");
      p_.line("r" + id + " = " + red_.finish(r, fin) + ";");
      p_.line("__syncthreads();");
      p_.reduction_results()[r] = "r" + id;
    }
  }


  // The passes of a row reduction, kVec consecutive elements of the row per thread and step
  // (vector loads and stores). A static row of at most kMaxCachedItems elements per thread is
  // kept in registers (lcN) from the pass that first loads it, as the scalar row cache does.
  void emit_row_vector_passes(Scope& outer) {
    const size_t n = k_.domain.size(), no = static_cast<size_t>(k_.num_outer);
    const int32_t passes = k_.num_passes();
    const std::string V = std::to_string(kVec);
    const int64_t groups = detail::row_cache_steps(k_, o_, block_, kVec);
    const bool cached = groups > 0;
    if (cached)
      for (int32_t i : vec_loads_) cstyle::declare_row_cache(p_, i, groups * kVec);
    std::set<int32_t> in_registers;
    const std::optional<OnlinePair> online = cached ? std::nullopt : online_pair();
    for (int32_t pass = 0; pass < passes; ++pass) {
      if (online && pass == 1) continue;  // folded into pass 0
      const std::vector<int32_t> reds = open_pass(pass, online);
      if (cached) {
        p_.line("#pragma unroll");
        p_.line("for (int g = 0; g < " + std::to_string(groups) + "; ++g) {");
        p_.indent();
        p_.line("const long long jg = ((long long)threadIdx.x + (long long)g * " + std::to_string(block_) + ") * " + V + ";");
        // Rows that fill every group need no bounds check (a branch per group costs ptxas time).
        const bool full = inner_extent().hint() % (block_ * kVec) == 0;
        p_.line(full ? "{" : "if (jg < inner_total) {");
      } else {
        p_.line("for (long long jg = (long long)threadIdx.x * " + V + "; jg < inner_total; jg += (long long)blockDim.x * " + V + ") {");
      }
      p_.indent();
      Scope base = outer.child();
      base.vars.assign(n, "");
      for (size_t d = 0; d < no; ++d) base.vars[d] = outer.vars[d];
      unflatten("jg", no, n, base);
      std::map<int32_t, std::string> fresh;  // vector loads made in this step
      for (int32_t li : cstyle::loads_of_pass(k_, pass)) {
        if (!vec_loads_.count(li) || in_registers.count(li)) continue;
        const std::string name = p_.temp("vl");
        vector_load(li, base, name);
        fresh[li] = name;
        if (cached)
          for (int c = 0; c < kVec; ++c)
            p_.line("lc" + std::to_string(li) + "[g * " + V + " + " + std::to_string(c) + "] = " +
                    from_storage(p_.buffer_dtype(k_.instrs[static_cast<size_t>(li)].buffer), name + "." + kLane[c]) + ";");
      }
      std::map<size_t, std::string> vs;
      for (size_t si : vec_stores_)
        if (k_.instrs[static_cast<size_t>(k_.stores[si].value)].pass == pass)
          p_.line(std::string(vec_type(p_.buffer_dtype(k_.stores[si].buffer))) + " " + (vs[si] = p_.temp("vs")) + ";");
      for (int c = 0; c < kVec; ++c) {
        p_.line("{");
        p_.indent();
        p_.load_reads().clear();
        for (int32_t li : in_registers) p_.load_reads()[li] = "lc" + std::to_string(li) + "[g * " + V + " + " + std::to_string(c) + "]";
        for (const auto& [li, name] : fresh)
          p_.load_reads()[li] = from_storage(p_.buffer_dtype(k_.instrs[static_cast<size_t>(li)].buffer), name + "." + kLane[c]);
        Scope sc = lane_scope(base, c);
        const std::string j = c == 0 ? std::string("jg") : "(jg + " + std::to_string(c) + ")";
        if (online && pass == 0) {
          online_step(*online, sc);
        } else {
          for (int32_t r : reds) red_.fold(r, sc, j);
        }
        for (size_t si = 0; si < k_.stores.size(); ++si) {
          const schedule::Store& st = k_.stores[si];
          if (!k_.store_is_inner(st) || k_.instrs[static_cast<size_t>(st.value)].pass != pass) continue;
          if (vs.count(si)) vector_store_lane(si, sc, vs[si], c);
          else p_.store(st, sc);
        }
        p_.dedent();
        p_.line("}");
      }
      p_.load_reads().clear();
      for (const auto& [si, name] : vs) vector_store(si, base, name);
      if (cached)
        for (const auto& [li, name] : fresh) in_registers.insert(li);
      p_.dedent();
      p_.line("}");
      if (cached) {
        p_.dedent();
        p_.line("}");
      }
      if (online && pass == 0) online_combine(*online);
      else block_combine(reds);
      bind_row_values(pass, online.has_value(), outer);
    }
  }

  // The reductions of row pass `pass` (with the online pair, pass 0 takes pass 1's sum too):
  // their results `r<id>` and running states declared.
  std::vector<int32_t> open_pass(int32_t pass, const std::optional<detail::OnlinePair>& online) {
    std::vector<int32_t> reds = cstyle::reductions_of_pass(k_, pass);
    if (online && pass == 0) reds.push_back(online->sum);
    for (int32_t r : reds) {
      p_.line(d_.type(cstyle::compute_type(k_.instrs[static_cast<size_t>(r)].dtype)) + " r" + std::to_string(r) + ";");
      red_.declare(r);
    }
    if (online && pass == 0) declare_online_flag(*online);
    return reds;
  }

  // After the reductions of loop `pass` are bound: the per-row values computed from them, once
  // per row (cstyle::KernelPrinter::bind_row_values); with the online pair, loop 1's too.
  void bind_row_values(int32_t pass, bool online, Scope& row) {
    p_.bind_row_values(pass, row);
    if (online && pass == 0) p_.bind_row_values(1, row);
  }

  // ---- online softmax (detail::online_pair) ----
  using OnlinePair = detail::OnlinePair;
  std::optional<OnlinePair> online_pair() const { return detail::online_pair(k_, o_); }
  // Folds (om, os) into the running (m, s) of the pair (variables named by prefixes).
  void online_merge(const OnlinePair& op, const std::string& m, const std::string& s, const std::string& om,
                    const std::string& os) {
    const CT c = cstyle::compute_type(k_.instrs[static_cast<size_t>(op.max)].dtype);
    const std::string ninf = d_.literal(-INFINITY, c), zero = d_.literal(0, c);
    const std::string mn = p_.let(c, d_.math("fmax", c, {m, om}));
    p_.line(s + " = (" + m + " == " + ninf + " ? " + zero + " : " + s + " * " + d_.math("exp", c, {m + " - " + mn}) +
            ") + (" + om + " == " + ninf + " ? " + zero + " : " + os + " * " + d_.math("exp", c, {om + " - " + mn}) + ");");
    p_.line(m + " = " + mn + ";");
  }
  // The online pair's running max skips NaN (x > m is false), so it keeps a NaN flag even where
  // the max's state has none (f32): declared here, after the pass's states.
  void declare_online_flag(const OnlinePair& op) {
    if (!red_.nan_flag(op.max)) p_.line("bool a" + std::to_string(op.max) + "_nan = false;");
  }
  void online_step(const OnlinePair& op, Scope& sc) {
    const CT c = cstyle::compute_type(k_.instrs[static_cast<size_t>(op.max)].dtype);
    const std::string m = "a" + std::to_string(op.max) + "_acc", nan = "a" + std::to_string(op.max) + "_nan";
    const std::string s = "a" + std::to_string(op.sum) + "_acc";
    const Value x = p_.convert(p_.value(op.arg, sc), c);
    const std::string one = d_.literal(1, c), ninf = d_.literal(-INFINITY, c);
    p_.line("if (" + x.v + " > " + m + ") { " + s + " = " + s + " * " + d_.math("exp", c, {m + " - " + x.v}) + " + " + one +
            "; " + m + " = " + x.v + "; } else if (" + x.v + " != " + ninf + ") { " + s + " += " +
            d_.math("exp", c, {x.v + " - " + m}) + "; }");
    p_.line(nan + " = " + nan + " || " + d_.isnan(x.v, c) + ";");
  }
  void online_combine(const OnlinePair& op) {
    const CT c = cstyle::compute_type(k_.instrs[static_cast<size_t>(op.max)].dtype);
    const std::string mi = std::to_string(op.max), si = std::to_string(op.sum);
    const std::string m = "a" + mi + "_acc", nan = "a" + mi + "_nan", s = "a" + si + "_acc";
    const std::string shm = "sh" + mi + "_acc", shn = "sh" + mi + "_nan", shs = "sh" + si + "_acc";
    if (!red_.nan_flag(op.max)) p_.line("__shared__ bool " + shn + "[32];");
    auto warp = [&] {
      p_.line("for (int off = 16; off > 0; off >>= 1) {");
      p_.indent();
      const std::string om = p_.let(c, "__shfl_xor_sync(0xffffffffu, " + m + ", off)");
      const std::string os = p_.let(c, "__shfl_xor_sync(0xffffffffu, " + s + ", off)");
      p_.line(nan + " = " + nan + " || (__shfl_xor_sync(0xffffffffu, (int)" + nan + ", off) != 0);");
      online_merge(op, m, s, om, os);
      p_.dedent();
      p_.line("}");
    };
    warp();
    p_.line("if (lane == 0) { " + shm + "[warp] = " + m + "; " + shn + "[warp] = " + nan + "; " + shs + "[warp] = " + s + "; }");
    p_.line("__syncthreads();");
    p_.line("if (warp == 0) {");
    p_.indent();
    p_.line(m + " = lane < warps ? " + shm + "[lane] : " + d_.literal(-INFINITY, c) + ";");
    p_.line(nan + " = lane < warps ? " + shn + "[lane] : false;");
    p_.line(s + " = lane < warps ? " + shs + "[lane] : " + d_.literal(0, c) + ";");
    warp();
    p_.line("if (lane == 0) { " + shm + "[0] = " + m + "; " + shn + "[0] = " + nan + "; " + shs + "[0] = " + s + "; }");
    p_.dedent();
    p_.line("}");
    p_.line("__syncthreads();");
    const std::string with_nan = "(" + shn + "[0] ? " + d_.literal(NAN, c) + " : " + shm + "[0])";
    p_.line("r" + mi + " = " + (red_.nan_flag(op.max) ? red_.finish(op.max, {shm + "[0]", shn + "[0]"}) : red_.finish(op.max, {with_nan})) + ";");
    std::vector<std::string> sum_state{shs + "[0]"};
    if (red_.compensated(op.sum)) sum_state.push_back(d_.literal(0, c));  // the online sum keeps no compensation
    p_.line("r" + si + " = " + red_.finish(op.sum, sum_state) + ";");
    p_.line("__syncthreads();");
    p_.reduction_results()[op.max] = "r" + mi;
    p_.reduction_results()[op.sum] = "r" + si;
  }

  void emit_row(plan::PlanLaunch& launch) {
    const size_t n = k_.domain.size(), no = static_cast<size_t>(k_.num_outer);
    const int32_t passes = k_.num_passes();
    for (int32_t pass = 0; pass < passes; ++pass)
      for (int32_t r : cstyle::reductions_of_pass(k_, pass)) shared_arrays(r, 32);
    p_.line("const long long outer_total = " + p_.sym(k_.outer_extent()) + ";");
    p_.line("const long long inner_total = " + p_.sym(inner_extent()) + ";");
    p_.line("const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;");
    const bool vectors = plan_vectors(no, true);
    // A static number of rows gets a block each; a symbolic one loops.
    open_grid_loop(launch, k_.outer_extent().is_static() && k_.outer_extent().hint() <= 0x7fffffff, "o", "blockIdx.x",
                   "outer_total", "gridDim.x");
    p_.indent();
    Scope outer;
    outer.vars.assign(n, "");
    if (no > 0) unflatten("o", 0, no, outer);
    if (vectors) {
      emit_row_vector_passes(outer);
      cstyle::store_outer(p_, outer, "threadIdx.x == 0");
      p_.dedent();
      p_.line("}");
      return;
    }
    // The row cache: each thread's elements of the row in registers (static rows only, the loop
    // over them unrolled so the arrays stay in registers).
    const int64_t items = detail::row_cache_steps(k_, o_, block_, 1);
    std::vector<int32_t> cached;
    if (items > 0)
      for (size_t i = 0; i < k_.instrs.size(); ++i)
        if (k_.instrs[i].kind == InstrKind::load && k_.instrs[i].inner) cached.push_back(static_cast<int32_t>(i));
    for (int32_t i : cached) cstyle::declare_row_cache(p_, i, items);
    const std::optional<OnlinePair> online = cached.empty() ? online_pair() : std::nullopt;
    for (int32_t pass = 0; pass < passes; ++pass) {
      if (online && pass == 1) continue;  // folded into pass 0
      const std::vector<int32_t> reds = open_pass(pass, online);
      if (!cached.empty()) {
        // Loads recorded in an earlier pass are read from the registers; the others load (and
        // record) as they are first needed.
        cstyle::cache_row_loads(p_, cached, "k");
        p_.line("#pragma unroll");
        p_.line("for (int k = 0; k < " + std::to_string(items) + "; ++k) {");
        p_.indent();
        p_.line("const long long j = (long long)threadIdx.x + (long long)k * " + std::to_string(block_) + ";");
        p_.line(inner_extent().hint() % block_ == 0 ? "{" : "if (j < inner_total) {");  // as above
      } else {
        p_.line("for (long long j = threadIdx.x; j < inner_total; j += blockDim.x) {");
      }
      p_.indent();
      {
        Scope sc = outer.child();
        unflatten("j", no, n, sc);
        if (online && pass == 0) online_step(*online, sc);
        else red_.step(pass, reds, sc, "j");
      }
      p_.dedent();
      p_.line("}");
      if (!cached.empty()) {
        p_.dedent();
        p_.line("}");
      }
      if (online && pass == 0) online_combine(*online);
      else block_combine(reds);
      bind_row_values(pass, online.has_value(), outer);
    }
    p_.load_reads().clear();
    p_.load_records().clear();
    cstyle::store_outer(p_, outer, "threadIdx.x == 0");
    p_.dedent();
    p_.line("}");
  }

  void emit_column() {
    const size_t n = k_.domain.size(), no = static_cast<size_t>(k_.num_outer);
    const int32_t passes = k_.num_passes();
    const int64_t ngroups = block_ / kColumnLanes;
    const std::string lanes = std::to_string(kColumnLanes), groups = std::to_string(ngroups);
    for (int32_t pass = 0; pass < passes; ++pass)
      for (int32_t r : cstyle::reductions_of_pass(k_, pass)) shared_arrays(r, block_);
    p_.line("const long long outer_total = " + p_.sym(k_.outer_extent()) + ";");
    p_.line("const long long inner_total = " + p_.sym(inner_extent()) + ";");
    p_.line("const int lane = threadIdx.x % " + lanes + ", group = threadIdx.x / " + lanes + ";");
    p_.line("for (long long ob = (long long)blockIdx.x * " + lanes + "; ob < outer_total; ob += (long long)gridDim.x * " + lanes + ") {");
    p_.indent();
    p_.line("const long long o = ob + lane;");
    p_.line("const bool active = o < outer_total;");
    Scope outer;
    outer.vars.assign(n, "");
    unflatten("o", 0, no, outer);
    for (int32_t pass = 0; pass < passes; ++pass) {
      const std::vector<int32_t> reds = cstyle::reductions_of_pass(k_, pass);
      for (int32_t r : reds) {
        p_.line(d_.type(cstyle::compute_type(k_.instrs[static_cast<size_t>(r)].dtype)) + " r" + std::to_string(r) + ";");
        red_.declare(r);
      }
      p_.line("if (active) {");
      p_.indent();
      // column_loads_ahead elements at a time with all their loads issued before the first is
      // used (a step's stores otherwise keep the next step's loads waiting: a thread would have
      // one element's loads in flight), then one at a time for the rest; the same elements in
      // the same order, so the same sums.
      std::vector<int32_t> ahead;
      for (int32_t li : cstyle::loads_of_pass(k_, pass))
        if (k_.instrs[static_cast<size_t>(li)].inner && k_.instrs[static_cast<size_t>(li)].plain_load()) ahead.push_back(li);
      p_.line("long long j = group;");
      const int ahead_n = static_cast<int>(o_.column_loads_ahead);
      if (!ahead.empty() && ahead_n > 1) {
        p_.line("for (; j + " + std::to_string(ahead_n - 1) + "LL * " + groups + " < inner_total; j += " +
                std::to_string(ahead_n) + "LL * " + groups + ") {");
        p_.indent();
        std::vector<Scope> scopes;
        scopes.reserve(static_cast<size_t>(ahead_n));
        std::vector<std::string> js;
        for (int u = 0; u < ahead_n; ++u) {
          js.push_back(u == 0 ? "j" : p_.let(CT::i64, "j + " + std::to_string(u) + "LL * " + groups));
          scopes.push_back(outer.child());
          unflatten(js.back(), no, n, scopes.back());
          for (int32_t li : ahead) p_.value(li, scopes.back());
        }
        for (int u = 0; u < ahead_n; ++u) red_.step(pass, reds, scopes[static_cast<size_t>(u)], js[static_cast<size_t>(u)]);
        p_.dedent();
        p_.line("}");
      }
      p_.line("for (; j < inner_total; j += " + groups + ") {");
      p_.indent();
      {
        Scope sc = outer.child();
        unflatten("j", no, n, sc);
        red_.step(pass, reds, sc, "j");
      }
      p_.dedent();
      p_.line("}");
      p_.dedent();
      p_.line("}");
      for (int32_t r : reds) {
        const std::string id = std::to_string(r);
        const std::vector<Component> a = red_.state(r, "a" + id), sh = red_.state(r, "sh" + id);
        for (size_t i = 0; i < a.size(); ++i) p_.line(sh[i].name + "[threadIdx.x] = " + a[i].name + ";");
        p_.line("__syncthreads();");
        p_.line("if (group == 0) {");
        p_.indent();
        p_.line("for (int g = 1; g < " + groups + "; ++g) {");
        p_.indent();
        std::vector<std::string> other;
        for (const Component& c : sh) other.push_back(c.name + "[g * " + lanes + " + lane]");
        red_.merge(r, a, other);
        p_.dedent();
        p_.line("}");
        for (size_t i = 0; i < a.size(); ++i) p_.line(sh[i].name + "[lane] = " + a[i].name + ";");
        p_.dedent();
        p_.line("}");
        p_.line("__syncthreads();");
        std::vector<std::string> fin;
        for (const Component& c : sh) fin.push_back(c.name + "[lane]");
        p_.line("r" + id + " = " + red_.finish(r, fin) + ";");
        p_.line("__syncthreads();");
        p_.reduction_results()[r] = "r" + id;
      }
    }
    cstyle::store_outer(p_, outer, "active && group == 0");
    p_.dedent();
    p_.line("}");
  }
};

// Whether the gemm's own product c is read after kernel k (by a later kernel, or as an output of
// the graph) while the kernel's epilogue stores into another buffer, `out`: a gemm that writes
// the epilogue's result into out instead of c (fuse_gemm_scale, fuse_gemm_epilogue) would leave
// c unwritten. (A training step reads the product x @ w of a linear layer again in its
// backward: gelu's gradient at x @ w + b.) Where out is c, the epilogue overwrites c anyway.
bool product_read_later(const Kernel& k, const schedule::Schedule& s, int32_t out) {
  const int32_t c = k.gemm->c;
  if (c == out) return false;
  for (int32_t o : s.outputs)
    if (o == c) return true;
  for (const Kernel& other : s.kernels) {
    if (&other == &k) continue;
    const std::vector<int32_t> reads = other.reads();
    if (std::find(reads.begin(), reads.end(), c) != reads.end()) return true;
  }
  return false;
}

// A matmul kernel whose whole body is out = c * K (K a constant, f32/f16/bf16 gemm, out the
// gemm's dtype and read where c is; c read by no other kernel) has the gemm scale its product
// (alpha = K) and write out directly (attention's q k^T * s); no kernel runs after it.
bool fuse_gemm_scale(const Kernel& k, const schedule::Schedule& s, const CodegenOptions& o, plan::PlanGemm& g) {
  if (!o.gemm_epilogues || o.emulate_precision_casts || !k.gemm || k.stores.size() != 1 || !k.gemm->k.is_static() ||
      k.gemm->k.hint() == 0 || product_read_later(k, s, k.stores[0].buffer))
    return false;
  const DType t = g.dtype;
  if (t != DType::f32 && t != DType::f16 && t != DType::bf16) return false;
  auto at = [&](int32_t i) -> const Instr& { return k.instrs[static_cast<size_t>(i)]; };
  auto buf = [&](int32_t b) -> const schedule::Buffer& { return s.buffers[static_cast<size_t>(b)]; };
  const schedule::Store& st = k.stores[0];
  const Instr& mul = at(st.value);
  if (buf(st.buffer).dtype != t || mul.kind != InstrKind::pointwise || mul.op != OpId::mul || mul.dtype != t) return false;
  int32_t product = -1, scale = -1;
  for (int32_t a : mul.args) {
    if (at(a).kind == InstrKind::load && at(a).buffer == k.gemm->c && at(a).index == st.index && at(a).dtype == t) product = a;
    else if (at(a).kind == InstrKind::constant) scale = a;
  }
  if (product < 0 || scale < 0) return false;
  // Only a constant the dtype holds exactly, so the gemm scales by what the kernel would.
  const double K = at(scale).value;
  const float f = static_cast<float>(K);
  if (!std::isfinite(K) || static_cast<double>(f) != K || at(scale).dtype != t) return false;
  uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  if (t == DType::bf16 && (bits & 0xffffu) != 0) return false;
  if (t == DType::f16 && f != 0.0f && ((bits & 0x1fffu) != 0 || std::fabs(f) < 6.103515625e-05f || std::fabs(f) > 65504.0f))
    return false;
  auto memory = [&](int32_t b) {
    return buf(b).kind == schedule::BufferKind::intermediate ? "slot" + std::to_string(buf(b).slot) : "b" + std::to_string(b);
  };
  for (int32_t b : {k.gemm->a, k.gemm->b})
    if (memory(b) == memory(st.buffer)) return false;
  g.alpha = K;
  g.c = st.buffer;
  return true;
}

// cuBLASLt epilogues: a matmul kernel of a 2-D gemm whose whole body is out = c + bias[j],
// out = gelu_tanh(c + bias[j]) or out = gelu_tanh(c) (out and bias in the gemm's dtype, out
// contiguous; c read by no other kernel) is done by the gemm itself, writing `out` directly; no
// kernel runs after it.
// Returns whether it applied.
bool fuse_gemm_epilogue(const Kernel& k, const schedule::Schedule& s, const CodegenOptions& o, plan::PlanGemm& g) {
  if (!o.gemm_epilogues || o.emulate_precision_casts || !k.gemm || !k.gemm->batch.empty() || k.stores.size() != 1 ||
      k.domain.size() != 2 || !k.gemm->k.is_static() || k.gemm->k.hint() == 0 ||  // k == 0: no gemm runs
      product_read_later(k, s, k.stores[0].buffer))
    return false;
  const DType t = g.dtype;
  if (t != DType::f32 && t != DType::f16 && t != DType::bf16) return false;
  auto at = [&](int32_t i) -> const Instr& { return k.instrs[static_cast<size_t>(i)]; };
  auto buf = [&](int32_t b) -> const schedule::Buffer& { return s.buffers[static_cast<size_t>(b)]; };
  const schedule::Store& st = k.stores[0];
  if (buf(st.buffer).dtype != t) return false;
  // out contiguous over [m, n]
  if (!(st.index.offset == 0) || !(st.index.coeffs[1] == 1) || !(st.index.coeffs[0] == k.domain[1])) return false;
  int32_t v = st.value;
  const bool gelu = at(v).kind == InstrKind::pointwise && at(v).op == OpId::gelu;
  if (gelu) {
    if (at(v).attrs.s(0) != "tanh" || at(v).dtype != t) return false;
    v = at(v).args[0];
  }
  auto is_product = [&](const Instr& l) {
    return l.kind == InstrKind::load && l.dtype == t && buf(l.buffer).dtype == t && l.buffer == k.gemm->c && l.index == st.index;
  };
  int32_t bias = -1;
  if (!(gelu && is_product(at(v)))) {  // else gelu_tanh(c): no bias to add
    const Instr& add = at(v);
    if (add.kind != InstrKind::pointwise || add.op != OpId::add || add.dtype != t) return false;
    bool product = false;
    for (int32_t a : add.args) {
      const Instr& l = at(a);
      if (l.kind != InstrKind::load || l.dtype != t || buf(l.buffer).dtype != t) return false;
      if (is_product(l)) {
        product = true;
      } else if (l.index.offset == 0 && l.index.coeffs[0] == 0 && l.index.coeffs[1] == 1) {
        bias = l.buffer;
      }
    }
    if (!product || bias < 0) return false;
  }
  // The gemm writes out while reading its operands and the bias: none may share out's memory.
  auto memory = [&](int32_t b) {
    return buf(b).kind == schedule::BufferKind::intermediate ? "slot" + std::to_string(buf(b).slot) : "b" + std::to_string(b);
  };
  for (int32_t b : {k.gemm->a, k.gemm->b, bias})
    if (b >= 0 && memory(b) == memory(st.buffer)) return false;
  g.epilogue = !gelu ? "bias" : bias >= 0 ? "gelu_bias" : "gelu";
  g.bias = bias;
  g.c = st.buffer;
  return true;
}

}  // namespace

const char* prelude() { return kPrelude; }

plan::KernelPlan generate(const schedule::Schedule& s, const CodegenOptions& options) {
  plan::KernelPlan p = lower::plan_skeleton(s, "cuda");
  p.prelude = kPrelude;
  p.arch = options.arch;
  bool sm90_attention = false;
  for (const Kernel& k : s.kernels) {
    plan::PlanKernel pk = lower::kernel_skeleton(k);
    if (k.reference || k.convolution) {  // run by the runtime: the reference interpreter, cuDNN
      // (a custom op's own CUDA kernel where it registered one: a kernel of fixed signature)
      if (std::optional<plan::PlanKernel> own = lower::custom_device_kernel(k, s, "cuda")) pk = std::move(*own);
      p.kernels.push_back(std::move(pk));
      continue;
    }
    if (k.attention) {
      if (p.prelude == kPrelude) p.prelude += detail::flash_prelude();
      sm90_attention = sm90_attention || detail::uses_flash_sm90(*k.attention, options);
      pk.entry = k.name;
      pk.source = detail::emit_attention(k, s, options, pk);
      p.kernels.push_back(std::move(pk));
      continue;
    }
    bool fused_epilogue = false;
    if (k.gemm) {
      pk.gemm = lower::plan_gemm(*k.gemm);
      fused_epilogue = fuse_gemm_epilogue(k, s, options, *pk.gemm) || fuse_gemm_scale(k, s, options, *pk.gemm);
    }
    // Reductions launch over their outer points, everything else over the whole domain.
    if (k.kind == KernelKind::reduction && k.num_passes() > 0) {
      pk.parallel_extent = k.outer_extent();
    } else {
      pk.parallel_extent = 1;
      for (const SymInt& e : k.domain) pk.parallel_extent = pk.parallel_extent * e;
    }
    if (k.kind != KernelKind::matmul || (!k.stores.empty() && !fused_epilogue)) {
      pk.entry = k.name;
      if (detail::nvptx_emits(k, options)) {
        pk.language = "llvm";
        pk.source = detail::emit_nvptx(k, s, options, pk.launch);
      } else {
        pk.source = KernelEmitter(k, s, options).emit(pk.launch);
      }
      // Identical layers are one kernel compiled: buffers named by parameter position (the
      // runtime passes them in id order), the entry by the source's hash.
      std::set<int32_t> params(pk.reads.begin(), pk.reads.end());
      params.insert(pk.writes.begin(), pk.writes.end());
      lower::Renames renames;
      for (int32_t b : params) renames.emplace(kDialect.buffer_name(b), "arg" + std::to_string(renames.size()));
      lower::name_by_content(pk, renames);
    } else {
      pk.launch.block = options.pointwise_block;  // the gemm alone: nothing to launch after it
    }
    p.kernels.push_back(std::move(pk));
  }
  if (sm90_attention) p.prelude += detail::flash_sm90_prelude();
  if (plan::replay_enabled()) plan::record_for_replay(p, s.str());
  return p;
}

schedule::Target schedule_target() {
  schedule::Target t = schedule::Target::gpu();
  t.fused_attention = true;
  t.convolution = config::get<bool>("cuda.cudnn");
  t.channels_last = t.convolution && config::get<bool>("cuda.channels_last");
  t.channels_last_f32 = config::get<bool>("cuda.allow_tf32");
  t.gemm_row_alignment = config::get<bool>("cuda.pad_matmuls") ? 16 : 0;
  return t;
}

plan::KernelPlan generate_plan(const Graph& g) { return generate(schedule::schedule_graph(g, schedule_target())); }

}  // namespace kiln::cuda
