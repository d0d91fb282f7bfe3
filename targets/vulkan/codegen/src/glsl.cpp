// Kernel IR -> GLSL 450 compute shaders (see codegen.h for the strategies). Values come from the
// shared C-style printer (targets/cstyle) through GlslDialect; this file writes bindings, push
// constants, the invocation structure and the reductions' shared-memory combines.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "glsl_helpers.h"
#include "kiln/plan/replay.h"
#include "kiln/lower/skeleton.h"
#include "kiln/config/config.h"
#include "kiln/cstyle/printer.h"
#include "kiln/cstyle/reduction.h"
#include "kiln/cstyle/structure.h"
#include "kiln/graph/error.h"
#include "kiln/schedule/strategy.h"
#include "kiln/vulkan/codegen.h"

namespace kiln::vulkan {

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

std::string DeviceCaps::str() const {
  std::string s;
  if (storage16) s += "16bit-storage ";
  if (storage8) s += "8bit-storage ";
  if (float64) s += "f64 ";
  if (int64) s += "int64 ";
  if (subgroup) s += "subgroup-arith ";
  if (denorm_preserve) s += "denorm-preserve ";
  if (nan_preserve) s += "nan-preserve ";
  return s + "wg<=" + std::to_string(max_workgroup) + " sb<=" + std::to_string(max_storage_buffers);
}

CodegenOptions CodegenOptions::from_config() {
  CodegenOptions o;
  o.emulate_precision_casts = config::get<bool>("emulate_precision_casts");
  o.fuse_gemm_epilogue = config::get<bool>("vulkan.fuse_gemm_epilogue");
  o.gemm_blocking = config::get<std::string>("vulkan.gemm_blocking");
  return o;
}


namespace {

bool maybe_negative(const SymInt& s) {
  if (s.is_static()) return s.hint() < 0;
  const SymExpr e = s.expr();
  for (const SymTerm& t : e.terms())
    if (t.coeff < 0) return true;
  return false;
}

}  // namespace

std::vector<int32_t> offset_buffers(const plan::KernelPlan& p) {
  std::vector<int32_t> out;
  for (const plan::PlanBuffer& b : p.buffers) {
    if (b.kind != "input") continue;
    if (std::any_of(b.strides.begin(), b.strides.end(), maybe_negative)) out.push_back(b.id);
  }
  return out;
}

namespace {

// How a buffer of dtype t is stored in a shader: its element type and, for packed storage, how
// many elements share one uint.
struct Storage {
  std::string type;
  int pack = 1;  // elements per uint (1: not packed)
};

Storage storage_of(DType t, const DeviceCaps& caps) {
  switch (t) {
    case DType::f32: return {"float"};
    case DType::f64: return {"double"};
    case DType::i32: return {"int"};
    case DType::i64: return {"int64_t"};
    case DType::f16: case DType::bf16: return caps.storage16 ? Storage{"uint16_t"} : Storage{"uint", 2};
    case DType::bool_: return caps.storage8 ? Storage{"uint8_t"} : Storage{"uint", 4};
  }
  return {"?"};
}

struct GlslDialect final : cstyle::Dialect {
  DeviceCaps caps;
  std::map<int32_t, std::string> offsets;  // buffer -> push-constant offset name

