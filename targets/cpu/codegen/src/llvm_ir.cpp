// Kernel IR -> LLVM 16 IR text, one function per kernel (see codegen.h for the strategies).
//
// The emitted code keeps loop counters, accumulators and reduction results in allocas and
// lets LLVM's mem2reg/SROA turn them into SSA: simpler to emit, and exactly as fast after O3.
// Every value is computed in a compute type: float (f32, f16, bf16), double (f64), i64 (i32,
// i64) or i1 (bool); loads convert from the storage type and stores back.
#include <algorithm>
#include <array>
#include <cinttypes>
#include <cmath>
#include <limits>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <sstream>

#include "kiln/plan/replay.h"
#include "kiln/lower/skeleton.h"
#include "kiln/config/config.h"
#include "kiln/cpu/codegen.h"
#include "kiln/graph/error.h"

namespace kiln::cpu {

using schedule::Affine;
using schedule::Instr;
using schedule::InstrKind;
using schedule::Kernel;
using schedule::KernelKind;
using schedule::ReduceKind;

CodegenOptions CodegenOptions::from_config() {
  CodegenOptions o;
  o.emulate_precision_casts = config::get<bool>("emulate_precision_casts");
  o.autotune_variants = config::get<bool>("max_autotune_pointwise");
  o.matmul = config::get<std::string>("cpu.matmul");
  o.autotune_gemm = config::get<bool>("max_autotune_gemm");
  o.vector_width = config::get<int64_t>("cpu.vector_width");
  return o;
}

namespace {

enum class CT { f32, f64, i64, i1 };

CT ct_of(DType t) {
  switch (t) {
    case DType::f32: case DType::f16: case DType::bf16: return CT::f32;
    case DType::f64: return CT::f64;
    case DType::i32: case DType::i64: return CT::i64;
    case DType::bool_: return CT::i1;
  }
  return CT::f32;
}
bool is_float(CT c) { return c == CT::f32 || c == CT::f64; }

const char* ty(CT c) {
  switch (c) {
    case CT::f32: return "float";
    case CT::f64: return "double";
    case CT::i64: return "i64";
    case CT::i1: return "i1";
  }
  return "?";
}
const char* sfx(CT c) { return c == CT::f64 ? "f64" : "f32"; }

const char* storage_ty(DType t) {
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

std::string float_lit(double v, CT c) {
  if (c == CT::f32) v = static_cast<double>(static_cast<float>(v));
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%016" PRIX64, bits);
  return buf;
}

std::string lit(double v, CT c) {
  switch (c) {
    case CT::f32: case CT::f64: return float_lit(v, c);
    case CT::i64: return std::to_string(static_cast<int64_t>(v));
    case CT::i1: return v != 0.0 ? "true" : "false";
  }
  return "0";
}

// Column strategy when the reduced dims are the strided ones: the loads walk the last outer
// dim contiguously and none walks the last inner dim contiguously.
bool uses_column_strategy(const Kernel& k) {
  const size_t n = k.domain.size(), no = static_cast<size_t>(k.num_outer);
  if (k.kind != KernelKind::reduction || no == 0) return false;
  bool outer_unit = false, inner_unit = false;
  for (const Instr& in : k.instrs) {
    if (in.kind != InstrKind::load || !in.inner) continue;
    if (in.index.coeffs[n - 1] == 1) inner_unit = true;
    if (in.index.coeffs[no - 1] == 1) outer_unit = true;
  }
  return outer_unit && !inner_unit;
}
// Column strategy: outer points per block. Measured with max-autotune on col_sum ([1024, 8192]
// summed over dim 0, 2-core znver4): 1024 beat 256 and 64 (1.09 vs 1.49 ms).
constexpr int64_t kLanes = 1024;


struct Val {
  std::string v;
  CT ct;
};

struct Scope {
  std::vector<std::string> vars;  // one i64 operand per loop variable ("" where not set)
  std::string lane;               // column strategy: this outer point's slot in the block
  std::map<int32_t, Val> memo;
  Scope* parent = nullptr;
  const Val* find(int32_t i) const {
    for (const Scope* s = this; s; s = s->parent) {
      auto it = s->memo.find(i);
      if (it != s->memo.end()) return &it->second;
    }
    return nullptr;
  }
};

// A kernel variant: another name, an attribute group (#0 default; #1, #2 prefer 256- or
// 512-bit vectors; -1 Kiln's choice for the kernel), for the column strategy another block
// size, and an unroll factor for the vectorised loops.
struct KernelVariant {
  std::string name;
  int attributes = -1;
  int64_t lanes = 0;          // 0: kLanes
  int gemm = -1;              // matmul: 0 the BLAS call, 1 the generated tiles, -1 as the options say
  int64_t metadata_base = 0;  // first metadata id of this function (0: no alias metadata)
  int64_t tile_rows = 4;  // generated gemm: rows per register tile (a power of 2)
  // Vector bodies per loop iteration (LLVM's interleave count: independent accumulators for a
  // reduction, more loads in flight); 0: the loop vectoriser's own choice.
  int unroll = 0;
};

class FunctionEmitter {
 public:
  using Variant = KernelVariant;
  FunctionEmitter(const Kernel& k, const schedule::Schedule& s, const CodegenOptions& o, Variant v = Variant())
      : k_(k), s_(s), o_(o), v_(std::move(v)) {
    if (v_.name.empty()) v_.name = k.name;
    if (v_.attributes < 0) {
      v_.attributes = 0;
      // Reductions stream memory; the widest vectors the host has read it fastest (max-autotune
      // picked 512-bit over the host's 256-bit preference for layernorm, sum_all and col_sum on
      // znver4). On hosts without 512-bit vectors the preference changes nothing.
      if (k.kind == KernelKind::reduction) v_.attributes = 2;
      if (k.kind == KernelKind::matmul && generated_gemm()) v_.attributes = 2;  // 16-lane vectors
      // cpu.vector_width: the user's choice for every kernel (attribute groups #3, #1, #2).
      if (o.vector_width == 128) v_.attributes = 3;
      if (o.vector_width == 256) v_.attributes = 1;
      if (o.vector_width == 512) v_.attributes = 2;
    }
  }

  std::string emit() {
    switch (k_.kind) {
      case KernelKind::pointwise: emit_pointwise(); break;
      case KernelKind::reduction: emit_reduction(); break;
      case KernelKind::matmul: emit_matmul(); break;
      case KernelKind::reference: fail("cpu codegen: reference kernels have no source");
      case KernelKind::attention:
        fail("cpu codegen: kernel ", k_.name, " is a fused attention kernel, which the cpu target does not "
             "print (schedule for it with Target::cpu(), which decomposes attention)");
    }
    std::ostringstream f;
    f << "define void @" << v_.name << "(ptr noalias %buffers, ptr noalias %sizes, i64 %begin, i64 %end) #"
      << v_.attributes << " {\n"
      << "entry:\n"
      << entry_.str() << "  br label %start\nstart:\n"
      << body_.str() << "}\n";
    f << alias_metadata() << loop_metadata();
    return f.str();
  }

 private:
  const Kernel& k_;
  const schedule::Schedule& s_;
  const CodegenOptions& o_;
  Variant v_;
  std::ostringstream entry_, body_;
  int tmp_ = 0, label_ = 0;
  std::map<std::string, std::string> syms_;  // hoisted SymInt values by expression
  std::map<int32_t, std::string> bufs_;
  std::map<int32_t, std::string> red_;  // reduce instr -> alloca holding its result
  std::map<int32_t, std::string> acc_, nan_, idx_;
  std::map<std::string, CT> slot_type_;
  // Row strategy: values kept from the pass that computes them for later passes (see
  // kept_values()): instruction -> its row scratch (an alloca of the inner extent), and the
  // sweep being emitted.
  std::map<int32_t, std::string> kept_;
  int32_t sweep_ = 0;
  // Alias scopes: one per memory a kernel touches (a buffer, or an intermediate slot, which
  // buffers updated in place share), so LLVM needs no run-time overlap checks before vector
  // loops. Metadata ids start at v_.metadata_base, unique in the module.
  std::map<std::string, int64_t> scope_id_;
  int64_t lanes_ = 0;  // column strategy: outer points per block (0: row strategy)
  static constexpr int64_t kLoopMetadataBase = 3000;  // alias scopes use ids below it
  std::vector<std::pair<int64_t, std::string>> loop_ids_;  // a loop's id, its one property

  std::string t() { return "%t" + std::to_string(tmp_++); }
  std::string label(const char* p) { return std::string(p) + std::to_string(label_++); }
  template <class... A>
  std::string op(A&&... parts) {  // "%tN = <parts>" in the body, returns %tN
    const std::string r = t();
    body_ << "  " << r << " = ";
    (body_ << ... << parts);
    body_ << "\n";
    return r;
  }
  template <class... A>
  void line(A&&... parts) {
    body_ << "  ";
    (body_ << ... << parts);
    body_ << "\n";
  }
  void block(const std::string& l) { body_ << l << ":\n"; }
  std::string alloca(const char* type) {
    const std::string r = t();
    entry_ << "  " << r << " = alloca " << type << "\n";
    return r;
  }

  // ---- alias metadata ----
  std::string memory_of(int32_t b) const {
    const schedule::Buffer& buf = s_.buffers[static_cast<size_t>(b)];
    return buf.kind == schedule::BufferKind::intermediate ? "slot" + std::to_string(buf.slot) : "b" + std::to_string(b);
  }
  std::string alias(int32_t b) {
    if (v_.metadata_base <= 0) return "";
    const std::string m = memory_of(b);
    auto it = scope_id_.find(m);
    if (it == scope_id_.end())
      it = scope_id_.emplace(m, v_.metadata_base + 1 + 3 * static_cast<int64_t>(scope_id_.size())).first;
    return ", !alias.scope !" + std::to_string(it->second + 1) + ", !noalias !" + std::to_string(it->second + 2);
  }
  std::string alias_metadata() const {
    if (scope_id_.empty()) return "";
    std::ostringstream m;
    const int64_t domain = v_.metadata_base;
    m << "!" << domain << " = distinct !{!" << domain << ", !\"" << v_.name << "\"}\n";
    for (const auto& [name, id] : scope_id_) {
      m << "!" << id << " = distinct !{!" << id << ", !" << domain << ", !\"" << name << "\"}\n";
      m << "!" << id + 1 << " = !{!" << id << "}\n";
      m << "!" << id + 2 << " = !{";
      bool first = true;
      for (const auto& [other, oid] : scope_id_) {
        if (other == name) continue;
        m << (first ? "!" : ", !") << oid;
        first = false;
      }
      m << "}\n";
    }
    return m.str();
  }

  // ---- sizes and indices ----
  std::string sym(const SymInt& s) {
    if (s.is_static()) return std::to_string(s.hint());
    const SymExpr e = s.expr();
    const std::string key = e.str();
    if (auto it = syms_.find(key); it != syms_.end()) return it->second;
    std::string acc;
    for (const SymTerm& term : e.terms()) {
      std::string v = std::to_string(term.coeff);
      bool first = true;
      for (SymbolId id : term.symbols) {
        const std::string name = symbol(id);
        if (first && term.coeff == 1) {
          v = name;
        } else {
          const std::string r = t();
          entry_ << "  " << r << " = mul i64 " << v << ", " << name << "\n";
          v = r;
        }
        first = false;
      }
      if (acc.empty()) {
        acc = v;
      } else {
        const std::string r = t();
        entry_ << "  " << r << " = add i64 " << acc << ", " << v << "\n";
        acc = r;
      }
    }
    if (acc.empty()) acc = "0";
    syms_[key] = acc;
    return acc;
  }
  std::string symbol(SymbolId id) {
    const std::string key = "#s" + std::to_string(id);
    if (auto it = syms_.find(key); it != syms_.end()) return it->second;
    const std::string p = t(), v = t();
    entry_ << "  " << p << " = getelementptr i64, ptr %sizes, i64 " << id << "\n"
           << "  " << v << " = load i64, ptr " << p << ", align 8\n";
    syms_[key] = v;
    return v;
  }
  std::string buffer(int32_t b) {
    if (auto it = bufs_.find(b); it != bufs_.end()) return it->second;
    const std::string p = t(), v = t();
    entry_ << "  " << p << " = getelementptr ptr, ptr %buffers, i64 " << b << "\n"
           << "  " << v << " = load ptr, ptr " << p << ", align 8\n";
    bufs_[b] = v;
    return v;
  }
  std::string affine(const Affine& a, const Scope& sc) {
    std::string acc = sym(a.offset);
    for (size_t v = 0; v < a.coeffs.size(); ++v) {
      if (a.coeffs[v] == 0) continue;
      KILN_CHECK(!sc.vars[v].empty(), "cpu codegen: kernel ", k_.name, ": loop variable ", v, " used outside its loop");
      std::string term = sc.vars[v];
      if (!(a.coeffs[v] == 1)) term = op("mul i64 ", sym(a.coeffs[v]), ", ", sc.vars[v]);
      acc = acc == "0" ? term : op("add i64 ", acc, ", ", term);
    }
    return acc;
  }

  // ---- conversions ----
  Val convert(const Val& x, CT to) {
    if (x.ct == to) return x;
    switch (to) {
      case CT::f32:
      case CT::f64:
        if (is_float(x.ct)) return {op(to == CT::f64 ? "fpext float " : "fptrunc double ", x.v, " to ", ty(to)), to};
        if (x.ct == CT::i1) return {op("uitofp i1 ", x.v, " to ", ty(to)), to};
        return {op("sitofp i64 ", x.v, " to ", ty(to)), to};
      case CT::i64:
        if (x.ct == CT::i1) return {op("zext i1 ", x.v, " to i64"), to};
        return {op("fptosi ", ty(x.ct), " ", x.v, " to i64"), to};
      case CT::i1:
        if (is_float(x.ct)) return {op("fcmp une ", ty(x.ct), " ", x.v, ", ", lit(0, x.ct)), to};
        return {op("icmp ne i64 ", x.v, ", 0"), to};
    }
    return x;
  }
  // A value of compute type `x.ct` made exactly representable in `t` (rounding, wrapping).
  Val narrow(const Val& x, DType t) {
    switch (t) {
      case DType::i32: return {op("sext i32 ", op("trunc i64 ", x.v, " to i32"), " to i64"), CT::i64};
      case DType::f16: return {op("fpext half ", op("fptrunc float ", x.v, " to half"), " to float"), CT::f32};
      case DType::bf16: return {op("call float @kiln_round_bf16(float ", x.v, ")"), CT::f32};
      default: return x;
    }
  }
  // Converts to dtype t's compute type, with t's rounding or wrapping.
  Val to_dtype(const Val& x, DType t) { return narrow(convert(x, ct_of(t)), t); }

  Val load(const Instr& in, Scope& sc) {
    const DType t = s_.buffers[static_cast<size_t>(in.buffer)].dtype;
    std::string idx = affine(in.index, sc);
    if (in.gathered) idx = op("add i64 ", idx, ", ", convert(value(in.gather_offset(), sc), CT::i64).v);
    const std::string p = op("getelementptr ", storage_ty(t), ", ptr ", buffer(in.buffer), ", i64 ", idx);
    std::string raw;
    if (in.masked) {
      // Only where the mask holds: a branch around the load (the loop vectorizer turns it into a
      // masked load or gather), the slot holding 0 otherwise.
      const std::string m = convert(value(in.mask(), sc), CT::i1).v;
      const std::string slot = alloca(storage_ty(t));
      const std::string ld = label("mload"), join = label("mjoin");
      line("store ", storage_ty(t), " ", t == DType::f32 || t == DType::f64 || t == DType::f16 ? "0.0" : "0",
           ", ptr ", slot);
      line("br i1 ", m, ", label %", ld, ", label %", join);
      block(ld);
      line("store ", storage_ty(t), " ",
           op("load ", storage_ty(t), ", ptr ", p, ", align ", dtype_size(t), alias(in.buffer)), ", ptr ", slot);
      line("br label %", join);
      block(join);
      raw = op("load ", storage_ty(t), ", ptr ", slot);
    } else {
      raw = op("load ", storage_ty(t), ", ptr ", p, ", align ", dtype_size(t), alias(in.buffer));
    }
    Val v;
    switch (t) {
      case DType::f32: v = {raw, CT::f32}; break;
      case DType::f64: v = {raw, CT::f64}; break;
      case DType::f16: v = {op("fpext half ", raw, " to float"), CT::f32}; break;
      case DType::bf16: v = {op("bitcast i32 ", op("shl i32 ", op("zext i16 ", raw, " to i32"), ", 16"), " to float"), CT::f32}; break;
      case DType::i32: v = {op("sext i32 ", raw, " to i64"), CT::i64}; break;
      case DType::i64: v = {raw, CT::i64}; break;
      case DType::bool_: v = {op("icmp ne i8 ", raw, ", 0"), CT::i1}; break;
    }
    return to_dtype(v, in.dtype);
  }

  void store(int32_t buf, const Affine& index, const Val& x0, const Scope& sc) {
    const DType t = s_.buffers[static_cast<size_t>(buf)].dtype;
    const Val x = convert(x0, ct_of(t));
    std::string raw;
    switch (t) {
      case DType::f32: case DType::f64: case DType::i64: raw = x.v; break;
      case DType::f16: raw = op("fptrunc float ", x.v, " to half"); break;
      case DType::bf16: raw = op("call i16 @kiln_bf16_bits(float ", x.v, ")"); break;
      case DType::i32: raw = op("trunc i64 ", x.v, " to i32"); break;
      case DType::bool_: raw = op("zext i1 ", x.v, " to i8"); break;
    }
    const std::string base = buffer(buf), idx = affine(index, sc);
    const std::string p = op("getelementptr ", storage_ty(t), ", ptr ", base, ", i64 ", idx);
    line("store ", storage_ty(t), " ", raw, ", ptr ", p, ", align ", dtype_size(t), alias(buf));
  }

  // ---- values ----
  Val value(int32_t i, Scope& sc) {
    if (const Val* v = sc.find(i)) return *v;
    const Instr& in = k_.instrs[static_cast<size_t>(i)];
    Val r;
    if (auto kept = kept_.find(i); kept != kept_.end() && sweep_ > in.pass) {
      const CT c = ct_of(in.dtype);
      const std::string p = op("getelementptr ", ty(c), ", ptr ", kept->second, ", i64 ", inner_flat(sc));
      r = {op("load ", ty(c), ", ptr ", p), c};
      sc.memo[i] = r;
      return r;
    }
    switch (in.kind) {
      case InstrKind::constant: r = {lit(in.value, ct_of(in.dtype)), ct_of(in.dtype)}; break;
      case InstrKind::size: r = {sym(in.size), CT::i64}; break;
      case InstrKind::index: r = {affine(in.index, sc), CT::i64}; break;
      case InstrKind::load: r = load(in, sc); break;
      case InstrKind::pointwise: r = pointwise(in, sc); break;
      case InstrKind::reduce: {
        KILN_CHECK(red_.count(i), "cpu codegen: kernel ", k_.name, ": reduction v", i, " read before its pass");
        const CT c = ct_of(in.dtype);
        r = {op("load ", ty(c), ", ptr ", slot(red_, i, c, sc.lane)), c};
        break;
      }
    }
    sc.memo[i] = r;
    return r;
  }

  Val fcall(const char* fn, CT c, const std::string& x) {
    return {op("call ", ty(c), " @llvm.", fn, ".", sfx(c), "(", ty(c), " ", x, ")"), c};
  }
  Val fbin(const char* o, CT c, const std::string& a, const std::string& b) {
    return {op(o, " ", ty(c), " ", a, ", ", b), c};
  }
  Val fneg(CT c, const std::string& a) { return {op("fneg ", ty(c), " ", a), c}; }
  Val select(const std::string& cond, CT c, const std::string& a, const std::string& b) {
    return {op("select i1 ", cond, ", ", ty(c), " ", a, ", ", ty(c), " ", b), c};
  }
  Val tanh_of(CT c, const std::string& x) {
    if (c == CT::f32) return {op("call float @kiln_tanhf(float ", x, ")"), c};
    return {op("call double @tanh(double ", x, ")"), c};
  }
  // exp: the inline polynomial for f32, LLVM's intrinsic (libm / libmvec) for f64.
  Val exp_of(CT c, const std::string& x) {
    if (c == CT::f32) return {op("call float @kiln_expf(float ", x, ")"), c};
    return fcall("exp", c, x);
  }
  Val sigmoid_of(CT c, const std::string& x) {
    const Val e = exp_of(c, fneg(c, x).v);
    return fbin("fdiv", c, lit(1, c), fbin("fadd", c, lit(1, c), e.v).v);
  }

  // In a reduction kernel: a division of a value that varies along the row by one that does not.
  bool divides_by_row_value(const Instr& in) const {
    return k_.kind == KernelKind::reduction && k_.instrs[static_cast<size_t>(in.args[0])].inner &&
           !k_.instrs[static_cast<size_t>(in.args[1])].inner;
  }

  Val pointwise(const Instr& in, Scope& sc) {
    std::vector<Val> a;
    std::vector<DType> at;
    for (int32_t x : in.args) {
      a.push_back(value(x, sc));
      at.push_back(k_.instrs[static_cast<size_t>(x)].dtype);
    }
    const DType out = in.dtype;
    const CT oc = ct_of(out);
    auto finish = [&](const Val& v) { return o_.emulate_precision_casts ? narrow(v, out) : v; };
    switch (in.op) {
      case OpId::cast: return to_dtype(a[0], out);
      case OpId::logical_not: return {op("xor i1 ", convert(a[0], CT::i1).v, ", true"), CT::i1};
      case OpId::isnan:
        if (!is_float(a[0].ct)) return {"false", CT::i1};
        return {op("fcmp uno ", ty(a[0].ct), " ", a[0].v, ", ", a[0].v), CT::i1};
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
        return {op(is_float(c) ? "fcmp " : "icmp ", is_float(c) ? p.first : p.second, " ", ty(c), " ", x.v, ", ", y.v),
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
    auto operand = [&](size_t k, CT c) { return at[k] == out ? convert(a[k], c) : to_dtype(a[k], out); };
    if (is_float(oc)) {
      std::vector<std::string> x;
      for (size_t k = 0; k < a.size(); ++k) x.push_back(operand(k, oc).v);
      const CT c = oc;
      switch (in.op) {
        case OpId::neg: return finish(fneg(c, x[0]));
        case OpId::abs: return finish(fcall("fabs", c, x[0]));
        case OpId::exp: return finish(exp_of(c, x[0]));
        case OpId::log: return finish(fcall("log", c, x[0]));
        case OpId::sqrt: return finish(fcall("sqrt", c, x[0]));
        case OpId::rsqrt: return finish(fbin("fdiv", c, lit(1, c), fcall("sqrt", c, x[0]).v));
        case OpId::reciprocal: return finish(fbin("fdiv", c, lit(1, c), x[0]));
        case OpId::sin: return finish(fcall("sin", c, x[0]));
        case OpId::cos: return finish(fcall("cos", c, x[0]));
        case OpId::tanh: return finish(tanh_of(c, x[0]));
        case OpId::sigmoid: return finish(sigmoid_of(c, x[0]));
        case OpId::silu: return finish(fbin("fmul", c, x[0], sigmoid_of(c, x[0]).v));
        case OpId::erf: return finish({op("call ", ty(c), c == CT::f32 ? " @erff(" : " @erf(", ty(c), " ", x[0], ")"), c});
        case OpId::gelu: {
          const std::string& mode = in.attrs.s(0);
          const std::string half = fbin("fmul", c, lit(0.5, c), x[0]).v;
          std::string inner;
          if (mode == "tanh") {
            const std::string x3 = fbin("fmul", c, fbin("fmul", c, x[0], x[0]).v, x[0]).v;
            const std::string u = fbin("fadd", c, x[0], fbin("fmul", c, lit(0.044715, c), x3).v).v;
            inner = tanh_of(c, fbin("fmul", c, lit(0.79788456080286535588, c), u).v).v;
          } else {
            const std::string u = fbin("fmul", c, x[0], lit(0.70710678118654752440, c)).v;
            inner = op("call ", ty(c), c == CT::f32 ? " @erff(" : " @erf(", ty(c), " ", u, ")");
          }
          return finish(fbin("fmul", c, half, fbin("fadd", c, lit(1, c), inner).v));
        }
        case OpId::relu: {
          const std::string le = op("fcmp ole ", ty(c), " ", x[0], ", ", lit(0, c));
          return finish(select(le, c, lit(0, c), x[0]));
        }
        case OpId::floor: return finish(fcall("floor", c, x[0]));
        case OpId::ceil: return finish(fcall("ceil", c, x[0]));
        case OpId::round: return finish(fcall("roundeven", c, x[0]));
        case OpId::sign: {
          const std::string gt = op("fcmp ogt ", ty(c), " ", x[0], ", ", lit(0, c));
          const std::string lt = op("fcmp olt ", ty(c), " ", x[0], ", ", lit(0, c));
          return finish(select(gt, c, lit(1, c), select(lt, c, lit(-1, c), x[0]).v));
        }
        case OpId::add: return finish(fbin("fadd", c, x[0], x[1]));
        case OpId::sub: return finish(fbin("fsub", c, x[0], x[1]));
        case OpId::mul: return finish(fbin("fmul", c, x[0], x[1]));
        case OpId::div:
          // Dividing a row by a per-row value (softmax's sum): one reciprocal per row, hoisted by
          // LLVM, and a product per element instead of a divide (a divide costs as much as the
          // exp of softmax). In f64 and rounded once, so the result is x / s rounded to f32 (a
          // reciprocal in f32 would be 1.5 ulp off and overflow for subnormal s).
          if (c == CT::f32 && divides_by_row_value(in))
          {
            const std::string num = convert({x[0], c}, CT::f64).v;
            const std::string rcp = op("fdiv double 1.0, ", convert({x[1], c}, CT::f64).v);
            return finish({op("fptrunc double ", op("fmul double ", num, ", ", rcp), " to float"), c});
          }
          return finish(fbin("fdiv", c, x[0], x[1]));
        case OpId::pow:
          return finish({op("call ", ty(c), " @llvm.pow.", sfx(c), "(", ty(c), " ", x[0], ", ", ty(c), " ", x[1], ")"), c});
        case OpId::maximum:
        case OpId::minimum: {
          const std::string uno = op("fcmp uno ", ty(c), " ", x[0], ", ", x[1]);
          const std::string better = op("fcmp ", in.op == OpId::maximum ? "ogt " : "olt ", ty(c), " ", x[0], ", ", x[1]);
          const std::string pick = select(better, c, x[0], x[1]).v;
          return finish(select(uno, c, lit(NAN, c), pick));
        }
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
          const std::string neg = op("icmp slt i64 ", x[0], ", 0");
          r.v = select(neg, CT::i64, op("sub i64 0, ", x[0]), x[0]).v;
          break;
        }
        case OpId::relu: r.v = select(op("icmp sgt i64 ", x[0], ", 0"), CT::i64, x[0], "0").v; break;
        case OpId::floor: case OpId::ceil: case OpId::round: r.v = x[0]; break;
        case OpId::sign: {
          const std::string gt = op("zext i1 ", op("icmp sgt i64 ", x[0], ", 0"), " to i64");
          const std::string lt = op("zext i1 ", op("icmp slt i64 ", x[0], ", 0"), " to i64");
          r.v = op("sub i64 ", gt, ", ", lt);
          break;
        }
        case OpId::add: r.v = op("add i64 ", x[0], ", ", x[1]); break;
        case OpId::sub: r.v = op("sub i64 ", x[0], ", ", x[1]); break;
        case OpId::mul: r.v = op("mul i64 ", x[0], ", ", x[1]); break;
        case OpId::pow: r.v = op("call i64 @kiln_ipow(i64 ", x[0], ", i64 ", x[1], ")"); break;
        case OpId::maximum: r.v = select(op("icmp sgt i64 ", x[0], ", ", x[1]), CT::i64, x[0], x[1]).v; break;
        case OpId::minimum: r.v = select(op("icmp slt i64 ", x[0], ", ", x[1]), CT::i64, x[0], x[1]).v; break;
        default: fail("cpu codegen: ", op_name(in.op), " has no integer form (kernel ", k_.name, ")");
      }
      return to_dtype(r, out);
    }
    fail("cpu codegen: no code for op ", op_name(in.op), " (kernel ", k_.name, ")");
  }

  // ---- loops ----
  // for (v = from; v < to; ++v) body(v): counted loop through an alloca.
  void loop(const std::string& from, const std::string& to, const std::function<void(const std::string&)>& body) {
    const std::string iv = alloca("i64");
    const std::string cond = label("cond"), bodyl = label("body"), done = label("done");
    line("store i64 ", from, ", ptr ", iv);
    line("br label %", cond);
    block(cond);
    const std::string v = op("load i64, ptr ", iv);
    line("br i1 ", op("icmp slt i64 ", v, ", ", to), ", label %", bodyl, ", label %", done);
    block(bodyl);
    body(v);
    line("store i64 ", op("add i64 ", v, ", 1"), ", ptr ", iv);
    // An unroll variant's hint on every loop: the vectoriser acts on innermost loops only.
    if (v_.unroll > 0)
      line("br label %", cond, ", !llvm.loop ",
           loop_property("!{!\"llvm.loop.interleave.count\", i32 " + std::to_string(v_.unroll) + "}"));
    else
      line("br label %", cond);
    block(done);
  }

  // Walks [begin, end) of a flattened domain whose last dim has extent C in runs that stay
  // within one row (and are at most `cap` long when cap > 0): body(row, col, len) per run.
  void walk_rows(const std::string& C, int64_t cap,
                 const std::function<void(const std::string&, const std::string&, const std::string&)>& body) {
    const std::string iv = alloca("i64");
    line("store i64 %begin, ptr ", iv);
    line("br label %seg");
    block("seg");
    const std::string i = op("load i64, ptr ", iv);
    line("br i1 ", op("icmp slt i64 ", i, ", %end"), ", label %segbody, label %exit");
    block("segbody");
    const std::string row = op("sdiv i64 ", i, ", ", C);
    const std::string col = op("srem i64 ", i, ", ", C);
    const std::string rem = op("sub i64 ", C, ", ", col);
    const std::string left = op("sub i64 %end, ", i);
    std::string len = select(op("icmp slt i64 ", rem, ", ", left), CT::i64, rem, left).v;
    if (cap > 0) len = select(op("icmp slt i64 ", len, ", ", cap), CT::i64, len, std::to_string(cap)).v;
    body(row, col, len);
    line("store i64 ", op("add i64 ", i, ", ", len), ", ptr ", iv);
    line("br label %seg");
    block("exit");
    line("ret void");
  }

  // Splits a flat index over extents[first..last) (row-major) into vars.
  void unflatten(const std::string& flat, size_t first, size_t last, Scope& sc) {
    std::string r = flat;
    for (size_t d = last; d-- > first;) {
      if (d == first) {
        sc.vars[d] = r;
        break;
      }
      const std::string e = sym(k_.domain[d]);
      sc.vars[d] = op("srem i64 ", r, ", ", e);
      r = op("sdiv i64 ", r, ", ", e);
    }
  }

  void emit_pointwise() {
    const size_t n = k_.domain.size();
    Scope top;
    top.vars.assign(n, "");
    if (n == 0) {
      line("br i1 ", op("icmp sgt i64 %end, %begin"), ", label %one, label %exit");
      block("one");
      for (const schedule::Store& st : k_.stores) store(st.buffer, st.index, value(st.value, top), top);
      line("br label %exit");
      block("exit");
      line("ret void");
      return;
    }
    // Walk [begin, end) of the flattened domain one row segment (of the last dim) at a time.
    walk_rows(sym(k_.domain[n - 1]), 0, [&](const std::string& row, const std::string& col, const std::string& len) {
      Scope outer;
      outer.vars.assign(n, "");
      if (n > 1) unflatten(row, 0, n - 1, outer);
      loop(col, op("add i64 ", col, ", ", len), [&](const std::string& c) {
        Scope in;
        in.vars = outer.vars;
        in.vars[n - 1] = c;
        in.parent = &outer;
        for (const schedule::Store& st : k_.stores) store(st.buffer, st.index, value(st.value, in), in);
      });
    });
  }

  // Accumulator handling of the reductions. Row strategy: one scalar slot per reduction. Column
  // strategy: an array of kLanes slots, one per outer point of the block, indexed by `lane`.
  std::string slot(std::map<int32_t, std::string>& m, int32_t i, CT c, const std::string& lane) {
    if (!m.count(i)) {
      m[i] = lanes_ > 0 ? alloca(("[" + std::to_string(lanes_) + " x " + ty(c) + "]").c_str()) : alloca(ty(c));
      slot_type_[m[i]] = c;
    }
    if (lanes_ == 0) return m[i];
    return op("getelementptr [", lanes_, " x ", ty(c), "], ptr ", m[i], ", i64 0, i64 ", lane);
  }

  void init_acc(int32_t i, const std::string& lane) {
    const Instr& in = k_.instrs[static_cast<size_t>(i)];
    const CT c = ct_of(in.dtype);
    const CT ac = ct_of(k_.instrs[static_cast<size_t>(in.args[0])].dtype);
    switch (in.reduce) {
      case ReduceKind::sum: case ReduceKind::prod:
        line("store ", ty(c), " ", lit(in.reduce == ReduceKind::sum ? 0 : 1, c), ", ptr ", slot(acc_, i, c, lane));
        break;
      case ReduceKind::max: case ReduceKind::min: {
        const bool mx = in.reduce == ReduceKind::max;
        std::string init;
        if (is_float(ac)) init = lit(mx ? -INFINITY : INFINITY, ac);
        else if (ac == CT::i64) init = mx ? std::to_string(INT64_MIN) : std::to_string(INT64_MAX);
        else init = mx ? "false" : "true";
        line("store ", ty(ac), " ", init, ", ptr ", slot(acc_, i, ac, lane));
        if (is_float(ac)) line("store i1 false, ptr ", slot(nan_, i, CT::i1, lane));
        break;
      }
      case ReduceKind::argmax: case ReduceKind::argmin: {
        const CT vc = ac == CT::i1 ? CT::i64 : ac;
        const bool mx = in.reduce == ReduceKind::argmax;
        std::string init = is_float(vc) ? lit(mx ? -INFINITY : INFINITY, vc)
                                        : (mx ? std::to_string(INT64_MIN) : std::to_string(INT64_MAX));
        line("store ", ty(vc), " ", init, ", ptr ", slot(acc_, i, vc, lane));
        line("store i64 0, ptr ", slot(idx_, i, CT::i64, lane));
        if (is_float(vc)) line("store i1 false, ptr ", slot(nan_, i, CT::i1, lane));
        break;
      }
    }
  }

  void combine(int32_t i, Scope& sc, const std::string& flat) {
    const Instr& in = k_.instrs[static_cast<size_t>(i)];
    const CT c = ct_of(in.dtype);
    Val x = value(in.args[0], sc);
    switch (in.reduce) {
      case ReduceKind::sum: case ReduceKind::prod: {
        x = convert(x, c);
        const std::string p = slot(acc_, i, c, sc.lane);
        const std::string a = op("load ", ty(c), ", ptr ", p);
        const bool sum = in.reduce == ReduceKind::sum;
        const std::string r = is_float(c) ? op(sum ? "fadd reassoc " : "fmul reassoc ", ty(c), " ", a, ", ", x.v)
                                          : op(sum ? "add " : "mul ", ty(c), " ", a, ", ", x.v);
        line("store ", ty(c), " ", r, ", ptr ", p);
        break;
      }
      case ReduceKind::max: case ReduceKind::min: {
        const bool mx = in.reduce == ReduceKind::max;
        const std::string p = slot(acc_, i, x.ct, sc.lane);
        const std::string a = op("load ", ty(x.ct), ", ptr ", p);
        std::string r;
        if (is_float(x.ct)) {
          // nnan nsz let LLVM vectorise the fold (its min/max reductions require them). NaN is
          // tracked by the flag below, which replaces the result at the end, so a fold that saw
          // a NaN (whose value nnan leaves undefined) is never used; the sign of a zero maximum
          // may differ from the reference's, as torch's vectorised kernels' does.
          r = op("call nnan nsz ", ty(x.ct), " @llvm.", mx ? "maxnum." : "minnum.", sfx(x.ct), "(", ty(x.ct), " ", a,
                 ", ", ty(x.ct), " ", x.v, ")");
          const std::string np = slot(nan_, i, CT::i1, sc.lane);
          const std::string f = op("load i1, ptr ", np);
          line("store i1 ", op("or i1 ", f, ", ", op("fcmp uno ", ty(x.ct), " ", x.v, ", ", x.v)), ", ptr ", np);
        } else if (x.ct == CT::i64) {
          r = select(op("icmp ", mx ? "sgt" : "slt", " i64 ", x.v, ", ", a), CT::i64, x.v, a).v;
        } else {
          r = op(mx ? "or i1 " : "and i1 ", a, ", ", x.v);
        }
        line("store ", ty(x.ct), " ", r, ", ptr ", p);
        break;
      }
      case ReduceKind::argmax: case ReduceKind::argmin: {
        const bool mx = in.reduce == ReduceKind::argmax;
        if (x.ct == CT::i1) x = convert(x, CT::i64);
        const std::string p = slot(acc_, i, x.ct, sc.lane);
        const std::string a = op("load ", ty(x.ct), ", ptr ", p);
        std::string take;
        if (is_float(x.ct)) {
          // The first NaN wins; after it nothing replaces it.
          const std::string np = slot(nan_, i, CT::i1, sc.lane);
          const std::string have_nan = op("load i1, ptr ", np);
          const std::string xnan = op("fcmp uno ", ty(x.ct), " ", x.v, ", ", x.v);
          const std::string better = op("fcmp ", mx ? "ogt " : "olt ", ty(x.ct), " ", x.v, ", ", a);
          const std::string fresh = op("xor i1 ", have_nan, ", true"), wins = op("or i1 ", xnan, ", ", better);
          take = op("and i1 ", fresh, ", ", wins);
          line("store i1 ", op("or i1 ", have_nan, ", ", xnan), ", ptr ", np);
        } else {
          take = op("icmp ", mx ? "sgt" : "slt", " i64 ", x.v, ", ", a);
        }
        line("store ", ty(x.ct), " ", select(take, x.ct, x.v, a).v, ", ptr ", p);
        const std::string ip = slot(idx_, i, CT::i64, sc.lane);
        const std::string bi = op("load i64, ptr ", ip);
        line("store i64 ", select(take, CT::i64, flat, bi).v, ", ptr ", ip);
        break;
      }
    }
  }

  void finish_acc(int32_t i, const std::string& lane) {
    const Instr& in = k_.instrs[static_cast<size_t>(i)];
    const CT c = ct_of(in.dtype);
    Val r;
    switch (in.reduce) {
      case ReduceKind::sum: case ReduceKind::prod: r = {op("load ", ty(c), ", ptr ", slot(acc_, i, c, lane)), c}; break;
      case ReduceKind::max: case ReduceKind::min: {
        const CT ac = ct_of(k_.instrs[static_cast<size_t>(in.args[0])].dtype);
        r = {op("load ", ty(ac), ", ptr ", slot(acc_, i, ac, lane)), ac};
        if (is_float(ac)) r = select(op("load i1, ptr ", slot(nan_, i, CT::i1, lane)), ac, lit(NAN, ac), r.v);
        r = to_dtype(r, in.dtype);
        break;
      }
      case ReduceKind::argmax: case ReduceKind::argmin:
        r = to_dtype({op("load i64, ptr ", slot(idx_, i, CT::i64, lane)), CT::i64}, in.dtype);
        break;
    }
    const std::string v = convert(r, c).v, p = slot(red_, i, c, lane);
    line("store ", ty(c), " ", v, ", ptr ", p);
  }

  // The row-major position over the inner dims (argmax's index).
  std::string inner_flat(const Scope& sc) {
    std::string acc = "0";
    SymInt stride = 1;
    for (size_t d = k_.domain.size(); d-- > static_cast<size_t>(k_.num_outer);) {
      std::string term = stride == 1 ? sc.vars[d] : op("mul i64 ", sym(stride), ", ", sc.vars[d]);
      acc = acc == "0" ? term : op("add i64 ", acc, ", ", term);
      stride = stride * k_.domain[d];
    }
    return acc;
  }

  // Nested loops over the inner dims, innermost contiguous; body gets the innermost scope.
  void inner_loops(Scope& parent, size_t d, const std::function<void(Scope&)>& body) {
    if (d == k_.domain.size()) {
      body(parent);
      return;
    }
    loop("0", sym(k_.domain[d]), [&](const std::string& v) {
      Scope sc;
      sc.vars = parent.vars;
      sc.vars[d] = v;
      sc.parent = &parent;
      inner_loops(sc, d + 1, body);
    });
  }

  bool column_strategy() const { return uses_column_strategy(k_); }

  std::vector<int32_t> reductions_of_pass(int32_t p) const {
    std::vector<int32_t> reds;
    for (size_t i = 0; i < k_.instrs.size(); ++i)
      if (k_.instrs[i].kind == InstrKind::reduce && k_.instrs[i].pass - 1 == p) reds.push_back(static_cast<int32_t>(i));
    return reds;
  }

  // Inner values worth keeping from their pass for later ones (exp and the like: recomputing
  // costs at least kKeepCost), each in a row scratch of the inner extent on the stack. Only
  // where that extent is static and the scratches stay within kKeepBytes (so they stay in L1/L2
  // cache between the passes); otherwise they are recomputed.
  static constexpr int kKeepCost = 4;
  static constexpr int64_t kKeepBytes = 64 * 1024;
  void keep_values() {
    SymInt inner = 1;
    for (size_t d = static_cast<size_t>(k_.num_outer); d < k_.domain.size(); ++d) inner = inner * k_.domain[d];
    if (!inner.is_static() || inner.hint() <= 0) return;
    int64_t bytes = 0;
    for (int32_t i : schedule::values_reused_across_passes(k_, kKeepCost)) {
      const CT c = ct_of(k_.instrs[static_cast<size_t>(i)].dtype);
      const int64_t size = inner.hint() * (c == CT::f64 || c == CT::i64 ? 8 : 4);
      if (bytes + size > kKeepBytes) break;
      bytes += size;
      kept_[i] = alloca(("[" + std::to_string(inner.hint()) + " x " + ty(c) + "], align 64").c_str());
    }
  }

  // One step of pass p at the point of scope sc: fold into the accumulators, store what is due.
  void pass_body(int32_t p, const std::vector<int32_t>& reds, Scope& sc) {
    for (const auto& [i, scratch] : kept_) {
      if (k_.instrs[static_cast<size_t>(i)].pass != p) continue;
      const Val x = value(i, sc);
      const std::string q = op("getelementptr ", ty(x.ct), ", ptr ", scratch, ", i64 ", inner_flat(sc));
      line("store ", ty(x.ct), " ", x.v, ", ptr ", q);
    }
    std::string flat;
    for (int32_t r : reds) {
      const ReduceKind kind = k_.instrs[static_cast<size_t>(r)].reduce;
      if ((kind == ReduceKind::argmax || kind == ReduceKind::argmin) && flat.empty()) flat = inner_flat(sc);
      combine(r, sc, flat);
    }
    for (const schedule::Store& st : k_.stores)
      if (k_.store_is_inner(st) && k_.instrs[static_cast<size_t>(st.value)].pass == p)
        store(st.buffer, st.index, value(st.value, sc), sc);
  }

  void outer_stores(Scope& sc) {
    for (const schedule::Store& st : k_.stores)
      if (!k_.store_is_inner(st)) store(st.buffer, st.index, value(st.value, sc), sc);
  }

  void emit_reduction() {
    const size_t n = k_.domain.size();
    const size_t no = static_cast<size_t>(k_.num_outer);
    const int32_t passes = k_.num_passes();
    if (!column_strategy()) {
      // Row strategy: one outer point at a time, each pass one sweep over the inner dims.
      keep_values();
      loop("%begin", "%end", [&](const std::string& o) {
        Scope outer;
        outer.vars.assign(n, "");
        if (no > 0) unflatten(o, 0, no, outer);
        for (int32_t p = 0; p < passes; ++p) {
          sweep_ = p;
          const std::vector<int32_t> reds = reductions_of_pass(p);
          for (int32_t r : reds) init_acc(r, "");
          inner_loops(outer, no, [&](Scope& sc) { pass_body(p, reds, sc); });
          for (int32_t r : reds) finish_acc(r, "");
        }
        Scope after;
        after.vars = outer.vars;
        after.parent = &outer;
        outer_stores(after);
      });
      line("ret void");
      return;
    }
    // Column strategy: a block of up to kLanes consecutive points of the last outer dim at a
    // time; each step of the inner loops reads one contiguous run of the block (vectorised).
    lanes_ = v_.lanes > 0 ? v_.lanes : kLanes;
    walk_rows(sym(k_.domain[no - 1]), lanes_, [&](const std::string& row, const std::string& col, const std::string& len) {
      Scope outer;
      outer.vars.assign(n, "");
      if (no > 1) unflatten(row, 0, no - 1, outer);
      auto lane_scope = [&](Scope& parent, const std::string& lane) {
        Scope sc;
        sc.vars = parent.vars;
        sc.vars[no - 1] = op("add i64 ", col, ", ", lane);
        sc.lane = lane;
        sc.parent = &parent;
        return sc;
      };
      for (int32_t p = 0; p < passes; ++p) {
        const std::vector<int32_t> reds = reductions_of_pass(p);
        loop("0", len, [&](const std::string& l) {
          for (int32_t r : reds) init_acc(r, l);
        });
        inner_loops(outer, no, [&](Scope& in) {
          loop("0", len, [&](const std::string& l) {
            Scope sc = lane_scope(in, l);
            pass_body(p, reds, sc);
          });
        });
        loop("0", len, [&](const std::string& l) {
          for (int32_t r : reds) finish_acc(r, l);
        });
      }
      loop("0", len, [&](const std::string& l) {
        Scope sc = lane_scope(outer, l);
        outer_stores(sc);
      });
    });
  }

  // ---- the generated gemm ----
 public:
  // Whether this matmul kernel multiplies with generated tiles rather than the BLAS call: f32,
  // the right operand's rows contiguous (vector loads), and the variant or cpu.matmul asks for
  // it. "auto" is the BLAS call, with the tiles as max-autotune's other candidate: measured on
  // the suite's shapes, the tiles win on small products (512x256x256: 0.24 vs 0.52 ms) and lose
  // on large ones (1024^3: 21.9 vs 8.8 ms), and their code takes ~3x as long to compile.
  bool generated_gemm() const {
    const schedule::Gemm& g = *k_.gemm;
    if (g.dtype != DType::f32 || !(g.b_col_stride == 1)) return false;
    if (v_.gemm >= 0) return v_.gemm == 1;
    return o_.matmul == "generated";
  }

 private:

  // A loop with a step: for (v = from; v < to; v += step) body(v). Not unrolled: the gemm's
  // loops carry enough independent work per step, and unrolling them was most of its compile
  // time.
  void loop_by(const std::string& from, const std::string& to, int64_t step,
               const std::function<void(const std::string&)>& body) {
    const std::string iv = alloca("i64");
    const std::string cond = label("cond"), bodyl = label("body"), done = label("done");
    line("store i64 ", from, ", ptr ", iv);
    line("br label %", cond);
    block(cond);
    const std::string v = op("load i64, ptr ", iv);
    line("br i1 ", op("icmp slt i64 ", v, ", ", to), ", label %", bodyl, ", label %", done);
    block(bodyl);
    body(v);
    line("store i64 ", op("add i64 ", v, ", ", step), ", ptr ", iv);
    line("br label %", cond, ", !llvm.loop ", no_unroll());
    block(done);
  }
  // Loop metadata: one distinct loop id per loop (ids after this function's alias scopes).
  // A loop id (for `br ..., !llvm.loop <id>`) carrying one property, e.g. !{!"llvm.loop.unroll.disable"}.
  std::string loop_property(std::string property) {
    const int64_t id = v_.metadata_base + kLoopMetadataBase + 2 * static_cast<int64_t>(loop_ids_.size());
    loop_ids_.emplace_back(id, std::move(property));
    return "!" + std::to_string(id);
  }
  std::string no_unroll() { return loop_property("!{!\"llvm.loop.unroll.disable\"}"); }
  std::string loop_metadata() const {
    std::string m;
    for (const auto& [id, property] : loop_ids_)
      m += "!" + std::to_string(id) + " = distinct !{!" + std::to_string(id) + ", !" + std::to_string(id + 1) + "}\n!" +
           std::to_string(id + 1) + " = " + property + "\n";
    return m;
  }
  std::string splat_i64(const std::string& x) {
    return op("shufflevector <16 x i64> ", op("insertelement <16 x i64> poison, i64 ", x, ", i64 0"),
              ", <16 x i64> poison, <16 x i32> zeroinitializer");
  }

  // C[0:rows, 0:N] = A[0:rows, 0:K] @ B[0:K, 0:N] (C contiguous with row stride N; A by element
  // strides; B rows contiguous). Tiles of tile_rows rows (4 unless a variant says otherwise) x
  // 32 columns keep their 2 x tile_rows vector accumulators in registers over the whole K loop
  // (each step: two vector loads of B, one broadcast of A per row, two fused multiply-adds per
  // row); the columns past N are masked off, and the rows left over go in tiles of half, a
  // quarter, ... as many rows.
  void tiled_gemm(const std::string& ap, const std::string& bp, const std::string& cp, const std::string& rows,
                  const std::string& N, const std::string& K, const std::string& a_rs, const std::string& a_cs,
                  const std::string& b_rs) {
    const std::string lanes = "<i64 0, i64 1, i64 2, i64 3, i64 4, i64 5, i64 6, i64 7, i64 8, i64 9, i64 10, i64 11, "
                              "i64 12, i64 13, i64 14, i64 15>";
    const std::string Nv = splat_i64(N);
    auto tile = [&](int64_t R, const std::string& r0) {
      loop_by("0", N, 32, [&](const std::string& j0) {
        std::string mask[2];
        std::vector<std::array<std::string, 2>> acc(static_cast<size_t>(R));
        for (int h = 0; h < 2; ++h) {
          const std::string j = op("add i64 ", j0, ", ", 16 * h);
          mask[h] = op("icmp slt <16 x i64> ", op("add <16 x i64> ", splat_i64(j), ", ", lanes), ", ", Nv);
        }
        for (int64_t t = 0; t < R; ++t)
          for (int h = 0; h < 2; ++h) {
            acc[t][h] = alloca("<16 x float>");
            line("store <16 x float> zeroinitializer, ptr ", acc[t][h]);
          }
        loop_by("0", K, 1, [&](const std::string& k) {
          const std::string brow = op("add i64 ", op("mul i64 ", k, ", ", b_rs), ", ", j0);
          std::string bv[2];
          for (int h = 0; h < 2; ++h) {
            const std::string p = op("getelementptr float, ptr ", bp, ", i64 ", op("add i64 ", brow, ", ", 16 * h));
            bv[h] = op("call <16 x float> @llvm.masked.load.v16f32.p0(ptr ", p, ", i32 4, <16 x i1> ", mask[h],
                       ", <16 x float> zeroinitializer)");
          }
          const std::string acol = op("mul i64 ", k, ", ", a_cs);
          for (int64_t t = 0; t < R; ++t) {
            const std::string arow = op("mul i64 ", op("add i64 ", r0, ", ", t), ", ", a_rs);
            const std::string a = op("load float, ptr ", op("getelementptr float, ptr ", ap, ", i64 ",
                                                            op("add i64 ", arow, ", ", acol)));
            const std::string av = op("shufflevector <16 x float> ", op("insertelement <16 x float> poison, float ", a, ", i64 0"),
                                      ", <16 x float> poison, <16 x i32> zeroinitializer");
            for (int h = 0; h < 2; ++h) {
              const std::string c = op("load <16 x float>, ptr ", acc[t][h]);
              line("store <16 x float> ",
                   op("call <16 x float> @llvm.fmuladd.v16f32(<16 x float> ", av, ", <16 x float> ", bv[h], ", <16 x float> ", c, ")"),
                   ", ptr ", acc[t][h]);
            }
          }
        });
        for (int64_t t = 0; t < R; ++t) {
          const std::string crow = op("mul i64 ", op("add i64 ", r0, ", ", t), ", ", N);
          for (int h = 0; h < 2; ++h) {
            const std::string p = op("getelementptr float, ptr ", cp, ", i64 ",
                                     op("add i64 ", op("add i64 ", crow, ", ", j0), ", ", 16 * h));
            line("call void @llvm.masked.store.v16f32.p0(<16 x float> ", op("load <16 x float>, ptr ", acc[t][h]),
                 ", ptr ", p, ", i32 4, <16 x i1> ", mask[h], ")");
          }
        }
      });
    };
    // rows = full tiles of T rows, then at most one tile of each smaller power of 2: the bits of
    // the remainder, highest first.
    const int64_t T = v_.tile_rows;
    KILN_CHECK(T >= 1 && (T & (T - 1)) == 0, "cpu codegen: gemm tile rows must be a power of 2, not ", T);
    std::string done = op("mul i64 ", op("sdiv i64 ", rows, ", ", T), ", ", T);
    loop_by("0", done, T, [&](const std::string& r) { tile(T, r); });
    for (int64_t t = T / 2; t >= 1; t /= 2) {
      const std::string next = op("add i64 ", done, ", ", op("and i64 ", op("sub i64 ", rows, ", ", done), ", ", t));
      loop_by(done, next, t, [&](const std::string& r) { tile(t, r); });
      done = next;
    }
  }

  void emit_matmul() {
    const schedule::Gemm& g = *k_.gemm;
    const size_t n = k_.domain.size();  // batch..., m, n
    const size_t nb = g.batch.size();
    const std::string M = sym(g.m), N = sym(g.n), K = sym(g.k);
    // Rows of the flattened (batch..., m): one gemm per run of rows within one batch element.
    walk_rows(M, 0, [&](const std::string& b, const std::string& m0, const std::string& rows) {
      Scope outer;
      outer.vars.assign(n, "");
      if (nb > 0) unflatten(b, 0, nb, outer);
      // Operand offsets of this batch element and row block.
      auto base = [&](const SymInt& off, const SymShape& bstrides, const SymInt& row_stride, const std::string& row0) {
        std::string acc = sym(off);
        for (size_t d = 0; d < nb; ++d)
          if (!(bstrides[d] == 0)) acc = op("add i64 ", acc, ", ", op("mul i64 ", sym(bstrides[d]), ", ", outer.vars[d]));
        if (!row0.empty()) acc = op("add i64 ", acc, ", ", op("mul i64 ", sym(row_stride), ", ", row0));
        return acc;
      };
      const std::string aoff = base(g.a_offset, g.a_batch_strides, g.a_row_stride, m0);
      const std::string boff = base(g.b_offset, g.b_batch_strides, g.b_row_stride, "");
      const std::string matrix = op("mul i64 ", M, ", ", N);
      const std::string batch_off = op("mul i64 ", b, ", ", matrix), row_off = op("mul i64 ", m0, ", ", N);
      const std::string coff = op("add i64 ", batch_off, ", ", row_off);
      const char* et = g.dtype == DType::f64 ? "double" : "float";
      const std::string ap = op("getelementptr ", et, ", ptr ", buffer(g.a), ", i64 ", aoff);
      const std::string bp = op("getelementptr ", et, ", ptr ", buffer(g.b), ", i64 ", boff);
      const std::string cp = op("getelementptr ", et, ", ptr ", buffer(g.c), ", i64 ", coff);
      // Row-major operands: a unit column stride is "no transpose" with the row stride as leading
      // dimension; a unit row stride is "transpose" with the column stride.
      // The BLAS wants ld >= the other extent even where it is never used (one row, one column).
      auto trans = [&](const SymInt& rs, const SymInt& cs, const std::string& rows, const std::string& cols,
                       std::string& ld) {
        const std::string unit = op("icmp eq i64 ", sym(cs), ", 1");
        auto at_least = [&](const std::string& x, const std::string& lo) {
          return select(op("icmp slt i64 ", x, ", ", lo), CT::i64, lo, x).v;
        };
        const std::string ld_rows = at_least(sym(rs), cols), ld_cols = at_least(sym(cs), rows);
        ld = select(unit, CT::i64, ld_rows, ld_cols).v;
        return op("zext i1 ", op("xor i1 ", unit, ", true"), " to i32");
      };
      if (generated_gemm()) {
        const std::string a_rs = sym(g.a_row_stride), a_cs = sym(g.a_col_stride), b_rs = sym(g.b_row_stride);
        tiled_gemm(ap, bp, cp, rows, N, K, a_rs, a_cs, b_rs);
      } else {
      std::string lda, ldb;
      const std::string ta = trans(g.a_row_stride, g.a_col_stride, M, K, lda);
      const std::string tb = trans(g.b_row_stride, g.b_col_stride, K, N, ldb);
      line("call void @", g.dtype == DType::f64 ? "kiln_dgemm" : "kiln_sgemm", "(i32 ", ta, ", i32 ", tb, ", i64 ", rows, ", i64 ", N, ", i64 ", K, ", ptr ", ap,
           ", i64 ", lda, ", ptr ", bp, ", i64 ", ldb, ", ptr ", cp, ", i64 ", N, ")");
      }
      if (k_.stores.empty()) return;
      // The epilogue over the rows just multiplied, while they are in cache.
      loop(m0, op("add i64 ", m0, ", ", rows), [&](const std::string& m) {
        Scope rs;
        rs.vars = outer.vars;
        rs.vars[n - 2] = m;
        rs.parent = &outer;
        loop("0", N, [&](const std::string& c) {
          Scope sc;
          sc.vars = rs.vars;
          sc.vars[n - 1] = c;
          sc.parent = &rs;
          for (const schedule::Store& st : k_.stores) store(st.buffer, st.index, value(st.value, sc), sc);
        });
      });
    });
  }
};

// Declarations and helpers every kernel may use.
constexpr const char* kPrelude = R"(; Kiln CPU kernels (LLVM 16 IR)
declare float @llvm.exp.f32(float)
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
declare float @erff(float) nounwind readnone
declare double @erf(double) nounwind readnone
declare double @tanh(double) nounwind readnone
declare <16 x float> @llvm.masked.load.v16f32.p0(ptr, i32, <16 x i1>, <16 x float>)
declare void @llvm.masked.store.v16f32.p0(<16 x float>, ptr, i32, <16 x i1>)
declare <16 x float> @llvm.fmuladd.v16f32(<16 x float>, <16 x float>, <16 x float>)
declare void @kiln_sgemm(i32, i32, i64, i64, i64, ptr, i64, ptr, i64, ptr, i64)
declare void @kiln_dgemm(i32, i32, i64, i64, i64, ptr, i64, ptr, i64, ptr, i64)

; exp for f32, inline so loops vectorise at full width without calls (as XLA's CPU backend
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

attributes #0 = { nounwind }
attributes #1 = { nounwind "prefer-vector-width"="256" }
attributes #2 = { nounwind "prefer-vector-width"="512" }
attributes #3 = { nounwind "prefer-vector-width"="128" }
)";

}  // namespace

plan::KernelPlan generate(const schedule::Schedule& s, const CodegenOptions& options) {
  plan::KernelPlan p = lower::plan_skeleton(s, "cpu");
  p.prelude = kPrelude;
  const ShapeEnv& env = s.graph.shapes();
  for (size_t pk_index = 0; pk_index < s.kernels.size(); ++pk_index) {
    const Kernel& k = s.kernels[pk_index];
    plan::PlanKernel pk = lower::kernel_skeleton(k);
    if (!k.reference) {
      pk.entry = k.name;
      // Metadata ids: a range of 4096 per function, so kernels can share any module.
      int64_t next_metadata = static_cast<int64_t>(pk_index) * 16 * 4096 + 1;
      FunctionEmitter::Variant main;
      main.metadata_base = next_metadata;
      pk.source = FunctionEmitter(k, s, options, main).emit();
      if (options.autotune_gemm && options.matmul == "auto" && k.kind == KernelKind::matmul &&
          k.gemm->dtype == DType::f32 && k.gemm->b_col_stride == 1) {
        // max-autotune: the BLAS call and the generated tiles, whichever the main one is not.
        const bool main_generated = FunctionEmitter(k, s, options, main).generated_gemm();
        FunctionEmitter::Variant v{k.name + (main_generated ? "_blas" : "_tiled"), main_generated ? 0 : 2, 0};
        v.gemm = main_generated ? 0 : 1;
        v.metadata_base = (next_metadata += 4096);
        pk.source += "\n" + FunctionEmitter(k, s, options, v).emit();
        pk.variants.push_back(v.name);
        // The generated tiles in other heights: 2 rows (more tiles to spread over threads) and 8
        // (each B vector reused by more rows; 16 of AVX-512's 32 registers hold accumulators).
        for (int64_t rows : {2, 8}) {
          FunctionEmitter::Variant t{k.name + "_tiled_r" + std::to_string(rows), 2, 0, 1};
          t.tile_rows = rows;
          t.metadata_base = (next_metadata += 4096);
          pk.source += "\n" + FunctionEmitter(k, s, options, t).emit();
          pk.variants.push_back(t.name);
        }
      }
      if (options.autotune_variants && k.kind != KernelKind::matmul) {
        // max-autotune: the same kernel for other vector widths (and column block sizes); the
        // runtime times them on the first call and keeps the fastest.
        std::vector<FunctionEmitter::Variant> vs = {{k.name + "_w256", 1, 0}, {k.name + "_w512", 2, 0}};
        if (k.kind == KernelKind::reduction) vs[1] = {k.name + "_host", 0, 0};  // the default is 512
        if (uses_column_strategy(k)) {
          vs.push_back({k.name + "_b64", 0, 64});
          vs.push_back({k.name + "_b256", 0, 256});
        }
        // Unrolled once (one vector accumulator) and four times, at Kiln's vector width.
        for (int unroll : {1, 4}) {
          FunctionEmitter::Variant u{k.name + "_u" + std::to_string(unroll)};
          u.unroll = unroll;
          vs.push_back(u);
        }
        for (FunctionEmitter::Variant v : vs) {
          v.metadata_base = (next_metadata += 4096);
          pk.source += "\n" + FunctionEmitter(k, s, options, v).emit();
          pk.variants.push_back(v.name);
        }
      }
      const std::vector<int64_t> ex = env.examples();
      if (k.kind == KernelKind::pointwise) {
        pk.parallel_extent = k.outer_extent();
        pk.grain = options.pointwise_grain;
      } else if (k.kind == KernelKind::reduction) {
        pk.parallel_extent = k.outer_extent();
        SymInt inner = 1;
        for (size_t d = static_cast<size_t>(k.num_outer); d < k.domain.size(); ++d) inner = inner * k.domain[d];
        pk.grain = std::max<int64_t>(1, options.reduction_grain / std::max<int64_t>(1, inner.evaluate(ex)));
        if (uses_column_strategy(k)) pk.grain = std::max(pk.grain, kLanes);
      } else {
        SymInt rows = k.gemm->m;
        for (const SymInt& b : k.gemm->batch) rows = rows * b;
        pk.parallel_extent = rows;
        pk.grain = 16;
      }
    }
    p.kernels.push_back(std::move(pk));
  }
  if (plan::replay_enabled()) plan::record_for_replay(p, s.str());
  return p;
}

plan::KernelPlan generate_plan(const Graph& g) { return generate(schedule::schedule_graph(g)); }

}  // namespace kiln::cpu