  std::string type(CT c) const override {
    switch (c) {
      case CT::f32: return "float";
      case CT::f64: return "double";
      case CT::i64: return "int64_t";
      case CT::b: return "bool";
    }
    return "?";
  }
  std::string float_suffix(CT c) const override { return c == CT::f64 ? "LF" : ""; }
  std::string from_bits(uint64_t bits, CT c) const override {
    char buf[64];
    if (c == CT::f32) std::snprintf(buf, sizeof buf, "uintBitsToFloat(0x%08xu)", static_cast<unsigned>(bits));
    else std::snprintf(buf, sizeof buf, "packDouble2x32(uvec2(0x%xu, 0x%08xu))", static_cast<unsigned>(bits & 0xffffffffu),
                       static_cast<unsigned>(bits >> 32));
    return buf;
  }
  std::string int_literal(int64_t v) const override {
    // Zero is read from the push constants: lavapipe (Mesa 22.3) miscompiles 64-bit integer
    // compares against a constant 0 (abs, relu and sign of i32/i64 gave x for negative x), and
    // a value it cannot see keeps its pattern matching away from them.
    if (v == 0) return "pc.kz";
    if (v == INT64_MIN) return "(-9223372036854775807l - 1l)";
    return v < 0 ? "(" + std::to_string(v) + "l)" : std::to_string(v) + "l";
  }
  // lavapipe also miscompiles 64-bit compares against other constants (i64 >= 5 was true for
  // 0..3): the right operand of an i64 compare gets the push-constant zero added, so the driver
  // never sees a constant there.
  std::string compare(const std::string& x, std::string_view op, const std::string& y, CT c) const override {
    if (c != CT::i64) return Dialect::compare(x, op, y, c);
    return "(" + x + std::string(op) + "(" + y + " + pc.kz))";
  }
  std::string cast(const std::string& x, CT to) const override { return type(to) + "(" + x + ")"; }
  std::string math(std::string_view fn, CT c, const std::vector<std::string>& args) const override {
    auto call = [&](const std::string& name) {
      std::string s = name + "(";
      for (size_t i = 0; i < args.size(); ++i) s += (i ? ", " : "") + args[i];
      return s + ")";
    };
    static const std::map<std::string_view, const char*> native{
        {"sqrt", "sqrt"}, {"floor", "floor"}, {"ceil", "ceil"}, {"rint", "roundEven"}, {"fabs", "abs"},
        {"fmax", "max"},  {"fmin", "min"}};
    if (auto it = native.find(fn); it != native.end()) return call(it->second);
    if (c == CT::f32) {
      // exp and log of lavapipe and GPUs are within the tolerance of f32; sin, cos (large
      // arguments) and tanh (tiny ones) are not everywhere: written out in f32 (glsl_helpers.h).
      if (fn == "exp" || fn == "log") return call(std::string(fn));
      if (fn == "tanh") return call("kiln_tanh_f");
      if (fn == "sin" || fn == "cos") return call("kiln_" + std::string(fn) + "_f");
      if (fn == "pow") {
        if (caps.float64) return "float(kiln_pow_d(double(" + args[0] + "), double(" + args[1] + ")))";
        return call("kiln_pow_f");
      }
      if (fn == "erf") {
        if (caps.float64) return "float(kiln_erf_d(double(" + args[0] + ")))";
        return call("kiln_erf_f");
      }
    } else {
      return call("kiln_" + std::string(fn) + "_d");
    }
    fail("vulkan codegen: no GLSL form of ", fn);
  }
  // buffer[index] as an int index, shifted by the buffer's push-constant offset where it has one.
  std::string at(const std::string& buffer, const std::string& index) const {
    const int32_t id = std::stoi(buffer.substr(1));
    auto it = offsets.find(id);
    return it == offsets.end() ? index : "(" + index + " + " + it->second + ")";
  }
  std::string load(DType t, const std::string& buffer, const std::string& index) const override {
    const Storage st = storage_of(t, caps);
    const std::string i = at(buffer, index);
    std::string raw;  // the element as a uint (16-/8-bit types)
    if (st.pack == 2) raw = "((" + buffer + "[int(" + i + " >> 1)] >> (uint(" + i + " & 1l) * 16u)) & 0xffffu)";
    else if (st.pack == 4) raw = "((" + buffer + "[int(" + i + " >> 2)] >> (uint(" + i + " & 3l) * 8u)) & 0xffu)";
    else raw = "uint(" + buffer + "[int(" + i + ")])";
    const std::string e = buffer + "[int(" + i + ")]";
    switch (t) {
      case DType::f16: return "unpackHalf2x16(" + raw + ").x";
      case DType::bf16: return "uintBitsToFloat(" + raw + " << 16)";
      case DType::bool_: return "(" + raw + " != 0u)";
      case DType::i32: return "int64_t(" + e + ")";
      default: return e;
    }
  }
  // i32 only: f32 adds are compare-and-swap loops as the other combines are (atomicAdd on floats
  // needs VK_EXT_shader_atomic_float).
  bool native_atomic_add(DType t) const override { return t == DType::i32; }
  std::string accumulate(DType t, const std::string& buffer, const std::string& index, const std::string& x) const override {
    KILN_CHECK(t == DType::i32, "vulkan codegen: no atomic add of ", dtype_name(t));
    return "atomicAdd(" + buffer + "[int(" + at(buffer, index) + ")], int(" + x + "));";
  }
  // f32 on the binding's uint view (b<id>u; shader_head declares it), i32 on the ints themselves;
  // the schedule target leaves 64-bit scatters to the reference kernel (no 64-bit atomics asked for).
  static void check_cas(DType t) {
    KILN_CHECK(t == DType::f32 || t == DType::i32, "vulkan codegen: no atomic compare-and-swap of ", dtype_name(t),
               " (the schedule target leaves 64-bit scatters to the reference kernel)");
  }
  std::string cas_begin(DType t, const std::string& buffer, const std::string& index) const override {
    check_cas(t);
    const bool f = t == DType::f32;
    return std::string("{ const int ki = int(") + at(buffer, index) + "); " + (f ? "uint" : "int") + " kold = " + buffer +
           (f ? "u" : "") + "[ki], kseen; do { kseen = kold;";
  }
  std::string cas_seen(DType t) const override {
    check_cas(t);
    return t == DType::f32 ? "uintBitsToFloat(kseen)" : "int64_t(kseen)";
  }
  std::string cas_end(DType t, const std::string& buffer, const std::string& next) const override {
    check_cas(t);
    const bool f = t == DType::f32;
    return "kold = atomicCompSwap(" + buffer + (f ? "u[ki], kseen, floatBitsToUint(" : "[ki], kseen, int(") + next +
           ")); } while (kold != kseen); }";
  }
  std::string store(DType t, const std::string& buffer, const std::string& index, const std::string& x) const override {
    const Storage st = storage_of(t, caps);
    const std::string i = at(buffer, index);
    std::string bits;  // the element as uint (16-/8-bit types)
    switch (t) {
      case DType::f16: bits = "kiln_f2h(" + x + ")"; break;
      case DType::bf16: bits = "kiln_f2bf(" + x + ")"; break;
      case DType::bool_: bits = "(" + x + " ? 1u : 0u)"; break;
      case DType::i32: return buffer + "[int(" + i + ")] = int(" + x + ");";
      default: return buffer + "[int(" + i + ")] = " + x + ";";
    }
    if (st.pack == 1) return buffer + "[int(" + i + ")] = " + st.type + "(" + bits + ");";
    // Packed: this element's bits of the shared word, replaced atomically (neighbours may be
    // written by other invocations at the same time).
    const std::string shift = st.pack == 2 ? "(uint(" + i + " & 1l) * 16u)" : "(uint(" + i + " & 3l) * 8u)";
    const std::string word = buffer + "[int(" + i + (st.pack == 2 ? " >> 1)]" : " >> 2)]");
    const std::string mask = st.pack == 2 ? "0xffffu" : "0xffu";
    return "{ const uint kb = " + bits + "; atomicAnd(" + word + ", ~(" + mask + " << " + shift + ")); atomicOr(" + word +
           ", kb << " + shift + "); }";
  }
  std::string round_to(DType t, const std::string& x) const override {
    return t == DType::f16 ? "unpackHalf2x16(kiln_f2h(" + x + ")).x" : "uintBitsToFloat(kiln_f2bf(" + x + ") << 16)";
  }
  std::string wrap_i32(const std::string& x) const override { return "int64_t(int(" + x + "))"; }
  std::string ipow(const std::string& x, const std::string& y) const override { return "kiln_ipow(" + x + ", " + y + ")"; }
  std::string isnan(const std::string& x, CT) const override { return "isnan(" + x + ")"; }
  std::string symbol_name(SymbolId s) const override { return "pc.s" + std::to_string(s); }
};

// Column strategy: outer points per workgroup and groups of invocations splitting the inner dims:
// 8 groups, or 32 (1024 invocations) where the reduced extent is long enough to keep them busy
// and the device allows, so that few outer points (sum(x, 0) of [8192, 8192]: 256 workgroups)
// still have enough loads in flight.
constexpr int64_t kColumnLanes = 32;
// Shared memory the column combine may take (Vulkan guarantees 16 KiB per workgroup).
constexpr int64_t kSharedBudget = 16384;
// Largest row-reduction workgroup: 256 (each invocation then holds up to 32 elements of a cached
// row; measured on the H100 at the CUDA target's bandwidth).
constexpr int64_t kRowMaxBlock = 256;

// Invocations per workgroup of a row reduction: about 8 inner elements each, 32 to max.
int64_t row_block(int64_t inner, int64_t max) {
  int64_t b = 32;
  while (b < max && b * 8 < inner) b *= 2;
  return b;
}

// Vector accesses: kVec consecutive elements of the last domain dim per invocation and step, as
// one 16-byte load or store through a vec4/ivec4 view of the binding.
constexpr int kVec = 4;
const char* vec_type(DType t) {
  switch (t) {
    case DType::f32: return "vec4";
    case DType::i32: return "ivec4";
    default: return nullptr;
  }
}
constexpr const char* kLane[kVec] = {"x", "y", "z", "w"};
// Row cache: at most this many elements of a row per invocation kept in registers.
constexpr int64_t kMaxCachedItems = 32;

bool uses_dtype(const schedule::Schedule& s, const std::vector<int32_t>& bufs, const Kernel* k, DType t) {
  for (int32_t b : bufs)
    if (s.buffers[static_cast<size_t>(b)].dtype == t) return true;
  if (k)
    for (const Instr& in : k->instrs)
      if (in.dtype == t) return true;
  return false;
}

// The shader's head: version, extensions, workgroup size, bindings, push constants.
std::string shader_head(const schedule::Schedule& s, const std::vector<int32_t>& bufs, const std::vector<int32_t>& writes,
                        const Kernel* k, const GlslDialect& d, const std::string& name,
                        const std::set<int32_t>& vector_views = {}) {
  const DeviceCaps& caps = d.caps;
  const bool f64 = uses_dtype(s, bufs, k, DType::f64);
  KILN_CHECK(!f64 || caps.float64, "vulkan codegen: kernel ", name,
             " computes in f64, but the device has no shaderFloat64 (Vulkan feature); run it on the CPU or cast to f32");
  KILN_CHECK(caps.int64, "vulkan codegen: kernel ", name,
             ": the device has no shaderInt64 (Vulkan feature), which Kiln's shaders need for sizes and integers");
  std::ostringstream h;
  h << "#version 450\n";
  h << "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n";
  bool any16 = false, any8 = false;
  for (int32_t b : bufs) {
    const DType t = s.buffers[static_cast<size_t>(b)].dtype;
    any16 = any16 || ((t == DType::f16 || t == DType::bf16) && caps.storage16);
    any8 = any8 || (t == DType::bool_ && caps.storage8);
  }
  if (any16) h << "#extension GL_EXT_shader_16bit_storage : require\n";
  if (any8) h << "#extension GL_EXT_shader_8bit_storage : require\n";
  if (caps.denorm_preserve || caps.nan_preserve) {
    // Float controls as SPIR-V execution modes (capability DenormPreserve 4464 / mode 4459,
    // SignedZeroInfNanPreserve 4466 / 4461), for 32-bit floats.
    h << "#extension GL_EXT_spirv_intrinsics : require\n";
    if (caps.denorm_preserve) h << "spirv_execution_mode(capabilities = [4464], 4459, 32);\n";
    if (caps.nan_preserve) h << "spirv_execution_mode(capabilities = [4466], 4461, 32);\n";
  }
  h << "// kernel\n";  // (no name: see name_buffers_by_binding)
  h << "layout(local_size_x_id = 0) in;\n";
  for (size_t i = 0; i < bufs.size(); ++i) {
    const int32_t b = bufs[i];
    const bool written = std::find(writes.begin(), writes.end(), b) != writes.end();
    // restrict: a kernel's bindings never overlap (distinct plan buffers; only read-only inputs
    // may be the same tensor), so loads may move past stores to other buffers.
    h << "layout(std430, set = 0, binding = " << i << ") restrict " << (written ? "" : "readonly ") << "buffer B" << b << " { "
      << storage_of(s.buffers[static_cast<size_t>(b)].dtype, caps).type << " b" << b << "[]; };\n";
    // The same binding as 4-element vectors (vector accesses; the runtime binds at offsets that
    // are multiples of 16 bytes).
    if (vector_views.count(b))
      h << "layout(std430, set = 0, binding = " << i << ") restrict " << (written ? "" : "readonly ") << "buffer B" << b
        << "v { " << vec_type(s.buffers[static_cast<size_t>(b)].dtype) << " b" << b << "v[]; };\n";
    // The same binding as uints, for the compare-and-swap of f32 atomic combines (a scatter's store).
    bool accumulated = false;
    if (k)
      for (const schedule::Store& st : k->stores)
        accumulated = accumulated || (st.combine != schedule::Combine::none && st.buffer == b);
    if (accumulated && s.buffers[static_cast<size_t>(b)].dtype == DType::f32)
      h << "layout(std430, set = 0, binding = " << i << ") buffer B" << b << "u { uint b" << b << "u[]; };\n";
  }
  std::string pcs;
  for (const SymbolInfo& sym : s.graph.shapes().symbols()) pcs += " int64_t s" + std::to_string(sym.id) + ";";
  for (const auto& [b, n] : d.offsets) pcs += " int64_t o" + std::to_string(b) + ";";
  h << "layout(push_constant) uniform PC {" << pcs << " int64_t kz; } pc;\n";
  return h.str();
}

// Every `(c ? x : y)` of a kernel body as `mix(y, x, c)` (an OpSelect). glslang turns a ternary
// whose operands are not plain names into branches and a phi, and lavapipe (Mesa 22.3) computes
// 64-bit phis after divergent branches wrongly (integer abs/relu/sign gave x for negative x);
// selects are also what a SIMD device wants. Every ternary of a body has pure operands (loads are
// bound to temporaries first) and is parenthesised, as the C-style printer and this file write them.
std::string selects(std::string s) {
  for (size_t q = s.rfind('?'); q != std::string::npos; q = s.rfind('?')) {
    // The enclosing '(' of the last '?', and the ':' and ')' that close it.
    size_t open = q;
    int depth = 0;
    while (open-- > 0) {
      if (s[open] == ')') depth += 1;
      else if (s[open] == '(') {
        if (depth == 0) break;
        depth -= 1;
      }
    }
    KILN_CHECK(open != std::string::npos, "vulkan codegen: an unparenthesised ?: in a kernel body, at '",
               s.substr(q > 60 ? q - 60 : 0, 120), "'");
    size_t colon = std::string::npos, close = q + 1;
    depth = 0;
    for (; close < s.size(); ++close) {
      const char c = s[close];
      if (c == '(') depth += 1;
      else if (c == ')') {
        if (depth == 0) break;
        depth -= 1;
      } else if (c == ':' && depth == 0 && colon == std::string::npos) colon = close;
    }
    KILN_CHECK(colon != std::string::npos && close < s.size(), "vulkan codegen: a malformed ?: in a kernel body");
    const std::string cond = s.substr(open + 1, q - open - 1), x = s.substr(q + 1, colon - q - 1),
                      y = s.substr(colon + 1, close - colon - 1);
    s = s.substr(0, open) + "mix(" + y + ", " + x + ", " + cond + ")" + s.substr(close + 1);
  }
  return s;
}

// The helpers the body calls (and theirs), in dependency order.
std::string helpers_for(const std::string& body) {
  std::set<std::string> need;
  std::function<void(const std::string&)> add = [&](const std::string& name) {
    if (!need.insert(name).second) return;
    for (const detail::Helper& h : detail::kHelpers) {
      if (name != h.name) continue;
      std::istringstream deps(h.deps);
      std::string dname;
      while (deps >> dname) add(dname);
    }
  };
  for (const detail::Helper& h : detail::kHelpers)
    if (body.find(std::string(h.name) + "(") != std::string::npos) add(h.name);
  std::string out;
  for (const detail::Helper& h : detail::kHelpers)  // the table lists callees before callers
    if (need.count(h.name)) out += h.code;
  return out;
}

// How a flat index is split into per-dim indices. NVIDIA's Vulkan compiler (driver 580, H200)
// gets chains of int64 divisions by constants wrong: a batched gemm's `bt % 3, bt / 3 % 2` and a
// rank-5 broadcast's `i / 5, i - (i / 5) * 5, ...` gave wrong indices, each where the other form
// was right, and lavapipe both (docs/vulkan.md). 32-bit arithmetic, which every shader uses, was
// right in both, and is several times cheaper than 64-bit division on a GPU. Every buffer a
// shader indexes holds < 2^32 elements (maxStorageBufferRange), but an iteration domain (a
// reduction of a broadcast) may not: such kernels keep 64-bit division.
enum class IndexWidth {
  narrow,   // the domain has < 2^32 elements: 32-bit
  wide,     // statically >= 2^32: 64-bit
  runtime,  // symbolic: the kernel's `narrow` flag picks (a uniform branch)
};

IndexWidth index_width(const SymInt& domain_size) {
  if (!domain_size.is_static()) return IndexWidth::runtime;
  return domain_size.hint() < (int64_t{1} << 32) ? IndexWidth::narrow : IndexWidth::wide;
}

// Statements splitting `flat` (an int64 expression, < the product of `extents`) into one int64
// index per extent (outermost first), into `index`; temporaries are named <prefix><k>.
std::vector<std::string> split_index(const std::string& flat, const std::vector<std::string>& extents, IndexWidth w,
                                     const std::string& prefix, std::vector<std::string>& index) {
  std::vector<std::string> lines;
  const size_t n = extents.size();
  index.assign(n, "");
  if (n == 0) return lines;
  if (n == 1) {
    index[0] = flat;
    return lines;
  }
  auto name = [&](const std::string& what, size_t d) { return prefix + what + std::to_string(d); };
  if (w == IndexWidth::narrow) {
    std::string rest = name("u", n);
    lines.push_back("const uint " + rest + " = uint(" + flat + ");");
    for (size_t d = n; d-- > 1;) {
      const std::string q = name("q", d), e = "uint(" + extents[d] + ")";
      lines.push_back("const uint " + q + " = " + rest + " / " + e + ";");
      lines.push_back("const int64_t " + name("i", d) + " = int64_t(" + rest + " - " + q + " * " + e + ");");
      index[d] = name("i", d);
      rest = q;
    }
    index[0] = "int64_t(" + rest + ")";
    return lines;
  }
  std::string rest = flat;
  for (size_t d = n; d-- > 1;) {
    const std::string q = name("q", d), r = name("i", d), e = extents[d];
    if (w == IndexWidth::wide) {
      lines.push_back("const int64_t " + r + " = " + rest + " % " + e + ";");
      lines.push_back("const int64_t " + q + " = " + rest + " / " + e + ";");
    } else {
      lines.push_back("int64_t " + q + ", " + r + ";");
      lines.push_back("if (narrow) { const uint u = uint(" + rest + "), v = uint(" + e + "); " + q + " = int64_t(u / v); " + r +
                      " = int64_t(u - (u / v) * v); } else { " + r + " = " + rest + " % " + e + "; " + q + " = " + rest +
                      " / " + e + "; }");
    }
    index[d] = r;
    rest = q;
  }
  index[0] = rest;
  return lines;
}

// The `narrow` flag split_index reads where the width is decided at run time.
std::string narrow_flag(const std::string& domain_size) {
  return "const bool narrow = " + domain_size + " < 4294967296l;";
}

class KernelEmitter {
 public:
  KernelEmitter(const Kernel& k, const schedule::Schedule& s, const CodegenOptions& o, const GlslDialect& d)
      : k_(k), s_(s), o_(o), d_(d), p_(k, s, d, o.emulate_precision_casts) {}

  // A gemm kernel's epilogue as a function of its gemm shader, which calls it for each element of
  // C it holds instead of storing C for a pointwise kernel to read back (fusable_epilogue):
  // kiln_epilogue(i, kiln_c) computes and stores the kernel's outputs at flat index i of its
  // domain, every load of C being kiln_c. Its helper functions come before it.
  std::string epilogue_function(const std::string& c_type) {
    const size_t n = k_.domain.size();
    domain_size_ = 1;
    for (const SymInt& e : k_.domain) domain_size_ = domain_size_ * e;
    width_ = index_width(domain_size_);
    if (width_ == IndexWidth::runtime) p_.line(narrow_flag(p_.sym(domain_size_)));
    p_.narrow_indices = narrow_affine_indices();
    for (size_t i = 0; i < k_.instrs.size(); ++i)
      if (k_.instrs[i].kind == InstrKind::load && k_.instrs[i].buffer == k_.gemm->c) p_.load_reads()[static_cast<int32_t>(i)] = "kiln_c";
    Scope sc;
    sc.vars.assign(n, "");
    if (n > 0) unflatten("i", 0, n, sc);
    for (const schedule::Store& st : k_.stores) p_.store(st, sc);
    const std::string body = selects(p_.out().str());
    return helpers_for(body) + "void kiln_epilogue(int64_t i, " + c_type + " kiln_c) {\n" + body + "}\n";
  }

  std::string emit(plan::PlanLaunch& launch, const std::vector<int32_t>& bindings, const std::vector<int32_t>& writes) {
    const int64_t block = block_ = choose_block();
    domain_size_ = 1;
    for (const SymInt& e : k_.domain) domain_size_ = domain_size_ * e;
    width_ = index_width(domain_size_);
    if (width_ == IndexWidth::runtime) p_.line(narrow_flag(p_.sym(domain_size_)));
    p_.narrow_indices = narrow_affine_indices();
    // Loop variables in 32 bits too where they stay far below 2^31 (a grid-stride loop steps
    // past the domain's end by up to unroll * kVec * the invocations: < 2^30 more), unless an
    // index instruction reads them as i64 values: lavapipe (Mesa 22.3) then compared the widened
    // value with constants wrongly (cat and pad cases).
    narrow_loops_ = p_.narrow_indices && domain_size_.is_static() && domain_size_.hint() <= (int64_t{1} << 30) &&
                    std::none_of(k_.instrs.begin(), k_.instrs.end(), [](const Instr& in) { return in.kind == InstrKind::index; });
    launch.block = block;
    launch.max_blocks = o_.max_workgroups;
    if (k_.kind == KernelKind::reduction && k_.num_passes() > 0) {
      if (uses_column_strategy(k_)) {
        launch.items_per_block = kColumnLanes;
        emit_column(block / kColumnLanes);
      } else {
        emit_row();
      }
    } else {
      launch.items_per_block = block * o_.pointwise_items_per_thread;
      emit_pointwise();
    }
    const std::string body = selects(p_.out().str());
    std::string shared;
    for (const std::string& l : shared_) shared += l + "\n";
    std::set<int32_t> views;
    for (int32_t i : vec_loads_) views.insert(k_.instrs[static_cast<size_t>(i)].buffer);
    for (size_t si : vec_stores_) views.insert(k_.stores[si].buffer);
    std::string head = shader_head(s_, bindings, writes, &k_, d_, k_.name, views);
    if (unroll_used_) head.insert(head.find("// kernel\n"), "#extension GL_EXT_control_flow_attributes : require\n");
    if (subgroup_used_) {
      const size_t at = head.find("// kernel\n");
      head.insert(at, "#extension GL_KHR_shader_subgroup_basic : require\n#extension GL_KHR_shader_subgroup_vote : require\n"
                      "#extension GL_KHR_shader_subgroup_arithmetic : require\n");
    }
    return head + shared + helpers_for(body) + "void main() {\n" + body + "}\n";
  }

 private:
  const Kernel& k_;
  const schedule::Schedule& s_;
  const CodegenOptions& o_;
  const GlslDialect& d_;
  KernelPrinter p_;
  cstyle::Reductions red_{p_};
  std::vector<std::string> shared_;
  bool subgroup_used_ = false;
  bool unroll_used_ = false;  // [[unroll]] (GL_EXT_control_flow_attributes)
  int64_t block_ = 0;         // the workgroup size (choose_block), set by emit
  SymInt domain_size_ = 1;    // the product of the domain's extents, set by emit
  IndexWidth width_ = IndexWidth::narrow;  // of the flat indices unflatten splits, set by emit
  bool narrow_loops_ = false;              // loop variables as int (set by emit)
  int splits_ = 0;                         // unflatten calls so far (names its temporaries)


  int64_t choose_block() const {
    if (k_.kind != KernelKind::reduction || k_.num_passes() == 0) return std::min(o_.pointwise_block, o_.caps.max_workgroup);
    const int64_t inner = inner_extent().evaluate(s_.graph.shapes().examples());
    if (uses_column_strategy(k_)) {
      int64_t state_bytes = 0;
      for (size_t i = 0; i < k_.instrs.size(); ++i)
        if (k_.instrs[i].kind == InstrKind::reduce)
          for (const Component& c : red_.state(static_cast<int32_t>(i), "")) state_bytes += c.ct == CT::f64 || c.ct == CT::i64 ? 8 : 4;
      const int64_t wide = kColumnLanes * 32;
      if (inner >= 1024 && wide <= o_.caps.max_workgroup && state_bytes * wide <= kSharedBudget) return wide;
      return kColumnLanes * std::clamp<int64_t>(o_.caps.max_workgroup / kColumnLanes, 1, 8);
    }
    return row_block(inner, std::min(kRowMaxBlock, o_.caps.max_workgroup));
  }

  SymInt inner_extent() const { return cstyle::inner_extent(k_); }

  // The loop variables' type, an integer literal and a size of that type.
  std::string ix() const { return narrow_loops_ ? "int" : "int64_t"; }
  std::string il(int64_t v) const { return std::to_string(v) + (narrow_loops_ ? "" : "l"); }
  std::string isym(const SymInt& s) const { return narrow_loops_ ? "int(" + p_.sym(s) + ")" : p_.sym(s); }

  // Whether every buffer index of the kernel, and every partial sum of one, is below 2^31 for
  // certain (static sizes): then they are computed in 32-bit `int` (KernelPrinter::narrow_indices),
  // and, where the domain allows, the loop variables too (narrow_loops_). On the H200 (kiln run
  // --repeat of the plan) softmax of [8192, 8192] took 0.157 ms with 64-bit indices and loop
  // variables, the same with only the indices in 32 bits, and 0.138 with both.
  bool narrow_affine_indices() const {
    constexpr int64_t kLimit = int64_t{1} << 31;
    auto bounded = [&](const schedule::Affine& a) {
      if (!a.offset.is_static()) return false;
      int64_t bound = std::abs(a.offset.hint());
      for (size_t v = 0; v < a.coeffs.size(); ++v) {
        if (a.coeffs[v] == 0) continue;
        if (!a.coeffs[v].is_static() || !k_.domain[v].is_static()) return false;
        const int64_t c = std::abs(a.coeffs[v].hint()), e = std::max<int64_t>(k_.domain[v].hint() - 1, 0);
        if (e > 0 && c > (kLimit - bound) / e) return false;
        bound += c * e;
      }
      return bound < kLimit;
    };
    for (const Instr& in : k_.instrs)
      if ((in.kind == InstrKind::load || in.kind == InstrKind::index) && !bounded(in.index)) return false;
    for (const schedule::Store& st : k_.stores)
      if (!bounded(st.index)) return false;
    return true;
  }

  // Binds the indices of domain dims [first, last) from their flat index (see split_index).
  void unflatten(const std::string& flat, size_t first, size_t last, Scope& sc) {
    std::vector<std::string> extents, index;
    for (size_t d = first; d < last; ++d) extents.push_back(p_.sym(k_.domain[d]));
    for (const std::string& l : split_index(flat, extents, width_, "x" + std::to_string(splits_++) + "_", index)) p_.line(l);
    for (size_t d = first; d < last; ++d) sc.vars[d] = index[d - first];
  }

  // ---- vector accesses ----
  // The loads (instructions) and stores (indices into k_.stores) done kVec elements at a time:
  // f32/i32 buffers read with unit stride in the last domain dim, whose extent is a static
  // multiple of kVec (a group never crosses a row), the other strides and the offset multiples of
  // kVec (where they are sizes, checked once per invocation into `vec`; where it fails the group's
  // elements go one by one, with the same results). Not for buffers read at a push-constant offset.
  size_t vd_ = 0;
  std::set<int32_t> vec_loads_;
  std::set<size_t> vec_stores_;

  bool plan_vectors(size_t first_dim, bool inner_only) {
    vec_loads_.clear();
    vec_stores_.clear();
    if (!o_.vector_accesses) return false;
    // (the binding is 16-byte aligned by the runtime; buffers at a push-constant offset stay scalar)
    const std::optional<cstyle::VectorPlan> plan = cstyle::plan_vectors(
        k_, first_dim, inner_only, kVec,
        [&](int32_t b) { return vec_type(p_.buffer_dtype(b)) != nullptr && !d_.offsets.count(b); });
    if (!plan) return false;
    vd_ = plan->dim;
    vec_loads_ = plan->loads;
    vec_stores_ = plan->stores;
    p_.line("const bool vec = " + plan->flag(p_) + ";");
    return true;
  }

  // Lane c of a loaded vector as the buffer dtype's compute type (like Dialect::load).
  std::string lane_value(DType t, const std::string& v, int c) const {
    const std::string e = v + "." + kLane[c];
    return t == DType::i32 ? "int64_t(" + e + ")" : e;
  }
  // A temporary holding an affine index: `int` where the kernel's indices are narrow.
  std::string index_let(const schedule::Affine& a, const Scope& sc) {
    if (!p_.narrow_indices) return p_.let(CT::i64, p_.affine(a, sc));
    const std::string name = p_.temp();
    p_.line("const int " + name + " = " + p_.affine(a, sc) + ";");
    return name;
  }
  // `vecN name` holding the kVec elements of load i from the group at scope base.
  void vector_load(int32_t i, const Scope& base, const std::string& name) {
    const Instr& in = k_.instrs[static_cast<size_t>(i)];
    const std::string vt = vec_type(p_.buffer_dtype(in.buffer)), at = index_let(in.index, base);
    const std::string buf = d_.buffer_name(in.buffer);
    std::string scalar;
    for (int c = 0; c < kVec; ++c)
      scalar += std::string(c ? ", " : "") + buf + "[int(" + at + (c ? " + " + std::to_string(c) : "") + ")]";
    // (an if, not a ternary: the kernel body's ternaries become selects, which load both forms)
    p_.line(vt + " " + name + ";");
    p_.line("if (vec) " + name + " = " + buf + "v[int(" + at + " >> 2)]; else " + name + " = " + vt + "(" + scalar + ");");
  }
  void vector_store(size_t si, const Scope& base, const std::string& name) {
    const schedule::Store& st = k_.stores[si];
    const std::string at = index_let(st.index, base);
    const std::string buf = d_.buffer_name(st.buffer);
    std::string scalar;
    for (int c = 0; c < kVec; ++c)
      scalar += " " + buf + "[int(" + at + (c ? " + " + std::to_string(c) : "") + ")] = " + name + "." + kLane[c] + ";";
    p_.line("if (vec) " + buf + "v[int(" + at + " >> 2)] = " + name + "; else {" + scalar + " }");
  }
  // Component c of a vector store: the store's value at scope sc.
  void vector_store_lane(size_t si, Scope& sc, const std::string& name, int c) {
    const schedule::Store& st = k_.stores[si];
    const DType t = p_.buffer_dtype(st.buffer);
    const Value x = p_.convert(p_.value(st.value, sc), cstyle::compute_type(t));
    p_.line(name + "." + kLane[c] + " = " + (t == DType::i32 ? "int(" + x.v + ")" : x.v) + ";");
  }
  // The scope of element c of the group at base (the last dim's variable advanced by c).
  Scope lane_scope(const Scope& base, int c) const {
    Scope sc = base.child();
    if (c > 0) sc.vars[vd_] = "(" + base.vars[vd_] + " + " + std::to_string(c) + "l)";
    return sc;
  }
  // One group of kVec elements at the scope base: vector loads (those in `cached` are read from
  // registers instead: lane c of load i is `cached[i] + c + "]"`), then per lane `extra(scope,
  // lane)` (a row pass's reductions) and the stores for which `store_here` holds (vector stores
  // assembled lane by lane). `fresh_out` gets the vectors loaded here.
  // With `exact_again` (a pointwise group: no `extra`) and every store a vector store, the lanes
  // call the fast variants of helpers that have one (kFastVariants) and are computed again with
  // the exact helpers, before anything is stored, only when one of them set kiln_inexact: one
  // branch per group instead of one per call (see glsl_helpers.h, sin/cos).
  void vector_group(const Scope& base, const std::set<int32_t>& loads, const std::map<int32_t, std::string>& cached,
                    const std::function<bool(size_t)>& store_here, const std::function<void(Scope&, int)>& extra,
                    std::map<int32_t, std::string>* fresh_out = nullptr, bool exact_again = false) {
    std::map<int32_t, std::string> fresh;
    for (int32_t li : loads) {
      if (!vec_loads_.count(li) || cached.count(li)) continue;
      vector_load(li, base, fresh[li] = p_.temp("vl"));
    }
    std::map<size_t, std::string> vs;
    for (size_t si : vec_stores_)
      if (store_here(si)) p_.line(std::string(vec_type(p_.buffer_dtype(k_.stores[si].buffer))) + " " + (vs[si] = p_.temp("vs")) + ";");
    for (size_t si = 0; si < k_.stores.size(); ++si) exact_again = exact_again && (!store_here(si) || vs.count(si));
    const std::streamoff lanes_start = exact_again ? static_cast<std::streamoff>(p_.out().tellp()) : 0;
    for (int c = 0; c < kVec; ++c) {
      p_.line("{");
      p_.indent();
      p_.load_reads().clear();
      for (const auto& [li, slot] : cached) p_.load_reads()[li] = slot + std::to_string(c) + "]";
      for (const auto& [li, name] : fresh)
        p_.load_reads()[li] = lane_value(p_.buffer_dtype(k_.instrs[static_cast<size_t>(li)].buffer), name, c);
      Scope sc = lane_scope(base, c);
      extra(sc, c);
      for (size_t si = 0; si < k_.stores.size(); ++si) {
        if (!store_here(si)) continue;
        if (vs.count(si)) vector_store_lane(si, sc, vs[si], c);
        else p_.store(k_.stores[si], sc);
      }
      p_.dedent();
      p_.line("}");
    }
    if (exact_again) fast_then_exact(lanes_start);
    p_.load_reads().clear();
    for (const auto& [si, name] : vs) vector_store(si, base, name);
    if (fresh_out) *fresh_out = fresh;
  }
  // The lanes printed from `lanes_start` on (a position in the printer's text): with fast
  // variants first, then, when one of them flagged, again as printed (vector_group, exact_again).
  void fast_then_exact(std::streamoff lanes_start) {
    std::string text = p_.out().str();
    const std::string exact = text.substr(static_cast<size_t>(lanes_start));
    std::string fast = exact;
    for (const detail::FastVariant& f : detail::kFastVariants)
      for (size_t at = 0; (at = fast.find(std::string(f.exact) + "(", at)) != std::string::npos; at += std::strlen(f.fast))
        fast.replace(at, std::strlen(f.exact), f.fast);
    if (fast == exact) return;
    std::string again;
    std::istringstream lines(exact);
    for (std::string l; std::getline(lines, l);) again += "  " + l + "\n";
    text.resize(static_cast<size_t>(lanes_start));
    p_.out().str(text);
    p_.out().seekp(0, std::ios_base::end);
    p_.line("kiln_inexact = 0u;");
    p_.out() << fast;
    p_.line("if (kiln_inexact != 0u) {");
    p_.out() << again;
    p_.line("}");
  }

  void emit_pointwise() {
    const size_t n = k_.domain.size();
    p_.line("const " + ix() + " total = " + isym(domain_size_) + ";");
    p_.line("const " + ix() + " stride = " + ix() + "(gl_NumWorkGroups.x) * " + ix() + "(gl_WorkGroupSize.x);");
    if (plan_vectors(0, false)) {
      // Each invocation takes kVec consecutive elements (one vector per access) per step.
      p_.line(ix() + " i = " + ix() + "(gl_GlobalInvocationID.x) * " + il(kVec) + ";");
      unrolled("i", "total", "(stride * " + il(kVec) + ")", [&](const std::string& i) {
        Scope base;
        base.vars.assign(n, "");
        unflatten(i, 0, n, base);
        vector_group(base, vec_loads_, {}, [](size_t) { return true; }, [](Scope&, int) {}, nullptr, true);
      });
      return;
    }
    auto body = [&](const std::string& i) {
      Scope sc;
      sc.vars.assign(n, "");
      if (n > 0) unflatten(i, 0, n, sc);
      for (const schedule::Store& st : k_.stores) p_.store(st, sc);
    };
    p_.line(ix() + " i = " + ix() + "(gl_GlobalInvocationID.x);");
    unrolled("i", "total", "stride", body);
  }

  // `for (; v < limit; v += step) body(v)`, with the first part unrolled by CodegenOptions::unroll:
  // the unrolled bodies' loads are independent, so each invocation has several in flight (one
  // 4-byte load per invocation at a time left a GPU far under its memory bandwidth). The order
  // of the bodies is the loop's, so reductions combine in the same order either way.
  void unrolled(const std::string& v, const std::string& limit, const std::string& step,
                const std::function<void(const std::string&)>& body) {
    const int64_t u = std::max<int64_t>(1, o_.unroll);
    if (u > 1) {
      p_.line("for (; " + v + " + " + il(u - 1) + " * " + step + " < " + limit + "; " + v + " += " + il(u) + " * " + step +
              ") {");
      p_.indent();
      for (int64_t c = 0; c < u; ++c) {
        p_.line("{");
        p_.indent();
        std::string vc = v;
        if (c > 0) {
          vc = v + "u" + std::to_string(c);
          p_.line("const " + ix() + " " + vc + " = " + v + " + " + il(c) + " * " + step + ";");
        }
        body(vc);
        p_.dedent();
        p_.line("}");
      }
      p_.dedent();
      p_.line("}");
    }
    p_.line("for (; " + v + " < " + limit + "; " + v + " += " + step + ") {");
    p_.indent();
    body(v);
    p_.dedent();
    p_.line("}");
  }

  // ---- reductions (state, identity, fold and finish: cstyle::Reductions) ----

  // Shared arrays (one per state component) of the workgroup's size.
  void shared_arrays(int32_t r) {
    for (const Component& c : red_.state(r, "sh" + std::to_string(r)))
      shared_.push_back("shared " + d_.type(c.ct) + " " + c.name + "[gl_WorkGroupSize.x];");
  }

  // Tree combine of every invocation's state in shared memory over `width` entries with
  // `stride` between the combined entries' groups (row: all invocations; column: the groups of
  // each lane). Leaves the result in entry `base`.
  void tree_combine(int32_t r, const std::vector<Component>& a, const std::vector<Component>& sh, const std::string& me,
                    const std::string& count, const std::string& scale, const std::string& guard) {
    for (size_t i = 0; i < a.size(); ++i) p_.line(sh[i].name + "[gl_LocalInvocationID.x] = " + a[i].name + ";");
    p_.line("barrier();");
    p_.line("for (uint h = " + count + " / 2u; h > 0u; h >>= 1) {");
    p_.indent();
    p_.line("if (" + me + " < h" + guard + ") {");
    p_.indent();
    std::vector<std::string> other;
    for (const Component& c : sh) other.push_back(c.name + "[gl_LocalInvocationID.x + h" + scale + "]");
    red_.merge(r, a, other);
    for (size_t i = 0; i < a.size(); ++i) p_.line(sh[i].name + "[gl_LocalInvocationID.x] = " + a[i].name + ";");
    p_.dedent();
    p_.line("}");
    p_.line("barrier();");
    p_.dedent();
    p_.line("}");
  }

  // Whether reduction r's state can be combined with subgroup arithmetic: sum, prod, max, min of
  // float values (f32/f64, whose max/min never hold NaN: NaN is the separate flag, combined with
  // subgroupAny), but not compensated sums. Integer states (64-bit subgroup arithmetic is an extension) and arg-reductions
  // (index ties) use the shared-memory tree.
  bool subgroup_combinable(int32_t r) const {
    if (!o_.caps.subgroup) return false;
    const Instr& in = k_.instrs[static_cast<size_t>(r)];
    if (in.reduce == ReduceKind::argmax || in.reduce == ReduceKind::argmin) return false;
    if (red_.compensated(r)) return false;  // two sums, folded together: the shared-memory tree
    const std::vector<Component> st = red_.state(r, "");
    return st[0].ct == CT::f32 || st[0].ct == CT::f64;
  }

  // Subgroup combine, then a shared-memory tree over the subgroups' partials (any count, not only
  // powers of two); the result in entry 0. Every invocation of the workgroup runs it.
  void subgroup_combine(int32_t r, const std::vector<Component>& a, const std::vector<Component>& sh) {
    subgroup_used_ = true;
    const Instr& in = k_.instrs[static_cast<size_t>(r)];
    const char* op = in.reduce == ReduceKind::sum ? "subgroupAdd" : in.reduce == ReduceKind::prod ? "subgroupMul"
                     : in.reduce == ReduceKind::max ? "subgroupMax" : "subgroupMin";
    p_.line(a[0].name + " = " + op + "(" + a[0].name + ");");
    if (a.size() == 2) p_.line(a[1].name + " = subgroupAny(" + a[1].name + ");");
    p_.line("if (subgroupElect()) {");
    for (size_t i = 0; i < a.size(); ++i) p_.line("  " + sh[i].name + "[gl_SubgroupID] = " + a[i].name + ";");
    p_.line("}");
    p_.line("barrier();");
    p_.line("for (uint n = gl_NumSubgroups; n > 1u; n = (n + 1u) / 2u) {");
    p_.indent();
    p_.line("const uint h = (n + 1u) / 2u;");
    p_.line("if (gl_LocalInvocationID.x + h < n) {");
    p_.indent();
    for (size_t i = 0; i < a.size(); ++i) p_.line(a[i].name + " = " + sh[i].name + "[gl_LocalInvocationID.x];");
    std::vector<std::string> other;
    for (const Component& c : sh) other.push_back(c.name + "[gl_LocalInvocationID.x + h]");
    red_.merge(r, a, other);
    for (size_t i = 0; i < a.size(); ++i) p_.line(sh[i].name + "[gl_LocalInvocationID.x] = " + a[i].name + ";");
    p_.dedent();
    p_.line("}");
    p_.line("barrier();");
    p_.dedent();
    p_.line("}");
  }

  // Each reduction of a pass combined by `combine(r, state, shared)`, which leaves the result in
  // the shared arrays' entry `entry`; the result `r<id>` for the passes and stores after it.
  void combine_pass(const std::vector<int32_t>& reds, const std::string& entry,
                    const std::function<void(int32_t, const std::vector<Component>&, const std::vector<Component>&)>& combine) {
    for (int32_t r : reds) {
      const std::string id = std::to_string(r);
      const std::vector<Component> a = red_.state(r, "a" + id), sh = red_.state(r, "sh" + id);
      combine(r, a, sh);
      std::vector<std::string> fin;
      for (const Component& c : sh) fin.push_back(c.name + "[" + entry + "]");
      const CT rc = cstyle::compute_type(k_.instrs[static_cast<size_t>(r)].dtype);
      p_.line("const " + d_.type(rc) + " r" + id + " = " + red_.finish(r, fin) + ";");
      p_.line("barrier();");
      p_.reduction_results()[r] = "r" + id;
    }
  }
  // A row pass's combine: over the whole workgroup, subgroups first where they can.
  void combine_row_pass(const std::vector<int32_t>& reds) {
    combine_pass(reds, "0", [&](int32_t r, const std::vector<Component>& a, const std::vector<Component>& sh) {
      if (subgroup_combinable(r))
        subgroup_combine(r, a, sh);
      else
        tree_combine(r, a, sh, "lid", "gl_WorkGroupSize.x", "", "");
    });
  }

  // How many steps of `width` elements each invocation takes over a cached row (0: the row is
  // not cached: fewer than two passes, a dynamic row or too many elements per invocation).
  int64_t cached_steps(int64_t width) const {
    if (!o_.cache_rows || k_.num_passes() < 2 || !inner_extent().is_static()) return 0;
    const int64_t steps = (inner_extent().hint() + block_ * width - 1) / (block_ * width);
    return steps * width <= kMaxCachedItems ? steps : 0;
  }
  // `[[unroll]] for (k < steps)` over a cached row, j the first element of the invocation's step.
  void open_cached_loop(int64_t steps, int64_t width) {
    unroll_used_ = true;
    p_.line("[[unroll]] for (int k = 0; k < " + std::to_string(steps) + "; ++k) {");
    p_.indent();
    p_.line("const " + ix() + " j = (" + ix() + "(lid) + " + ix() + "(k) * " + il(block_) + ") * " + il(width) + ";");
    p_.line("if (j < inner_total) {");
    p_.indent();
  }
  void close_cached_loop() {
    p_.dedent();
    p_.line("}");
    p_.dedent();
    p_.line("}");
  }

  void emit_row() {
    const size_t n = k_.domain.size(), no = static_cast<size_t>(k_.num_outer);
    const int32_t passes = k_.num_passes();
    for (int32_t pass = 0; pass < passes; ++pass)
      for (int32_t r : cstyle::reductions_of_pass(k_, pass)) shared_arrays(r);
    p_.line("const " + ix() + " outer_total = " + isym(k_.outer_extent()) + ";");
    p_.line("const " + ix() + " inner_total = " + isym(inner_extent()) + ";");
    p_.line("const uint lid = gl_LocalInvocationID.x;");
    const bool vectors = plan_vectors(no, true);
    p_.line("for (" + ix() + " o = " + ix() + "(gl_WorkGroupID.x); o < outer_total; o += " + ix() + "(gl_NumWorkGroups.x)) {");
    p_.indent();
    Scope outer;
    outer.vars.assign(n, "");
    if (no > 0) unflatten("o", 0, no, outer);
    if (vectors) emit_row_vector_passes(outer);
    else emit_row_scalar_passes(outer);
    cstyle::store_outer(p_, outer, "lid == 0u");
    p_.dedent();
    p_.line("}");
  }

  // The passes one element at a time; a cached row's elements kept in `lc<load>[k]` from the pass
  // that first loads them.
  void emit_row_scalar_passes(Scope& outer) {
    const size_t n = k_.domain.size(), no = static_cast<size_t>(k_.num_outer);
    const int64_t steps = cached_steps(1);
    std::vector<int32_t> cached;
    if (steps > 0)
      for (size_t i = 0; i < k_.instrs.size(); ++i)
        if (k_.instrs[i].kind == InstrKind::load && k_.instrs[i].inner) cached.push_back(static_cast<int32_t>(i));
    for (int32_t i : cached) cstyle::declare_row_cache(p_, i, steps);
    for (int32_t pass = 0; pass < k_.num_passes(); ++pass) {
      const std::vector<int32_t> reds = cstyle::reductions_of_pass(k_, pass);
      for (int32_t r : reds) red_.declare(r);
      p_.line("{");
      p_.indent();
      if (!cached.empty()) {
        // Loads recorded in an earlier pass are read from the registers; the others load (and
        // record) as they are first needed.
        cstyle::cache_row_loads(p_, cached, "k");
        open_cached_loop(steps, 1);
        Scope sc = outer.child();
        unflatten("j", no, n, sc);
        red_.step(pass, reds, sc, "j");
        close_cached_loop();
      } else {
        p_.line(ix() + " j = " + ix() + "(lid);");
        unrolled("j", "inner_total", ix() + "(gl_WorkGroupSize.x)", [&](const std::string& j) {
          Scope sc = outer.child();
          unflatten(j, no, n, sc);
          red_.step(pass, reds, sc, j);
        });
      }
      p_.dedent();
      p_.line("}");
      combine_row_pass(reds);
      p_.bind_row_values(pass, outer);  // per-row values once per row (cstyle)
    }
    p_.load_reads().clear();
    p_.load_records().clear();
  }

  // The passes kVec consecutive elements of the row per invocation and step (vector loads and
  // stores); a cached row's elements kept in `lc<load>[k * kVec + lane]` from the pass that first
  // loads them.
  void emit_row_vector_passes(Scope& outer) {
    const size_t n = k_.domain.size(), no = static_cast<size_t>(k_.num_outer);
    const int64_t steps = cached_steps(kVec);
    const std::string V = std::to_string(kVec);
    // The vector loads a later pass reads again (only those are kept).
    std::set<int32_t> reread;
    if (steps > 0) {
      std::set<int32_t> seen;
      for (int32_t pass = 0; pass < k_.num_passes(); ++pass)
        for (int32_t li : cstyle::loads_of_pass(k_, pass))
          if (vec_loads_.count(li) && !seen.insert(li).second) reread.insert(li);
    }
    for (int32_t i : reread) cstyle::declare_row_cache(p_, i, steps * kVec);
    std::set<int32_t> in_registers;
    for (int32_t pass = 0; pass < k_.num_passes(); ++pass) {
      const std::vector<int32_t> reds = cstyle::reductions_of_pass(k_, pass);
      for (int32_t r : reds) red_.declare(r);
      p_.line("{");
      p_.indent();
      auto group = [&](const std::string& jg) {
        Scope base = outer.child();
        base.vars.assign(n, "");
        for (size_t d = 0; d < no; ++d) base.vars[d] = outer.vars[d];
        unflatten(jg, no, n, base);
        std::map<int32_t, std::string> fresh;
        const std::set<int32_t> loads = cstyle::loads_of_pass(k_, pass);
        vector_group_row(base, loads, in_registers, pass, reds, jg, &fresh);
        for (const auto& [li, name] : fresh)
          if (reread.count(li))
            for (int c = 0; c < kVec; ++c)
              p_.line("lc" + std::to_string(li) + "[k * " + V + " + " + std::to_string(c) + "] = " +
                      lane_value(p_.buffer_dtype(k_.instrs[static_cast<size_t>(li)].buffer), name, c) + ";");
        return fresh;
      };
      std::map<int32_t, std::string> fresh;
      if (steps > 0) {
        open_cached_loop(steps, kVec);
        fresh = group("j");
        close_cached_loop();
      } else {
        p_.line(ix() + " j = " + ix() + "(lid) * " + il(kVec) + ";");
        unrolled("j", "inner_total", "(" + ix() + "(gl_WorkGroupSize.x) * " + il(kVec) + ")", [&](const std::string& j) { group(j); });
      }
      for (const auto& [li, name] : fresh)
        if (reread.count(li)) in_registers.insert(li);
      p_.dedent();
      p_.line("}");
      combine_row_pass(reds);
      p_.bind_row_values(pass, outer);  // per-row values once per row (cstyle)
    }
  }

  // One group of a row pass: vector loads of the pass not yet in registers, then per lane the
  // pass's reductions and its inner stores (vector stores assembled lane by lane).
  void vector_group_row(const Scope& base, const std::set<int32_t>& loads, const std::set<int32_t>& in_registers, int32_t pass,
                        const std::vector<int32_t>& reds, const std::string& jg, std::map<int32_t, std::string>* fresh) {
    std::map<int32_t, std::string> slots;
    for (int32_t li : in_registers) slots[li] = "lc" + std::to_string(li) + "[k * " + std::to_string(kVec) + " + ";
    auto store_here = [&](size_t si) {
      const schedule::Store& st = k_.stores[si];
      return k_.store_is_inner(st) && k_.instrs[static_cast<size_t>(st.value)].pass == pass;
    };
    vector_group(base, loads, slots, store_here, [&](Scope& sc, int c) {
      const std::string j = c == 0 ? jg : "(" + jg + " + " + std::to_string(c) + "l)";
      for (int32_t r : reds) red_.fold(r, sc, j);
    }, fresh);
  }

  void emit_column(int64_t ngroups) {
    const size_t n = k_.domain.size(), no = static_cast<size_t>(k_.num_outer);
    const int32_t passes = k_.num_passes();
    const std::string lanes = std::to_string(kColumnLanes), groups = std::to_string(ngroups);
    for (int32_t pass = 0; pass < passes; ++pass)
      for (int32_t r : cstyle::reductions_of_pass(k_, pass)) shared_arrays(r);
    p_.line("const " + ix() + " outer_total = " + isym(k_.outer_extent()) + ";");
    p_.line("const " + ix() + " inner_total = " + isym(inner_extent()) + ";");
    p_.line("const uint klane = gl_LocalInvocationID.x % " + lanes + "u, kgroup = gl_LocalInvocationID.x / " + lanes + "u;");
    p_.line("for (" + ix() + " ob = " + ix() + "(gl_WorkGroupID.x) * " + il(kColumnLanes) + "; ob < outer_total; ob += " + ix() +
            "(gl_NumWorkGroups.x) * " + il(kColumnLanes) + ") {");
    p_.indent();
    p_.line("const " + ix() + " o = ob + " + ix() + "(klane);");
    p_.line("const bool kactive = o < outer_total;");
    Scope outer;
    outer.vars.assign(n, "");
    unflatten("o", 0, no, outer);
    for (int32_t pass = 0; pass < passes; ++pass) {
      const std::vector<int32_t> reds = cstyle::reductions_of_pass(k_, pass);
      for (int32_t r : reds) red_.declare(r);
      p_.line("if (kactive) {");
      p_.indent();
      p_.line(ix() + " j = " + ix() + "(kgroup);");
      unrolled("j", "inner_total", il(ngroups), [&](const std::string& j) {
        Scope sc = outer.child();
        unflatten(j, no, n, sc);
        red_.step(pass, reds, sc, j);
      });
      p_.dedent();
      p_.line("}");
      combine_pass(reds, "klane", [&](int32_t r, const std::vector<Component>& a, const std::vector<Component>& sh) {
        tree_combine(r, a, sh, "kgroup", groups + "u", " * " + lanes + "u", "");
      });
    }
    cstyle::store_outer(p_, outer, "kactive && kgroup == 0u");
    p_.dedent();
    p_.line("}");
  }
};

// The gemm shaders' blocking: a workgroup computes a bm x bn tile of C, each of its
// (bm / tm) * (bn / tn) invocations a tm x tn block of it in registers, over K in steps of bk
// staged through shared memory. An invocation's rows are 4 consecutive ones at 4 * trow, again
// bm / tm * 4 rows further, ... and likewise its columns: a warp's shared-memory reads are
// 4-element vectors, of B consecutive ones and of A a few broadcast ones.
struct GemmBlocking {
  int64_t bm, bn, tm, tn, bk;
  int64_t threads() const { return (bm / tm) * (bn / tn); }
};

// vulkan.gemm_blocking's BMxBN/TMxTN/BK (nullopt for 'auto'), parsed once per plan; the config
// checked its form, this the shapes the shader can run.
std::optional<GemmBlocking> forced_gemm_blocking(const std::string& text) {
  if (text == "auto") return std::nullopt;
  GemmBlocking b{};
  int end = 0;
  const bool parsed = std::sscanf(text.c_str(), "%" SCNd64 "x%" SCNd64 "/%" SCNd64 "x%" SCNd64 "/%" SCNd64 "%n", &b.bm,
                                  &b.bn, &b.tm, &b.tn, &b.bk, &end) == 5 && end == static_cast<int>(text.size());
  KILN_CHECK(parsed && b.bm > 0 && b.bn > 0 && b.tm > 0 && b.tn > 0 && b.bk > 0 && b.bm % b.tm == 0 &&
                 b.bn % b.tn == 0 && b.tm % 4 == 0 && b.tn % 4 == 0 && (b.bm * b.bk) % b.threads() == 0 &&
                 (b.bn * b.bk) % b.threads() == 0,
             "vulkan codegen: vulkan.gemm_blocking '", text, "' is not a blocking the gemm shader can run: it needs "
             "BMxBN/TMxTN/BK with TM and TN multiples of 4 dividing BM and BN, and BM * BK and BN * BK multiples "
             "of the invocations (BM/TM * BN/TN)");
  return b;
}

// The largest tile, up to 64 x 64 (4 x 4 per invocation, bk 16), that covers at most twice C's
// area (a skinny product, [1, K] @ [K, N], would otherwise spend a 64 x 64 tile's work on every
// row it has); smaller workgroups where the device allows fewer than 256 invocations. Measured on
// an H100 (driver 580, docs/vulkan.md): 8 x 8 blocks per invocation (128 x 128, 128 x 64, 64 x 64
// tiles) ran every model slower than 4 x 4 ones, vit_b_16 17.1 ms against 14.1.
// Sizes are the symbols' hints where symbolic.
GemmBlocking gemm_blocking(const plan::PlanGemm& g, const DeviceCaps& caps, const std::optional<GemmBlocking>& forced) {
  if (forced && forced->threads() <= caps.max_workgroup) return *forced;
  static constexpr GemmBlocking kBlockings[] = {{64, 64, 4, 4, 16}, {32, 32, 4, 4, 16}, {16, 16, 4, 4, 16}};
  const int64_t m = std::max<int64_t>(1, g.m.hint()), n = std::max<int64_t>(1, g.n.hint());
  for (const GemmBlocking& b : kBlockings) {
    if (b.threads() > caps.max_workgroup) continue;
    const int64_t tiles_m = (m + b.bm - 1) / b.bm, tiles_n = (n + b.bn - 1) / b.bn;
    if (tiles_m * b.bm * tiles_n * b.bn > 2 * m * n) continue;
    return b;
  }
  return kBlockings[2];
}

// The GEMM shader: C[b] = A[b] @ B[b] (C contiguous; A and B strided views), one tile of C per
// workgroup step over (batch, tile row, tile column), grid-stride; accumulation in the operands'
// type, in k order. Index arithmetic is 32-bit (every buffer holds < 2^32 elements; unsigned
// wrap-around gives the right index for negative strides too).
std::string gemm_shader(const schedule::Schedule& s, const plan::PlanGemm& g, const GemmBlocking& bl,
                        const plan::PlanKernel& pk, const GlslDialect& d, bool vector_loads, const Kernel* k = nullptr,
                        const std::string& epilogue = "", bool store_c = true) {
  KILN_CHECK(g.dtype == DType::f32 || g.dtype == DType::f64, "vulkan codegen: kernel ", pk.name, ": a gemm of ",
             dtype_name(g.dtype), " (only f32 and f64 gemms are generated)");
  KILN_INTERNAL_CHECK(g.epilogue.empty() && g.alpha == 1.0, "vulkan codegen: kernel ", pk.name,
                      ": a gemm with an epilogue or a scale (cuBLASLt's fusions)");
  const std::vector<int32_t> bufs = kernel_bindings(pk);
  const int64_t nt = bl.threads();
  // An operand whose k stride is 1 is loaded 4 consecutive k at a time, as one vec4 of its
  // binding's vector view, where the invocations load its tile's quads evenly and (checked per
  // tile: uniform) its base, its other stride and K are multiples of 4; else element by element.
  auto vectors = [&](const SymInt& k_stride, int64_t outer) {
    return vector_loads && g.dtype == DType::f32 && k_stride == 1 && bl.bk % 4 == 0 && (outer * bl.bk / 4) % nt == 0;
  };
  const bool a_vec = vectors(g.a_col_stride, bl.bm), b_vec = vectors(g.b_row_stride, bl.bn);
  std::set<int32_t> views;
  if (a_vec) views.insert(g.a);
  if (b_vec) views.insert(g.b);
  Kernel dummy;  // (shader_head looks at buffers only when given no kernel)
  std::string src = shader_head(s, bufs, pk.writes, k, d, pk.name, views);
  const std::string T = g.dtype == DType::f64 ? "double" : "float";
  const std::string zero = g.dtype == DType::f64 ? "0.0LF" : "0.0";
  KernelPrinter p(dummy, s, d);
  auto u = [&](const SymInt& x) { return "uint(" + p.sym(x) + ")"; };
  auto n = [](int64_t v) { return std::to_string(v) + "u"; };
  const std::string a = "b" + std::to_string(g.a), b = "b" + std::to_string(g.b), c = "b" + std::to_string(g.c);
  const std::string T4 = g.dtype == DType::f64 ? "dvec4" : "vec4";
  const int64_t rs = bl.bm / bl.tm, cs = bl.bn / bl.tn;
  KILN_INTERNAL_CHECK(bl.tm % 4 == 0 && bl.tn % 4 == 0 && (bl.bm * bl.bk) % nt == 0 && (bl.bn * bl.bk) % nt == 0,
                      "vulkan codegen: kernel ", pk.name, ": gemm blocking ", bl.bm, "x", bl.bn, " (", bl.tm, "x", bl.tn,
                      ", bk ", bl.bk, ") is not in 4x4 blocks or not loaded evenly by its invocations");
  // Which dim of an operand's tile consecutive invocations load: its unit-stride one (k for a
  // row-major A, a Linear's weight read as B), so a warp's loads are coalesced.
  const bool a_k_fast = g.a_col_stride == 1 || !(g.a_row_stride == 1);
  const bool b_n_fast = g.b_col_stride == 1 || !(g.b_row_stride == 1);
  std::ostringstream o;
  // k-major tiles of 4-element vectors, so that an invocation reads 4 rows of A and 4 columns of
  // B per shared-memory access (4 accesses per 64 fmas with 8 x 8 blocks, not 16). A k-fast load
  // writes a column of one; a row padded by one vector spreads its warp's words over the banks.
  o << "shared " << T4 << " As[" << bl.bk << "][" << bl.bm / 4 + (a_k_fast ? 1 : 0) << "];\n";
  o << "shared " << T4 << " Bs[" << bl.bk << "][" << bl.bn / 4 + (b_n_fast ? 0 : 1) << "];\n";
  o << epilogue;
  o << "void main() {\n";
  o << "  const uint M = " << u(g.m) << ", N = " << u(g.n) << ", K = " << u(g.k) << ";\n";
  SymInt batches = 1;
  for (const SymInt& e : g.batch) batches = batches * e;
  o << "  const uint tiles_n = (N + " << n(bl.bn - 1) << ") / " << n(bl.bn) << ", tiles = (M + " << n(bl.bm - 1) << ") / "
    << n(bl.bm) << " * tiles_n;\n";
  o << "  const uint steps = tiles * " << u(batches) << ";\n";
  o << "  const uint ars = " << u(g.a_row_stride) << ", acs = " << u(g.a_col_stride) << ", brs = " << u(g.b_row_stride)
    << ", bcs = " << u(g.b_col_stride) << ";\n";
  o << "  const uint tid = gl_LocalInvocationID.x, trow = tid / " << n(cs) << ", tcol = tid % " << n(cs) << ";\n";
  // The tile elements an invocation loads: the same (k, row or column) positions at every step.
  auto positions = [&](const std::string& name, int64_t outer, bool k_fast) {
    const int64_t count = outer * bl.bk / nt;
    for (int64_t i = 0; i < count; ++i) {
      const std::string e = "(tid + " + n(i * nt) + ")";
      if (k_fast)
        o << "  const uint " << name << "k" << i << " = " << e << " % " << n(bl.bk) << ", " << name << "o" << i << " = " << e
          << " / " << n(bl.bk) << ";\n";
      else
        o << "  const uint " << name << "o" << i << " = " << e << " % " << n(outer) << ", " << name << "k" << i << " = " << e
          << " / " << n(outer) << ";\n";
    }
    return count;
  };
  const int64_t na = positions("la", bl.bm, a_k_fast), nb = positions("lb", bl.bn, !b_n_fast);
  // The quads (4 consecutive k) an invocation loads of a vector-loaded operand.
  auto quad_positions = [&](const std::string& name, int64_t outer) {
    const int64_t count = outer * bl.bk / 4 / nt, per_row = bl.bk / 4;
    for (int64_t i = 0; i < count; ++i) {
      const std::string e = "(tid + " + n(i * nt) + ")";
      o << "  const uint " << name << "k" << i << " = " << e << " % " << n(per_row) << " * 4u, " << name << "o" << i
        << " = " << e << " / " << n(per_row) << ";\n";
    }
    return count;
  };
  const int64_t nva = a_vec ? quad_positions("lva", bl.bm) : 0, nvb = b_vec ? quad_positions("lvb", bl.bn) : 0;
  o << "  for (uint step = gl_WorkGroupID.x; step < steps; step += gl_NumWorkGroups.x) {\n";
  o << "    const uint bt = step / tiles, tile = step % tiles;\n";
  o << "    const uint row0 = tile / tiles_n * " << n(bl.bm) << ", col0 = tile % tiles_n * " << n(bl.bn) << ";\n";
  o << "    uint abase = uint(" << d.at(a, p.sym(g.a_offset)) << "), bbase = uint(" << d.at(b, p.sym(g.b_offset)) << ");\n";
  if (!g.batch.empty()) {
    o << "    uint rest = bt;\n";
    for (size_t i = g.batch.size(); i-- > 0;) {
      o << "    { const uint e = " << u(g.batch[i]) << ", at = rest % e; rest /= e; abase += at * " << u(g.a_batch_strides[i])
        << "; bbase += at * " << u(g.b_batch_strides[i]) << "; }\n";
    }
  }
  o << "    const uint cbase = bt * M * N;\n";
  if (a_vec) o << "    const bool avec = ((abase | ars | K) & 3u) == 0u;\n";
  if (b_vec) o << "    const bool bvec = ((bbase | bcs | K) & 3u) == 0u;\n";
  o << "    " << T << " acc[" << bl.tm * bl.tn << "];\n";
  o << "   ";
  for (int64_t i = 0; i < bl.tm * bl.tn; ++i) o << " acc[" << i << "] = " << zero << ";";
  o << "\n";
  // An operand's tile loads: element by element (`name`, `count` per invocation) and, where `vec`,
  // by quads (`vname`, `vcount`) under its uniform `flag`; from `buf` at `base` + outer * `ostride`
  // + k * `kstride`, outer from `outer0` below `bound`, into the shared `tile`.
  struct Operand {
    bool vec;
    std::string flag, name;
    int64_t count;
    std::string vname;
    int64_t vcount;
    std::string buf, base, bound, outer0, ostride, kstride, tile;
  };
  const Operand operands[] = {{a_vec, "avec", "la", na, "lva", nva, a, "abase", "M", "row0", "ars", "acs", "As"},
                              {b_vec, "bvec", "lb", nb, "lvb", nvb, b, "bbase", "N", "col0", "bcs", "brs", "Bs"}};
  // The next step's elements are read from memory into registers before this step's products,
  // so their latency is hidden behind the fmas; they are stored to the tiles after the step.
  auto fetch = [&](const Operand& x, bool quads, const std::string& k0) {
    const std::string& name = quads ? x.vname : x.name;
    for (int64_t i = 0; i < (quads ? x.vcount : x.count); ++i) {
      const std::string r = "(" + x.outer0 + " + " + name + "o" + std::to_string(i) + ")",
                        q = "(" + k0 + " + " + name + "k" + std::to_string(i) + ")";
      o << "      " << name << i << " = (" << r << " < " << x.bound << " && " << q << " < K) ? ";
      if (quads)
        o << x.buf << "v[(" << x.base << " + " << r << " * " << x.ostride << " + " << q << ") >> 2u] : vec4(0.0);\n";
      else
        o << x.buf << "[" << x.base << " + " << r << " * " << x.ostride << " + " << q << " * " << x.kstride << "] : " << zero
          << ";\n";
    }
  };
  auto put = [&](const Operand& x, bool quads) {
    const std::string& name = quads ? x.vname : x.name;
    for (int64_t i = 0; i < (quads ? x.vcount : x.count); ++i)
      for (int c = 0; c < (quads ? 4 : 1); ++c) {
        const std::string at = std::to_string(i);
        o << "      " << x.tile << "[" << name << "k" << at << (quads ? " + " + std::to_string(c) + "u" : "") << "]["
          << name << "o" << at << " >> 2u][" << name << "o" << at << " & 3u] = " << name << at
          << (quads ? "[" + std::to_string(c) + "]" : "") << ";\n";
      }
  };
  // Each operand's loads (fetching) or tile stores, by quads where its flag holds.
  auto each_operand = [&](bool fetching, const std::string& k0) {
    for (const Operand& x : operands) {
      auto emit = [&](bool quads) { fetching ? fetch(x, quads, k0) : put(x, quads); };
      if (!x.vec) {
        emit(false);
        continue;
      }
      o << "      if (" << x.flag << ") {\n";
      emit(true);
      o << "      } else {\n";
      emit(false);
      o << "      }\n";
    }
  };
  o << "    " << T;
  for (int64_t i = 0; i < na; ++i) o << (i ? ", la" : " la") << i;
  for (int64_t i = 0; i < nb; ++i) o << ", lb" << i;
  o << ";\n";
  if (nva + nvb > 0) {
    o << "    vec4";
    for (int64_t i = 0; i < nva; ++i) o << (i ? ", lva" : " lva") << i;
    for (int64_t i = 0; i < nvb; ++i) o << (i || nva ? ", lvb" : " lvb") << i;
    o << ";\n";
  }
  o << "    {\n";
  each_operand(true, "0u");
  o << "    }\n";
  o << "    for (uint k0 = 0u; k0 < K; k0 += " << n(bl.bk) << ") {\n";
  each_operand(false, "");
  o << "      barrier();\n";
  o << "      if (k0 + " << n(bl.bk) << " < K) {\n";
  each_operand(true, "k0 + " + n(bl.bk));
  o << "      }\n";
  // An invocation's rows are 4 * (trow + i * rs) + 0..3, its columns 4 * (tcol + j * cs) + 0..3:
  // a warp reads consecutive vectors of B and broadcast vectors of A.
  o << "      for (uint kk = 0u; kk < " << n(bl.bk) << "; ++kk) {\n";
  // (av/bv, not a/b: b<digits> names a buffer until name_buffers_by_binding renames it)
  for (int64_t i = 0; i < bl.tm / 4; ++i) o << "        const " << T4 << " av" << i << " = As[kk][trow + " << n(i * rs) << "];\n";
  for (int64_t j = 0; j < bl.tn / 4; ++j) o << "        const " << T4 << " bv" << j << " = Bs[kk][tcol + " << n(j * cs) << "];\n";
  for (int64_t i = 0; i < bl.tm; ++i) {
    o << "       ";
    for (int64_t j = 0; j < bl.tn; ++j)
      o << " acc[" << i * bl.tn + j << "] += av" << i / 4 << "[" << i % 4 << "] * bv" << j / 4 << "[" << j % 4 << "];";
    o << "\n";
  }
  o << "      }\n";
  o << "      barrier();\n";
  o << "    }\n";
  // Written out, so that every index into acc is a constant (a dynamically indexed array lives
  // in memory, not registers).
  for (int64_t j = 0; j < bl.tn; ++j)
    o << "    const uint q" << j << " = col0 + 4u * (tcol + " << n(j / 4 * cs) << ") + " << n(j % 4) << ";\n";
  for (int64_t i = 0; i < bl.tm; ++i) {
    o << "    {\n      const uint r = row0 + 4u * (trow + " << n(i / 4 * rs) << ") + " << n(i % 4) << ";\n";
    o << "      if (r < M) {\n";
    for (int64_t j = 0; j < bl.tn; ++j) {
      const std::string at = "cbase + r * N + q" + std::to_string(j), v = "acc[" + std::to_string(i * bl.tn + j) + "]";
      o << "        if (q" << j << " < N) {";
      if (store_c) o << " " << c << "[" << at << "] = " << v << ";";
      if (!epilogue.empty()) o << " kiln_epilogue(int64_t(" << at << "), " << v << ");";
      o << " }\n";
    }
    o << "      }\n    }\n";
  }
  o << "  }\n}\n";
  return src + o.str();
}

// A shader's buffers named by their binding position instead of their plan buffer ids (B<id>
// b<id> b<id>v b<id>u -> KBind<i> kbind<i> kbind<i>v kbind<i>u): a model's repeated layers then give
// byte-identical shaders, which the runtime compiles into one pipeline.
void name_buffers_by_binding(plan::PlanKernel& pk) {
  lower::Renames r;
  const std::vector<int32_t> bufs = kernel_bindings(pk);
  for (size_t i = 0; i < bufs.size(); ++i) {
    const std::string id = std::to_string(bufs[i]), at = std::to_string(i);
    r["B" + id] = "KBind" + at;
    r["b" + id] = "kbind" + at;
    r["B" + id + "v"] = "KBind" + at + "v";
    r["b" + id + "v"] = "kbind" + at + "v";
    r["B" + id + "u"] = "KBind" + at + "u";
    r["b" + id + "u"] = "kbind" + at + "u";
  }
  pk.source = lower::rename_identifiers(pk.source, r);
}

// A gemm shader's plan fields: the product, its tile and the launch that covers C's tiles.
GemmBlocking plan_gemm_kernel(plan::PlanKernel& pk, const schedule::Gemm& g, const CodegenOptions& options,
                              const std::optional<GemmBlocking>& forced) {
  pk.gemm = lower::plan_gemm(g);
  pk.parallel_extent = pk.gemm->m * pk.gemm->n;
  const GemmBlocking bl = gemm_blocking(*pk.gemm, options.caps, forced);
  pk.gemm->tile = {bl.bm, bl.bn};
  pk.launch.block = bl.threads();
  pk.launch.items_per_block = bl.bm * bl.bn;
  pk.launch.max_blocks = options.max_workgroups;
  return bl;
}

// Whether a gemm kernel's epilogue can run inside its gemm shader (CodegenOptions::
// fuse_gemm_epilogue): a pointwise epilogue of plain stores whose every load of C, and every
// store to C (an epilogue in place, the usual case), is C's element at the same flat index of the
// domain (C is contiguous [batch..., m, n], so that element is the one the shader holds), not
// gathered. Whether the product must still be stored as it is: the epilogue does not overwrite
// it, and C is an output or another kernel reads it.
struct EpilogueFusion {
  bool fuse = false;
  bool store_c = true;
};

EpilogueFusion epilogue_fusion(const Kernel& k, const schedule::Schedule& s) {
  EpilogueFusion f;
  if (!k.gemm || k.stores.empty() || (k.kind == KernelKind::reduction && k.num_passes() > 0)) return f;
  const int32_t c = k.gemm->c;
  SymInt batches = 1;
  for (const SymInt& e : k.gemm->batch) batches = batches * e;
  SymInt size = 1;
  for (const SymInt& e : k.domain) size = size * e;
  if (!(size == batches * k.gemm->m * k.gemm->n)) return f;
  std::vector<SymInt> contiguous(k.domain.size(), SymInt(1));
  for (size_t d = k.domain.size(); d-- > 1;) contiguous[d - 1] = contiguous[d] * k.domain[d];
  auto own_element = [&](const schedule::Affine& a) {
    if (!(a.offset == 0)) return false;
    for (size_t d = 0; d < k.domain.size(); ++d)
      if (!(k.domain[d] == 1) && !(a.coeffs[d] == contiguous[d])) return false;
    return true;
  };
  bool overwritten = false;
  for (const schedule::Store& st : k.stores) {
    if (!st.plain() || (st.buffer == c && !own_element(st.index))) return f;
    overwritten = overwritten || st.buffer == c;
  }
  for (const Instr& in : k.instrs)
    if (in.kind == InstrKind::load && in.buffer == c && (!in.args.empty() || !own_element(in.index))) return f;
  f.fuse = true;
  if (overwritten) {
    f.store_c = false;
    return f;
  }
  f.store_c = s.buffers[static_cast<size_t>(c)].kind != schedule::BufferKind::intermediate;
  for (const Kernel& other : s.kernels) {
    if (&other == &k) continue;
    const std::vector<int32_t> r = other.reads();
    f.store_c = f.store_c || std::find(r.begin(), r.end(), c) != r.end();
  }
  return f;
}

// A custom op's own Vulkan kernel (CustomOpKernel "vulkan", kiln/graph/custom_ops.h) in place of
// its reference kernel: the buffers and push constants of every shader, accessors kiln_in<i>(j)
// and kiln_out(j) over them, the op's source, and a main that calls its entry once per thread
// index below the thread count (grid-stride: workgroups are capped), with the thread count and
// every size. std::nullopt (the host runs it) where the op has no such kernel, or its buffers are
// not plain arrays here: an input strided or at a push-constant offset, 16- or 8-bit elements the
// device packs into uints.
std::optional<plan::PlanKernel> custom_kernel(const Kernel& k, const schedule::Schedule& s, const plan::KernelPlan& p,
                                              const CodegenOptions& options, const GlslDialect& d) {
  std::optional<plan::PlanKernel> ck = lower::custom_device_kernel(k, s, "vulkan");
  if (!ck) return std::nullopt;
  const std::vector<int32_t>& args = ck->arg_buffers;  // inputs, then the output
  for (int32_t b : args) {
    const plan::PlanBuffer& pb = p.buffers[static_cast<size_t>(b)];
    if (storage_of(pb.dtype, options.caps).pack != 1 || d.offsets.count(b)) return std::nullopt;
    const SymShape dense = contiguous_strides(pb.sizes);
    for (size_t i = 0; i < pb.sizes.size(); ++i)
      if (pb.sizes[i] != 1 && !(pb.strides[i] == dense[i])) return std::nullopt;
  }
  KILN_CHECK(ck->launch.block > 0 && ck->launch.block <= options.caps.max_workgroup, "custom op ",
             k.reference->attrs.s(0), ": its vulkan kernel asks for workgroups of ", ck->launch.block,
             " invocations; this device takes 1 to ", options.caps.max_workgroup);
  KILN_CHECK(ck->entry != "main", "custom op ", k.reference->attrs.s(0),
             ": its vulkan kernel's entry may not be called main (Kiln writes the shader's main)");
  const std::vector<int32_t> bufs = kernel_bindings(*ck);
  std::string src = shader_head(s, bufs, ck->writes, nullptr, d, ck->name);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string name = i + 1 < args.size() ? "kiln_in" + std::to_string(i) : std::string("kiln_out");
    src += "#define " + name + "(j) b" + std::to_string(args[i]) + "[int(j)]\n";
  }
  // (buffers renamed kbind<i> before the op's source joins, whose names may be b<digits>)
  std::string own = std::move(ck->source);
  ck->source = std::move(src);
  name_buffers_by_binding(*ck);
  src = std::move(ck->source) + "#line 1\n" + own + "\n";
  Kernel dummy;
  cstyle::KernelPrinter printer(dummy, s, d);
  // (arg_values: the thread count, then the sizes)
  std::string call = ck->entry + "(t, threads";
  for (size_t i = 1; i < ck->arg_values.size(); ++i) call += ", int64_t(" + printer.sym(ck->arg_values[i]) + ")";
  src += "void main() {\n  const int64_t threads = int64_t(" + printer.sym(ck->arg_values.at(0)) + ");\n";
  src += "  const int64_t stride = int64_t(gl_NumWorkGroups.x) * int64_t(gl_WorkGroupSize.x);\n";
  src += "  for (int64_t t = int64_t(gl_GlobalInvocationID.x); t < threads; t += stride) " + call + ");\n}\n";
  ck->source = std::move(src);
  ck->entry = "main";
  ck->launch.grid_stride = true;
  ck->launch.max_blocks = options.max_workgroups;
  return ck;
}

}  // namespace

plan::KernelPlan generate(const schedule::Schedule& s, const CodegenOptions& options) {
  plan::KernelPlan p = lower::plan_skeleton(s, "vulkan");
  p.prelude = "// kiln vulkan GLSL 450; device caps: " + options.caps.str() + "\n";
  GlslDialect d;
  d.caps = options.caps;
  for (int32_t b : offset_buffers(p)) d.offsets[b] = "pc.o" + std::to_string(b);
  const size_t pc_bytes = 8 * (s.graph.shapes().symbols().size() + d.offsets.size() + 1);
  KILN_CHECK(pc_bytes <= 128, "vulkan codegen: the plan needs ", pc_bytes,
             " bytes of push constants (sizes and offsets), more than the 128 every Vulkan device offers");
  const std::optional<GemmBlocking> forced_blocking = forced_gemm_blocking(options.gemm_blocking);
  const bool gemm_vectors = options.vector_accesses && options.gemm_vector_loads;
  for (const Kernel& k : s.kernels) {
    plan::PlanKernel pk = lower::kernel_skeleton(k);
    KILN_CHECK(!k.attention, "vulkan codegen: kernel ", k.name, " is a fused attention kernel, which the vulkan "
               "target does not print (its schedule target decomposes attention)");
    if (k.reference) {
      std::optional<plan::PlanKernel> ck = custom_kernel(k, s, p, options, d);
      p.kernels.push_back(ck ? std::move(*ck) : std::move(pk));
      continue;
    }
    const EpilogueFusion fusion = options.fuse_gemm_epilogue ? epilogue_fusion(k, s) : EpilogueFusion{};
    if (k.gemm && fusion.fuse) {
      // The product and its epilogue in one shader.
      pk.kind = "matmul";
      pk.entry = "main";
      // C is never read (the shader holds its values), and written only where the product is
      // stored or the epilogue stores to it.
      const int32_t c = k.gemm->c;
      pk.reads.erase(std::remove(pk.reads.begin(), pk.reads.end(), c), pk.reads.end());
      if (!fusion.store_c &&
          std::none_of(k.stores.begin(), k.stores.end(), [&](const schedule::Store& st) { return st.buffer == c; }))
        pk.writes.erase(std::remove(pk.writes.begin(), pk.writes.end(), c), pk.writes.end());
      const GemmBlocking bl = plan_gemm_kernel(pk, *k.gemm, options, forced_blocking);
      const std::string epilogue =
          KernelEmitter(k, s, options, d).epilogue_function(k.gemm->dtype == DType::f64 ? "double" : "float");
      pk.source = gemm_shader(s, *pk.gemm, bl, pk, d, gemm_vectors, &k, epilogue, fusion.store_c);
      name_buffers_by_binding(pk);
      p.kernels.push_back(std::move(pk));
      continue;
    }
    if (k.gemm) {
      // The product as its own shader, then the epilogue (when there is one) over it.
      plan::PlanKernel gk;
      gk.name = k.name + "_gemm";
      gk.kind = "matmul";
      gk.entry = "main";
      gk.provenance = k.provenance;
      gk.reads = {k.gemm->a, k.gemm->b};
      std::sort(gk.reads.begin(), gk.reads.end());
      gk.reads.erase(std::unique(gk.reads.begin(), gk.reads.end()), gk.reads.end());
      gk.writes = {k.gemm->c};
      const GemmBlocking bl = plan_gemm_kernel(gk, *k.gemm, options, forced_blocking);
      gk.source = gemm_shader(s, *gk.gemm, bl, gk, d, gemm_vectors);
      name_buffers_by_binding(gk);
      p.kernels.push_back(std::move(gk));
      if (k.stores.empty()) continue;
      pk.kind = "pointwise";
    }
    if (k.kind == KernelKind::reduction && k.num_passes() > 0) {
      pk.parallel_extent = k.outer_extent();
    } else {
      pk.parallel_extent = 1;
      for (const SymInt& e : k.domain) pk.parallel_extent = pk.parallel_extent * e;
    }
    pk.entry = "main";
    pk.source = KernelEmitter(k, s, options, d).emit(pk.launch, kernel_bindings(pk), pk.writes);
    name_buffers_by_binding(pk);
    p.kernels.push_back(std::move(pk));
  }
  if (plan::replay_enabled()) plan::record_for_replay(p, s.str());
  return p;
}

schedule::Target schedule_target(const CodegenOptions& options) {
  schedule::Target t = options.gpu ? schedule::Target::gpu() : schedule::Target::cpu();
  if (options.gpu) t.low_precision_gemm = false;
  t.max_kernel_buffers = options.caps.max_storage_buffers;
  t.atomic_64 = false;  // a 64-bit compare-and-swap needs shaderBufferInt64Atomics; not asked for
  return t;
}

plan::KernelPlan generate_plan(const Graph& g, const CodegenOptions& options) {
  return generate(schedule::schedule_graph(g, schedule_target(options)), options);
}

}  // namespace kiln::vulkan
