// Kernel IR -> LLVM IR for the NVPTX backend (see codegen.h, CodegenOptions::compiler): the same
// kernels cuda_c.cpp prints as CUDA C, as a whole LLVM module per kernel, which the runtime
// compiles with LLVM's NVPTX backend to PTX and nvJitLink to a cubin, skipping NVRTC's C++ front
// end and NVVM (docs/cuda.md: about 25 ms of NVRTC's time per program, even for a kernel of a
// few lines). Numerics are cuda_c.cpp's op for op: f32 exp and division as torch.compile's
// Triton kernels compute them (ex2.approx, div.full) unless precise_math, libdevice for the rest
// of the math (the runtime links in the __nv_ functions a module calls), f16/bf16 computed in
// f32 and rounded where stored, integers in 64 bits wrapped to their width.
//
// This file prints the thread structure; every value comes from the LLVM IR printer's NVPTX
// flavour (targets/render/llvm). Values are SSA registers; a C variable of cuda_c.cpp (a masked
// load's result) is an alloca that LLVM's SROA turns back into registers.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "internal.h"
#include "kiln/cstyle/structure.h"
#include "kiln/graph/error.h"
#include "kiln/render/llvm.h"

namespace kiln::cuda::detail {

using schedule::Affine;
using schedule::Instr;
using schedule::InstrKind;
using schedule::Kernel;
using schedule::KernelKind;
using schedule::ReduceKind;

// The first line of every module (is_nvptx_program).
constexpr const char* kModuleHeader = "; Kiln CUDA kernel ";

namespace {

using render::llvm::CT;
using render::llvm::ct_of;
using render::llvm::Fn;
using render::llvm::is_float;
using render::llvm::literal;
using render::llvm::storage_type;
using render::llvm::type_of;
using render::llvm::Val;

struct Scope {
  std::vector<std::string> vars;  // i64 registers, "" where not bound
  std::map<int32_t, Val> memo;
  const Scope* parent = nullptr;
  const Val* find(int32_t i) const {
    for (const Scope* s = this; s; s = s->parent)
      if (auto it = s->memo.find(i); it != s->memo.end()) return &it->second;
    return nullptr;
  }
  Scope child() const {
    Scope c;
    c.vars = vars;
    c.parent = this;
    return c;
  }
};

// Vector accesses (as cuda_c.cpp's): 4 consecutive elements of the last dim; f32 and i32 as 128
// bits, f16 and bf16 as 64.
constexpr int kVec = 4;
// The largest block for which no register bound is needed: 256 threads of 255 registers (ptxas's
// most a thread) fit an SM's 65536.
constexpr int64_t kUnboundedBlock = 256;
const char* vec_elem(DType t) {
  switch (t) {
    case DType::f32: return "float";
    case DType::i32: return "i32";
    case DType::f16: return "half";
    case DType::bf16: return "i16";
    default: return nullptr;
  }
}

class NvptxEmitter : public render::llvm::Printer {
 public:
  NvptxEmitter(const Kernel& k, const schedule::Schedule& s, const CodegenOptions& o)
      : Printer(render::llvm::nvptx(o.precise_math), k.name), k_(k), s_(s), o_(o) {}

  std::string emit(plan::PlanLaunch& launch) {
    KILN_CHECK(nvptx_emits(k_, o_), "cuda codegen: kernel ", k_.name,
               " has no LLVM IR form (pointwise kernels and row reductions have; CUDA C has the rest)");
    if (k_.kind == KernelKind::reduction && k_.num_passes() > 0) {
      const std::vector<int64_t>& examples = s_.graph.shapes().examples();
      const RowGeometry g = row_geometry(inner_extent().evaluate(examples), k_.outer_extent().evaluate(examples));
      block_ = g.threads;
      rows_per_block_ = g.rows;
      segment_ = g.threads <= 32;
      launch.block = g.threads * g.rows;
      launch.items_per_block = g.rows;
      emit_row(launch);
    } else {
      block_ = o_.pointwise_block;
      launch.block = block_;
      launch.items_per_block = o_.pointwise_block * o_.pointwise_items_per_thread;
      emit_pointwise(launch);
    }
    body_ << "  ret void\n";
    std::ostringstream m;
    m << kModuleHeader << k_.name << " (LLVM IR for NVPTX)\n"
      << "target datalayout = \"e-i64:64-i128:128-v16:16-v32:32-n16:32:64\"\n"
      << "target triple = \"nvptx64-nvidia-cuda\"\n\n";
    for (const std::string& d : decls_) m << d << "\n";
    for (const std::string& h : helpers_) m << h;
    m << "\ndefine void @" << k_.name << "(" << params() << ") {\nentry:\n"
      << entry_.str() << "  br label %body\nbody:\n" << body_.str() << "}\n\n";
    // The block size bounds ptxas's registers (.maxntid) only where it must: above 256 threads a
    // block, where 255 registers a thread (ptxas's most) would not fit an SM's 64K. The runtime
    // compiles through nvJitLink, whose ptxas (relocatable, -c) takes a .maxntid's whole budget:
    // a kernel that needs 64 registers took 255, a block an SM (ConvNeXt's depthwise + norm rows).
    const bool bounded = launch.block > kUnboundedBlock;
    m << "!nvvm.annotations = !{!0" << (bounded ? ", !1" : "") << "}\n"
      << "!0 = !{ptr @" << k_.name << ", !\"kernel\", i32 1}\n";
    if (bounded) m << "!1 = !{ptr @" << k_.name << ", !\"maxntidx\", i32 " << launch.block << "}\n";
    return m.str();
  }

 private:
  const Kernel& k_;
  const schedule::Schedule& s_;
  const CodegenOptions& o_;
  int64_t block_ = 0;  // pointwise: threads per block; rows: threads per row
  // Rows: rows per block, and whether a row's threads are a segment of one warp (combined by
  // shuffles among them alone) rather than a whole block (shuffles, then shared memory).
  int64_t rows_per_block_ = 1;
  bool segment_ = false;

  // a * b of two i32 as an i64, by PTX's mul.wide.u32 (opaque to LLVM's optimisers).
  std::string wide_mul(const std::string& a32, const std::string& b32) {
    return op("call i64 asm \"mul.wide.u32 $0, $1, $2;\", \"=l,r,r\"(i32 ", a32, ", i32 ", b32, ")");
  }
  std::string sreg(const char* r) {
    const std::string fn = std::string("@llvm.nvvm.read.ptx.sreg.") + r;
    declare("declare i32 " + fn + "()");
    return op("call i32 ", fn, "()");
  }

  // Buffers the kernel touches in id order, then every plan symbol as i64 (cuda_c.cpp's
  // kernel_params, which the runtime's launch follows); noalias where no other parameter shares
  // the memory (__restrict__), readonly where only read.
  std::string params() const {
    std::set<int32_t> bufs;
    for (int32_t b : k_.reads()) bufs.insert(b);
    const std::vector<int32_t> writes = k_.writes();
    for (int32_t b : writes) bufs.insert(b);
    std::map<std::string, int> memories;
    for (int32_t b : bufs) memories[memory_of(b)] += 1;
    std::string out;
    for (int32_t b : bufs) {
      const bool written = std::find(writes.begin(), writes.end(), b) != writes.end();
      const bool shared = memories[memory_of(b)] > 1;
      out += out.empty() ? "" : ", ";
      out += std::string("ptr addrspace(1) ") + (shared ? "" : "noalias ") + (written ? "" : "readonly ") +
             "align 16 %b" + std::to_string(b);
    }
    for (const SymbolInfo& sym : s_.graph.shapes().symbols()) out += (out.empty() ? "" : ", ") + std::string("i64 %s") + std::to_string(sym.id);
    return out;
  }
  std::string memory_of(int32_t b) const {
    const schedule::Buffer& buf = s_.buffers[static_cast<size_t>(b)];
    return buf.kind == schedule::BufferKind::intermediate ? "slot" + std::to_string(buf.slot) : "b" + std::to_string(b);
  }
  DType buffer_dtype(int32_t b) const { return s_.buffers[static_cast<size_t>(b)].dtype; }
  // Whether buffer b has an element whatever the sizes: static sizes, none of them 0.
  bool has_elements(int32_t b) const {
    for (const SymInt& d : s_.buffers[static_cast<size_t>(b)].sizes)
      if (!d.is_static() || d.hint() <= 0) return false;
    return true;
  }

  using Printer::affine;
  std::string affine(const Affine& a, const Scope& sc) {
    // In a thread's c-th consecutive element (emit_pointwise's vector path), an access with a
    // static coefficient along that dim is base + coeff * (v + c) with c folded into the
    // constant, so that the same element read by two of the thread's elements (a stencil's
    // neighbouring taps) is the same expression, one load after LLVM's CSE.
    if (vector_lane_.c != 0 && vector_lane_.dim < a.coeffs.size() && a.coeffs[vector_lane_.dim].is_static() && sc.vars[vector_lane_.dim] == vector_lane_.var) {
      Affine shifted = a;
      shifted.offset = a.offset + SymInt(a.coeffs[vector_lane_.dim].hint() * vector_lane_.c);
      std::vector<std::string> vars = sc.vars;
      vars[vector_lane_.dim] = vector_lane_.base;
      return affine(shifted, vars);
    }
    return affine(a, sc.vars);
  }
  struct Lane {
    size_t dim = 0;
    bool active = false;   // in a thread's consecutive elements
    int64_t c = 0;         // which of them (0: none shifted)
    std::string base, var;  // the dim's variable for element 0, and for element c
  } vector_lane_;
  std::string element_ptr(int32_t b, const std::string& index) {
    return op("getelementptr ", storage_type(buffer_dtype(b)), ", ptr addrspace(1) %b", b, ", i64 ", index);
  }

  // ---- values ----
  // Loads served from registers: by a vector load's lane (load_reads_), or from a row cache's
  // element (load_slots_: a pointer to read); load_records_: a fresh load of the instruction is
  // also written there (the row cache's first pass).
  std::map<int32_t, Val> load_reads_;
  std::map<int32_t, std::string> load_slots_, load_records_;
  std::set<int32_t> recorded_;  // loads written to their load_records_ slot
  // Computed values a row cache keeps (cstyle::row_values_to_keep): read from value_slots_,
  // written to value_records_ where computed (the first pass). Each slot holds the value in its
  // instruction's compute type.
  std::map<int32_t, std::string> value_slots_, value_records_;
  // One lane's share of the maps above (a vector step's lanes emitted interleaved), swapped in
  // for as long as a LaneScope lives.
  struct LaneValues {
    std::map<int32_t, Val> load_reads;
    std::map<int32_t, std::string> load_slots, value_slots, value_records;
  };
  struct LaneScope {
    NvptxEmitter& e;
    LaneValues& l;
    LaneScope(NvptxEmitter& em, LaneValues& lane) : e(em), l(lane) { swap(); }
    ~LaneScope() { swap(); }
    void swap() {
      std::swap(e.load_reads_, l.load_reads);
      std::swap(e.load_slots_, l.load_slots);
      std::swap(e.value_slots_, l.value_slots);
      std::swap(e.value_records_, l.value_records);
    }
  };

  Val load(int32_t i, const Instr& in, Scope& sc) {
    const DType t = buffer_dtype(in.buffer);
    // An element of dtype t needs no rounding to t.
    auto as_loaded = [&](const Val& v) { return in.dtype == t ? v : to_dtype(v, in.dtype); };
    if (auto it = load_reads_.find(i); it != load_reads_.end()) return as_loaded(it->second);
    if (auto it = load_slots_.find(i); it != load_slots_.end()) return as_loaded({op("load ", type_of(ct_of(t)), ", ptr ", it->second), ct_of(t)});
    std::string index = affine(in.index, sc);
    if (in.gathered) index = op("add i64 ", index, ", ", convert(value(in.gather_offset(), sc), CT::i64).v);
    std::string raw;
    if (in.masked && vector_lane_.active && has_elements(in.buffer)) {
      // Only where the mask holds (pad, cat): elsewhere the load reads the buffer's first
      // element, which exists, and the value is 0. Straight-line code, so the loads of a stencil
      // (a depthwise convolution's taps) that a thread's consecutive elements share are one load
      // each: a branch per load kept LLVM from merging them (294 loads for 4 outputs of 49 taps).
      // One element a thread, nothing is shared and the branch skips the loads the mask drops
      // (convnext's 14x14 depthwise convolutions: 0.054 ms with branches, 0.063 without).
      const std::string m = convert(value(in.mask(), sc), CT::b).v;
      const std::string p = op("select i1 ", m, ", ptr addrspace(1) ", element_ptr(in.buffer, index), ", ptr addrspace(1) %b", in.buffer);
      const std::string v = op("load ", storage_type(t), ", ptr addrspace(1) ", p, ", align ", dtype_size(t));
      raw = op("select i1 ", m, ", ", storage_type(t), " ", v, ", ", storage_type(t), " ", t == DType::f32 || t == DType::f64 || t == DType::f16 ? "0.0" : "0");
    } else if (in.masked) {
      // A buffer that may be empty: the load only where the mask holds.
      const std::string m = convert(value(in.mask(), sc), CT::b).v;
      raw = masked_load(t, m, [&] {
        const std::string p = element_ptr(in.buffer, index);
        return op("load ", storage_type(t), ", ptr addrspace(1) ", p, ", align ", dtype_size(t));
      });
    } else {
      raw = op("load ", storage_type(t), ", ptr addrspace(1) ", element_ptr(in.buffer, index), ", align ", dtype_size(t));
    }
    const Val v = from_storage(t, raw);
    if (auto rec = load_records_.find(i); rec != load_records_.end()) {
      line("store ", type_of(v.ct), " ", v.v, ", ptr ", rec->second);
      recorded_.insert(i);
    }
    return as_loaded(v);
  }

  void store(const schedule::Store& st, Scope& sc) {
    const DType t = buffer_dtype(st.buffer);
    const Val x = value(st.value, sc);
    const bool plain_value = st.combine == schedule::Combine::none;
    const std::string raw = plain_value ? to_storage(t, x) : "";
    std::string idx = affine(st.index, sc);
    if (st.offset >= 0) idx = op("add i64 ", idx, ", ", convert(value(st.offset, sc), CT::i64).v);
    const std::string p = element_ptr(st.buffer, idx);
    if (!plain_value) {  // red.global.add or atom.cas: other threads may combine into the same element
      atomic_combine(st.combine, t, "ptr addrspace(1)", p, x);
      return;
    }
    line("store ", storage_type(t), " ", raw, ", ptr addrspace(1) ", p, ", align ", dtype_size(t));
  }

  Val value(int32_t i, Scope& sc) {
    if (const Val* v = sc.find(i)) return *v;
    const Instr& in = k_.instrs[static_cast<size_t>(i)];
    Val r;
    if (auto it = value_slots_.find(i); it != value_slots_.end()) {
      const CT t = ct_of(in.dtype);
      r = {op("load ", type_of(t), ", ptr ", it->second), t};
      sc.memo[i] = r;
      return r;
    }
    switch (in.kind) {
      case InstrKind::constant: r = {literal(in.value, ct_of(in.dtype)), ct_of(in.dtype)}; break;
      case InstrKind::size: r = {sym(in.size), CT::i64}; break;
      case InstrKind::index: r = {affine(in.index, sc), CT::i64}; break;
      case InstrKind::load: r = load(i, in, sc); break;
      case InstrKind::pointwise: r = pointwise_value(in, sc); break;
      case InstrKind::reduce: {
        auto it = reductions_.find(i);
        KILN_CHECK(it != reductions_.end(), "cuda codegen: kernel ", k_.name, ": reduction v", i, " read before its pass");
        r = it->second;
        break;
      }
    }
    if (auto rec = value_records_.find(i); rec != value_records_.end()) {
      r = convert(r, ct_of(in.dtype));
      line("store ", type_of(r.ct), " ", r.v, ", ptr ", rec->second);
    }
    sc.memo[i] = r;
    return r;
  }

  Val pointwise_value(const Instr& in, Scope& sc) {
    std::vector<Val> a;
    std::vector<DType> at;
    for (int32_t x : in.args) {
      a.push_back(value(x, sc));
      at.push_back(k_.instrs[static_cast<size_t>(x)].dtype);
    }
    return pointwise(in, a, at, o_.emulate_precision_casts);
  }
  Val exp_of(CT c, const std::string& x) { return flavour_.math(*this, Fn::exp, c, {x}); }

  // ---- the thread structure ----
  // Splits flat (an i64 register) over dims [first, last) into sc.vars, row-major.
  using Printer::unflatten;
  void unflatten(const std::string& flat, size_t first, size_t last, Scope& sc) {
    unflatten(flat, k_.domain, first, last, sc.vars);
  }

  // The loop over a thread's elements, `step` consecutive ones per iteration, as cuda_c.cpp's
  // open_pointwise_loop: one iteration where the launch gives each thread exactly `step` elements
  // (launch.grid_stride false), else a grid-stride loop. Returns the element index register and
  // the label that ends an iteration (close_pointwise_loop).
  struct Loop {
    std::string i, latch, exit, header;
    bool once = false;
  };
  Loop open_pointwise_loop(plan::PlanLaunch& launch, const SymInt& total, int64_t step) {
    const int64_t per_block = block_ * step;
    Loop l;
    l.once = total.is_static() && o_.pointwise_items_per_thread == step && (total.hint() + per_block - 1) / per_block <= 0x7fffffff;
    const std::string tid = sreg("tid.x"), ctaid = sreg("ctaid.x"), ntid = sreg("ntid.x");
    const std::string ctaid64 = op("zext i32 ", ctaid, " to i64"), ntid64 = op("zext i32 ", ntid, " to i64");
    const std::string tid64 = op("zext i32 ", tid, " to i64");
    // In a grid-stride loop, the block's first index and the stride are products LLVM 16 cannot
    // see into (PTX's mul.wide.u32 as inline asm): its loop strength reduction rewrote the loop's
    // index over them so that instruction selection narrowed a product to an i1 mul, which
    // NVPTX cannot select ("Cannot select: i1 = mul"; argsort's network, which splits its
    // indices into dims of size 2, hit it).
    const std::string first =
        l.once ? op("mul i64 ", ctaid64, ", ", ntid64) : wide_mul(ctaid, ntid);
    const std::string lin = op("add i64 ", first, ", ", tid64);
    const std::string start = step == 1 ? lin : op("mul i64 ", lin, ", ", step);
    const std::string n = sym(total);
    l.exit = label("done");
    if (l.once) {
      launch.grid_stride = false;
      l.i = start;
      const std::string work = label("work");
      line("br i1 ", op("icmp slt i64 ", start, ", ", n), ", label %", work, ", label %", l.exit);
      block(work);
      return l;
    }
    const std::string nctaid = sreg("nctaid.x");
    const std::string stride0 = wide_mul(nctaid, ntid);
    const std::string stride = step == 1 ? stride0 : op("mul i64 ", stride0, ", ", step);
    const std::string pre = label("pre");
    line("br label %", pre);
    block(pre);
    l.header = label("loop");
    l.latch = label("next");
    const std::string work = label("work");
    line("br label %", l.header);
    block(l.header);
    l.i = tmp();
    body_ << "  " << l.i << " = phi i64 [" << start << ", %" << pre << "], [" << l.i << "_next, %" << l.latch << "]\n";
    line("br i1 ", op("icmp slt i64 ", l.i, ", ", n), ", label %", work, ", label %", l.exit);
    block(work);
    latch_stride_ = stride;
    return l;
  }
  std::string latch_stride_;
  void close_pointwise_loop(const Loop& l) {
    if (l.once) {
      line("br label %", l.exit);
    } else {
      line("br label %", l.latch);
      block(l.latch);
      body_ << "  " << l.i << "_next = add i64 " << l.i << ", " << latch_stride_ << "\n";
      line("br label %", l.header);
    }
    block(l.exit);
  }

  // Vector accesses as cstyle::plan_vectors decides them for the CUDA C kernel; its run-time
  // conditions (symbolic offsets and strides that must be multiples of kVec) become one i1.
  std::optional<cstyle::VectorPlan> vectors_;
  std::string vec_flag_;
  bool plan_vectors(size_t first_dim, bool inner_only) {
    if (!o_.vector_accesses) return false;
    // A masked group reads from the buffer's start where its mask fails (load_group): only
    // buffers of static sizes holding at least a group.
    auto masked_form = [&](int32_t b) {
      if (!vec_elem(buffer_dtype(b)) || !has_elements(b)) return false;
      int64_t elements = 1;
      for (const SymInt& d : s_.buffers[static_cast<size_t>(b)].sizes) elements *= d.hint();
      return elements >= kVec;
    };
    vectors_ = cstyle::plan_vectors(k_, first_dim, inner_only, kVec, [&](int32_t b) { return vec_elem(buffer_dtype(b)) != nullptr; },
                                    masked_form);
    if (!vectors_) return false;
    // The plan's conditions over this module's registers: every symbolic offset and non-vector
    // stride of a vector access a multiple of kVec.
    std::set<std::string> conds;
    for (const SymInt& x : vectors_->multiples) conds.insert(op("icmp eq i64 ", op("urem i64 ", sym(x), ", ", kVec), ", 0"));
    vec_flag_ = "true";
    for (const std::string& c : conds) vec_flag_ = vec_flag_ == "true" ? c : op("and i1 ", vec_flag_, ", ", c);
    return true;
  }
  // The kVec elements of buffer b from index `at` on, as their compute type: one vector access,
  // or single elements where the run-time flag says the group is not aligned.
  // With `mask` (an i1 the group shares), the group where it holds and zeros elsewhere: the
  // access goes to the buffer's start there (straight-line code, as load() does for one element).
  // The vector access is widened as a vector (bf16's shift, f16's extension, i32's sign
  // extension), not lane by lane: LLVM's vector combining split a lane-by-lane widening's load
  // into scalar loads that its load/store vectorizer then put back together, over half of the
  // LLVM time of a 7x7 depthwise convolution's row kernel (49 taps of 12 lanes: 0.67 -> 0.25 s
  // on a 2-core VM; the same PTX instructions in another order, 48 registers against 44). The
  // mask then applies lane by lane: a select of the whole vector was not folded with the
  // selects of the padding around it (twice the selp).
  std::vector<Val> load_group(int32_t b, const std::string& at, const std::string& mask = "") {
    const DType t = buffer_dtype(b);
    const std::string et = vec_elem(t), n = std::to_string(kVec), vt = "<" + n + " x " + et + ">";
    const int64_t align = kVec * dtype_size(t);
    std::string first = element_ptr(b, at);
    if (!mask.empty()) first = op("select i1 ", mask, ", ptr addrspace(1) ", first, ", ptr addrspace(1) %b", b);
    const std::string load = "load " + vt + ", ptr addrspace(1) " + first + ", align " + std::to_string(align);
    if (vec_flag_ == "true") {
      const std::string v = op(load);
      std::string wide = v, wt = vt;  // the vector in its compute type
      CT ct = CT::f32;
      switch (t) {
        case DType::f32: break;
        case DType::f16: wt = "<" + n + " x float>"; wide = op("fpext ", vt, " ", v, " to ", wt); break;
        case DType::bf16: {
          const std::string it = "<" + n + " x i32>";
          std::string sixteen;
          for (int c = 0; c < kVec; ++c) sixteen += std::string(c ? ", " : "") + "i32 16";
          wt = "<" + n + " x float>";
          wide = op("bitcast ", it, " ", op("shl ", it, " ", op("zext ", vt, " ", v, " to ", it), ", <", sixteen, ">"), " to ", wt);
          break;
        }
        case DType::i32: ct = CT::i64; wt = "<" + n + " x i64>"; wide = op("sext ", vt, " ", v, " to ", wt); break;
        default: fail("cuda codegen: kernel ", kernel_, ": no vector access of ", dtype_name(t));
      }
      std::vector<Val> lanes;
      for (int c = 0; c < kVec; ++c) {
        const std::string l = op("extractelement ", wt, " ", wide, ", i32 ", c);
        lanes.push_back(mask.empty() ? Val{l, ct} : select(mask, ct, l, ct == CT::i64 ? "0" : literal(0, ct)));
      }
      return lanes;
    }
    const std::string vb = label("vload"), sb = label("sload"), join = label("loaded");
    line("br i1 ", vec_flag_, ", label %", vb, ", label %", sb);
    block(vb);
    const std::string v = op(load);
    std::vector<std::string> vl;
    for (int c = 0; c < kVec; ++c) vl.push_back(op("extractelement ", vt, " ", v, ", i32 ", c));
    line("br label %", join);
    block(sb);
    std::vector<std::string> sl;
    for (int c = 0; c < kVec; ++c)
      sl.push_back(op("load ", et, ", ptr addrspace(1) ", c ? op("getelementptr ", et, ", ptr addrspace(1) ", first, ", i64 ", c) : first,
                      ", align ", dtype_size(t)));
    line("br label %", join);
    block(join);
    std::vector<Val> lanes;
    for (int c = 0; c < kVec; ++c) {
      std::string l = op("phi ", et, " [", vl[static_cast<size_t>(c)], ", %", vb, "], [", sl[static_cast<size_t>(c)], ", %", sb, "]");
      if (!mask.empty()) l = op("select i1 ", mask, ", ", et, " ", l, ", ", et, " zeroinitializer");
      lanes.push_back(from_storage(t, l));
    }
    return lanes;
  }
  // The group of vector load `li` at the group's first position (scope `base`), its mask
  // evaluated there (cstyle::plan_vectors takes only masks the group shares).
  std::vector<Val> load_group_of(int32_t li, Scope& base) {
    const Instr& in = k_.instrs[static_cast<size_t>(li)];
    const std::string at = affine(in.index, base);
    return load_group(in.buffer, at, in.masked ? convert(value(in.mask(), base), CT::b).v : "");
  }
  void store_group(int32_t b, const std::string& at, const std::vector<std::string>& lanes) {
    const DType t = buffer_dtype(b);
    const std::string et = vec_elem(t), vt = "<" + std::to_string(kVec) + " x " + et + ">";
    auto vector = [&] {
      std::string v = "undef";
      for (int c = 0; c < kVec; ++c) v = op("insertelement ", vt, " ", v, ", ", et, " ", lanes[static_cast<size_t>(c)], ", i32 ", c);
      line("store ", vt, " ", v, ", ptr addrspace(1) ", element_ptr(b, at), ", align ", kVec * dtype_size(t));
    };
    if (vec_flag_ == "true") return vector();
    const std::string vb = label("vstore"), sb = label("sstore"), join = label("stored");
    line("br i1 ", vec_flag_, ", label %", vb, ", label %", sb);
    block(vb);
    vector();
    line("br label %", join);
    block(sb);
    for (int c = 0; c < kVec; ++c)
      line("store ", et, " ", lanes[static_cast<size_t>(c)], ", ptr addrspace(1) ", element_ptr(b, c ? op("add i64 ", at, ", ", c) : at),
           ", align ", dtype_size(t));
    line("br label %", join);
    block(join);
  }

  // ---- reductions (row strategy: cuda_c.cpp's emit_row, statement for statement but for
  // loop_loading_ahead and short rows packed into blocks, row_geometry) ----
  // A C variable: an alloca of the entry block, read and written with load and store.
  struct Var {
    std::string ptr;
    CT ct = CT::f32;
  };
  // Initialised here (in the body: a row's state starts afresh in every iteration of a loop over
  // rows), its slot in the entry block.
  Var var(CT t, const std::string& init) {
    const Var v{alloca(type_of(t)), t};
    set(v, init);
    return v;
  }
  Val get(const Var& v) { return {op("load ", type_of(v.ct), ", ptr ", v.ptr), v.ct}; }
  // A thread's array of `n` values of type ct (the row cache: indexed by constants only, so
  // that SROA keeps it in registers), and a pointer to its element i.
  struct Registers {
    std::string ptr;
    CT ct = CT::f32;
    int64_t n = 0;
  };
  Registers registers(CT t, int64_t n) { return {alloca(("[" + std::to_string(n) + " x " + type_of(t) + "]").c_str()), t, n}; }
  std::string element_of(const Registers& a, int64_t i) {
    return op("getelementptr [", a.n, " x ", type_of(a.ct), "], ptr ", a.ptr, ", i64 0, i64 ", i);
  }
  void set(const Var& v, const std::string& x) { line("store ", type_of(v.ct), " ", x, ", ptr ", v.ptr); }
  // `if (cond) { then() }`, the code after it in the join block.
  template <class F>
  void when(const std::string& cond, F then) {
    const std::string yes = label("then"), join = label("endif");
    line("br i1 ", cond, ", label %", yes, ", label %", join);
    block(yes);
    then();
    line("br label %", join);
    block(join);
  }
  // for (v = start; v < bound; v += step) { body(v) }, v an i64; returns v after the loop.
  template <class F>
  std::string loop(const std::string& start, const std::string& bound, const std::string& step, F body) {
    const Var v = var(CT::i64, start);
    const std::string head = label("head"), work = label("iter"), out = label("out");
    line("br label %", head);
    block(head);
    const std::string j = get(v).v;
    line("br i1 ", op("icmp slt i64 ", j, ", ", bound), ", label %", work, ", label %", out);
    block(work);
    body(j);
    set(v, op("add i64 ", j, ", ", step));
    line("br label %", head);
    block(out);
    return get(v).v;
  }

  // Reductions: each one's rule (sdk/lower/reduction.h: state, identity, element, fold, finish)
  // as registers; a state lives in Vars. A maximum or minimum keeps a NaN flag beside its
  // NaN-skipping fold where the flavour has no NaN-propagating instruction for it (f64).
  lower::Rule rule(int32_t r) const { return reduction_rule(k_, r); }
  bool nan_flag(int32_t r) const { return rule(r).has_nan_flag(); }
  std::vector<std::string> initial(int32_t r) { return identity_values(rule(r)); }
  std::vector<Var> declare_state(int32_t r) {
    const lower::Rule rl = rule(r);
    std::vector<Var> a;
    for (const lower::Rule::Component& c : rl.state) a.push_back({alloca(type_of(c.ct)), c.ct});
    store_identity(rl, ptrs(a));  // (in the body: a row's state starts afresh in every row)
    return a;
  }
  static std::vector<std::string> ptrs(const std::vector<Var>& a) {
    std::vector<std::string> p;
    for (const Var& v : a) p.push_back(v.ptr);
    return p;
  }
  // Folds state b (values) into state a (variables) of reduction r.
  void merge(int32_t r, const std::vector<Var>& a, const std::vector<std::string>& b) { fold_into(rule(r), ptrs(a), b); }
  // The state element x at inner position j contributes.
  std::vector<std::string> element(int32_t r, const Val& x, const std::string& j) { return element_state(rule(r), x, j); }
  // The reduction's value from its final state, as its dtype's compute type.
  Val finish(int32_t r, const std::vector<std::string>& st) {
    return finish_state(rule(r), st, k_.instrs[static_cast<size_t>(r)].dtype);
  }

  // A shuffle of x among the row's threads of the warp (shfl_mask_): from lane `at` (an i32)
  // xor this one's (bfly) or from lane `at` itself (idx); 32-bit shuffles, two for 64-bit values.
  std::string shuffle(CT t, const std::string& x, const std::string& at, const char* mode = "bfly") {
    const std::string fn = std::string("@llvm.nvvm.shfl.sync.") + mode + ".i32";
    declare("declare i32 " + fn + "(i32, i32, i32, i32)");
    auto shfl32 = [&](const std::string& w) { return op("call i32 ", fn, "(i32 ", shfl_mask_, ", i32 ", w, ", i32 ", at, ", i32 31)"); };
    switch (t) {
      case CT::f32: return op("bitcast i32 ", shfl32(op("bitcast float ", x, " to i32")), " to float");
      case CT::b: return op("trunc i32 ", shfl32(op("zext i1 ", x, " to i32")), " to i1");
      case CT::f64: case CT::i64: {
        const std::string bits = t == CT::f64 ? op("bitcast double ", x, " to i64") : x;
        const std::string lo = shfl32(op("trunc i64 ", bits, " to i32"));
        const std::string hi = shfl32(op("trunc i64 ", op("lshr i64 ", bits, ", 32"), " to i32"));
        const std::string high = op("shl i64 ", op("zext i32 ", hi, " to i64"), ", 32"), low = op("zext i32 ", lo, " to i64");
        const std::string w = op("or i64 ", high, ", ", low);
        return t == CT::f64 ? op("bitcast i64 ", w, " to double") : w;
      }
    }
    return x;
  }
  // Shared memory of the block: an array of `entries` values of type t (a module global).
  std::string shared_array(CT t, int64_t entries) {
    const std::string name = "@sh" + std::to_string(shared_++);
    decls_.insert(name + " = internal addrspace(3) global [" + std::to_string(entries) + " x " + type_of(t) + "] undef, align 8");
    return name;
  }
  int shared_ = 0;
  std::string shared_at(const std::string& array, CT t, const std::string& i) {
    return op("getelementptr ", type_of(t), ", ptr addrspace(3) ", array, ", i64 ", i);
  }
  Val shared_load(const std::string& array, CT t, const std::string& i) {
    return {op("load ", type_of(t), ", ptr addrspace(3) ", shared_at(array, t, i)), t};
  }
  void shared_store(const std::string& array, CT t, const std::string& i, const std::string& x) {
    line("store ", type_of(t), " ", x, ", ptr addrspace(3) ", shared_at(array, t, i));
  }
  void barrier() {
    declare("declare void @llvm.nvvm.barrier0()");
    line("call void @llvm.nvvm.barrier0()");
  }

  // The block's thread geometry (row strategy): the thread's index in its row, its lane and
  // warp in the block, the block's warps; in a segment, its first lane (an i32) and the mask of
  // its lanes for shuffles.
  std::string tid_, lane_, warp_, warps_, segment_lane0_, shfl_mask_ = "-1";

  // The butterfly over a warp, or over a segment's lanes (xor offsets below its width).
  int first_offset() const { return segment_ ? static_cast<int>(block_ / 2) : 16; }
  void warp_combine(int32_t r, const std::vector<Var>& a) {
    for (int off = first_offset(); off > 0; off >>= 1) {
      std::vector<std::string> other;
      for (const Var& v : a) other.push_back(shuffle(v.ct, get(v).v, std::to_string(off)));
      merge(r, a, other);
    }
  }
  // Every lane of the segment takes its first lane's value of v: the butterfly's lanes may fold
  // in different orders, and all threads of a row must see the same result (as the block's
  // combine publishes one lane's).
  std::string from_lane0(const Var& v) { return shuffle(v.ct, get(v).v, segment_lane0_, "idx"); }
  // Combines each reduction of reds over the row's threads (a segment's shuffles; or a warp's,
  // then shared memory across the block's warps) and binds its result, the same in every thread.
  void block_combine(const std::vector<int32_t>& reds, const std::map<int32_t, std::vector<Var>>& states) {
    for (int32_t r : reds) {
      const std::vector<Var>& a = states.at(r);
      if (segment_) {
        warp_combine(r, a);
        std::vector<std::string> fin;
        for (const Var& v : a) fin.push_back(from_lane0(v));
        reductions_[r] = finish(r, fin);
        continue;
      }
      std::vector<std::string> sh;
      for (const Var& v : a) sh.push_back(shared_array(v.ct, 32));
      warp_combine(r, a);
      when(op("icmp eq i64 ", lane_, ", 0"), [&] {
        for (size_t i = 0; i < a.size(); ++i) shared_store(sh[i], a[i].ct, warp_, get(a[i]).v);
      });
      barrier();
      when(op("icmp eq i64 ", warp_, ", 0"), [&] {
        const std::vector<std::string> init = initial(r);
        const std::string in_range = op("icmp slt i64 ", lane_, ", ", warps_);
        for (size_t i = 0; i < a.size(); ++i) {
          // shared_load only for lanes in range: the read of lane < 32 is always in bounds.
          set(a[i], select(in_range, a[i].ct, shared_load(sh[i], a[i].ct, lane_).v, init[i]).v);
        }
        warp_combine(r, a);
        when(op("icmp eq i64 ", lane_, ", 0"), [&] {
          for (size_t i = 0; i < a.size(); ++i) shared_store(sh[i], a[i].ct, "0", get(a[i]).v);
        });
      });
      barrier();
      std::vector<std::string> fin;
      for (size_t i = 0; i < a.size(); ++i) fin.push_back(shared_load(sh[i], a[i].ct, "0").v);
      reductions_[r] = finish(r, fin);
      barrier();
    }
  }
  std::map<int32_t, Val> reductions_;  // reduction instr -> its result in this row

  // ---- online softmax (cuda_c.cpp's online_pair and friends) ----
  std::optional<OnlinePair> online_pair() const { return detail::online_pair(k_, o_); }
  // The pair's running (max, NaN seen, sum).
  struct OnlineState {
    Var m, nan, s;
  };
  OnlineState online_state(const OnlinePair& op) {
    const CT c = ct_of(k_.instrs[static_cast<size_t>(op.max)].dtype);
    return {var(c, literal(-INFINITY, c)), var(CT::b, "false"), var(c, literal(0, c))};
  }
  Val fmax_of(CT c, const std::string& a, const std::string& b) {  // C's fmax: NaN-skipping
    return call(std::string("@llvm.maxnum.") + render::llvm::suffix_of(c), c, {a, b});
  }
  // Folds (om, os) into the running (m, s).
  void online_merge(CT c, const OnlineState& st, const std::string& om, const std::string& os) {
    const std::string m = get(st.m).v, s = get(st.s).v, ninf = literal(-INFINITY, c), zero = literal(0, c);
    const std::string mn = fmax_of(c, m, om).v;
    // (Each emitting call its own statement: the order of a call's arguments is unspecified, and
    // the module's text must not depend on the compiler, wasm or native.)
    const std::string m_empty = op("fcmp oeq ", type_of(c), " ", m, ", ", ninf);
    const std::string m_scaled = fbin("fmul", c, s, exp_of(c, fbin("fsub", c, m, mn).v).v).v;
    const std::string left = select(m_empty, c, zero, m_scaled).v;
    const std::string om_empty = op("fcmp oeq ", type_of(c), " ", om, ", ", ninf);
    const std::string om_scaled = fbin("fmul", c, os, exp_of(c, fbin("fsub", c, om, mn).v).v).v;
    const std::string right = select(om_empty, c, zero, om_scaled).v;
    set(st.s, fbin("fadd", c, left, right).v);
    set(st.m, mn);
  }
  void online_step(const OnlinePair& p, const OnlineState& st, Scope& sc) {
    const CT c = ct_of(k_.instrs[static_cast<size_t>(p.max)].dtype);
    const std::string x = convert(value(p.arg, sc), c).v;
    const std::string m = get(st.m).v;
    const std::string grows = label("grows"), other = label("other"), finite = label("finite"), join = label("stepped");
    line("br i1 ", op("fcmp ogt ", type_of(c), " ", x, ", ", m), ", label %", grows, ", label %", other);
    block(grows);
    const std::string s_old = get(st.s).v, rescale = exp_of(c, fbin("fsub", c, m, x).v).v;
    set(st.s, fbin("fadd", c, fbin("fmul", c, s_old, rescale).v, literal(1, c)).v);
    set(st.m, x);
    line("br label %", join);
    block(other);
    line("br i1 ", op("fcmp une ", type_of(c), " ", x, ", ", literal(-INFINITY, c)), ", label %", finite, ", label %", join);
    block(finite);
    const std::string s_now = get(st.s).v, e = exp_of(c, fbin("fsub", c, x, m).v).v;
    set(st.s, fbin("fadd", c, s_now, e).v);
    line("br label %", join);
    block(join);
    const std::string seen = get(st.nan).v, is_nan = op("fcmp uno ", type_of(c), " ", x, ", ", x);
    set(st.nan, op("or i1 ", seen, ", ", is_nan));
  }
  void online_combine(const OnlinePair& p, const OnlineState& st) {
    const CT c = ct_of(k_.instrs[static_cast<size_t>(p.max)].dtype);
    auto warp = [&] {
      for (int off = first_offset(); off > 0; off >>= 1) {
        const std::string at = std::to_string(off);
        const std::string om = shuffle(c, get(st.m).v, at), os = shuffle(c, get(st.s).v, at);
        const std::string seen = get(st.nan).v, other = shuffle(CT::b, seen, at);
        set(st.nan, op("or i1 ", seen, ", ", other));
        online_merge(c, st, om, os);
      }
    };
    auto bind = [&](const std::string& m0, const std::string& n0, const std::string& s0) {
      reductions_[p.max] = nan_flag(p.max) ? finish(p.max, {m0, n0}) : finish(p.max, {select(n0, c, literal(NAN, c), m0).v});
      std::vector<std::string> sum_state{s0};
      if (rule(p.sum).compensated()) sum_state.push_back(literal(0, c));  // the online sum keeps no compensation
      reductions_[p.sum] = finish(p.sum, sum_state);
    };
    if (segment_) {
      warp();
      const std::string m0 = from_lane0(st.m), n0 = from_lane0(st.nan);
      bind(m0, n0, from_lane0(st.s));
      return;
    }
    const std::string shm = shared_array(c, 32), shn = shared_array(CT::b, 32), shs = shared_array(c, 32);
    auto publish = [&](const std::string& at) {
      when(op("icmp eq i64 ", lane_, ", 0"), [&] {
        shared_store(shm, c, at, get(st.m).v);
        shared_store(shn, CT::b, at, get(st.nan).v);
        shared_store(shs, c, at, get(st.s).v);
      });
    };
    warp();
    publish(warp_);
    barrier();
    when(op("icmp eq i64 ", warp_, ", 0"), [&] {
      const std::string in_range = op("icmp slt i64 ", lane_, ", ", warps_);
      set(st.m, select(in_range, c, shared_load(shm, c, lane_).v, literal(-INFINITY, c)).v);
      set(st.nan, select(in_range, CT::b, shared_load(shn, CT::b, lane_).v, "false").v);
      set(st.s, select(in_range, c, shared_load(shs, c, lane_).v, literal(0, c)).v);
      warp();
      publish("0");
    });
    barrier();
    const std::string m0 = shared_load(shm, c, "0").v, n0 = shared_load(shn, CT::b, "0").v;
    bind(m0, n0, shared_load(shs, c, "0").v);
    barrier();
  }

  // ---- the row kernel ----
  // A pass's running state, fresh for each row: the online pair's, or each reduction's.
  struct PassState {
    std::map<int32_t, std::vector<Var>> states;
    std::optional<OnlineState> online;
  };
  PassState begin_pass(const std::vector<int32_t>& reds, const std::optional<OnlinePair>& online) {
    PassState ps;
    if (online) ps.online = online_state(*online);
    else
      for (int32_t r : reds) ps.states[r] = declare_state(r);
    return ps;
  }
  SymInt inner_extent() const {
    SymInt n = 1;
    for (size_t d = static_cast<size_t>(k_.num_outer); d < k_.domain.size(); ++d) n = n * k_.domain[d];
    return n;
  }
  // After the reductions of loop `pass` are bound: the per-row values computed from them, once
  // per row, into the row's scope (later passes read them instead of computing them again).
  void bind_row_values(int32_t pass, bool online, Scope& row) {
    for (int32_t p = pass; p <= pass + (online && pass == 0 ? 1 : 0); ++p)
      for (size_t i = 0; i < k_.instrs.size(); ++i) {
        const Instr& in = k_.instrs[i];
        if (in.kind == InstrKind::pointwise && !in.inner && in.pass == p + 1) value(static_cast<int32_t>(i), row);
      }
  }
  void pass_step(int32_t pass, const std::vector<int32_t>& reds, const std::map<int32_t, std::vector<Var>>& states, Scope& sc,
                 const std::string& j) {
    for (int32_t r : reds) merge(r, states.at(r), element(r, value(k_.instrs[static_cast<size_t>(r)].args[0], sc), j));
    for (const schedule::Store& st : k_.stores)
      if (k_.store_is_inner(st) && k_.instrs[static_cast<size_t>(st.value)].pass == pass) store(st, sc);
  }
  void emit_outer_stores(const Scope& outer) {
    bool any = false;
    for (const schedule::Store& st : k_.stores) any = any || !k_.store_is_inner(st);
    if (!any) return;
    when(op("icmp eq i64 ", tid_, ", 0"), [&] {
      Scope sc = outer.child();
      for (const schedule::Store& st : k_.stores)
        if (!k_.store_is_inner(st)) store(st, sc);
    });
  }

  void emit_row(plan::PlanLaunch& launch) {
    const size_t n = k_.domain.size(), no = static_cast<size_t>(k_.num_outer);
    const int32_t passes = k_.num_passes();
    const std::string outer_total = sym(k_.outer_extent()), inner_total = sym(inner_extent());
    const std::string thread = op("zext i32 ", sreg("tid.x"), " to i64");
    lane_ = op("and i64 ", thread, ", 31");
    warp_ = op("lshr i64 ", thread, ", 5");
    std::string ntid, row_in_block = "0";
    if (segment_) {
      // Threads [i * block_, (i + 1) * block_) of the block take its row i.
      int shift = 0;
      while ((int64_t{1} << shift) < block_) ++shift;
      tid_ = op("and i64 ", thread, ", ", block_ - 1);
      row_in_block = op("lshr i64 ", thread, ", ", shift);
      ntid = std::to_string(block_);
      const std::string lane32 = op("trunc i64 ", lane_, " to i32");
      segment_lane0_ = op("and i32 ", lane32, ", ", ~static_cast<int32_t>(block_ - 1));
      shfl_mask_ = block_ == 32 ? "-1" : op("shl i32 ", (int64_t{1} << block_) - 1, ", ", segment_lane0_);
    } else {
      tid_ = thread;
      ntid = op("zext i32 ", sreg("ntid.x"), " to i64");
      warps_ = op("lshr i64 ", op("add i64 ", ntid, ", 31"), ", 5");
    }
    const bool vectors = plan_vectors(no, true);
    // A static number of rows gets a block per rows_per_block_ rows; a symbolic one loops.
    const std::string ctaid = op("add i64 ", op("mul i64 ", op("zext i32 ", sreg("ctaid.x"), " to i64"), ", ", rows_per_block_), ", ", row_in_block);
    auto row = [&](const std::string& o) {
      Scope outer;
      outer.vars.assign(n, "");
      if (no > 0) unflatten(o, 0, no, outer);
      if (vectors) emit_row_vector_passes(outer, ntid, inner_total);
      else emit_row_passes(outer, ntid, inner_total, passes);
      emit_outer_stores(outer);
      reductions_.clear();
    };
    if (k_.outer_extent().is_static() && k_.outer_extent().hint() <= 0x7fffffff) {
      launch.grid_stride = false;
      when(op("icmp slt i64 ", ctaid, ", ", outer_total), [&] { row(ctaid); });
    } else {
      loop(ctaid, outer_total, op("mul i64 ", op("zext i32 ", sreg("nctaid.x"), " to i64"), ", ", rows_per_block_), row);
    }
  }

  void emit_row_passes(Scope& outer, const std::string& ntid, const std::string& inner_total, int32_t passes) {
    const size_t n = k_.domain.size(), no = static_cast<size_t>(k_.num_outer);
    // The row cache: each thread's elements of the row in registers (static rows only; the loop
    // over them is unrolled here, so the arrays' indices are constants and SROA keeps them in
    // registers).
    const int64_t items = row_cache_steps(k_, o_, block_, 1);
    // The values it keeps: the loads, or what the first pass computes from them where that is
    // fewer values (cstyle::row_values_to_keep).
    const std::set<int32_t> keep = items > 0 ? cstyle::row_values_to_keep(k_) : std::set<int32_t>();
    std::vector<int32_t> cached;
    if (items > 0 && keep.empty())
      for (size_t i = 0; i < k_.instrs.size(); ++i)
        if (k_.instrs[i].kind == InstrKind::load && k_.instrs[i].inner) cached.push_back(static_cast<int32_t>(i));
    std::map<int32_t, Registers> cache;  // load -> its `items` values
    for (int32_t i : cached) cache[i] = registers(ct_of(buffer_dtype(k_.instrs[static_cast<size_t>(i)].buffer)), items);
    std::map<int32_t, Registers> kept;  // value -> its `items` values
    for (int32_t i : keep) kept[i] = registers(ct_of(k_.instrs[static_cast<size_t>(i)].dtype), items);
    const std::optional<OnlinePair> online = cached.empty() && keep.empty() ? online_pair() : std::nullopt;
    std::set<int32_t> recorded;
    for (int32_t pass = 0; pass < passes; ++pass) {
      if (online && pass == 1) continue;  // folded into pass 0
      const std::vector<int32_t> reds = cstyle::reductions_of_pass(k_, pass);
      const PassState ps = begin_pass(reds, pass == 0 ? online : std::nullopt);
      const std::map<int32_t, std::vector<Var>>& states = ps.states;
      const std::optional<OnlineState>& ost = ps.online;
      // One element j of the row in scope sc (loop_loading_ahead's scopes hold its loads already).
      auto step_in = [&](Scope& sc, const std::string& j) {
        if (ost) online_step(*online, *ost, sc);
        else pass_step(pass, reds, states, sc, j);
      };
      auto step = [&](const std::string& j) {
        Scope sc = outer.child();
        unflatten(j, no, n, sc);
        step_in(sc, j);
      };
      if (!cached.empty() || !kept.empty()) {
        // Loads recorded in an earlier pass are read from the registers; the others load (and
        // record) as they are first needed. Kept values: recorded in the first pass, read after.
        const bool full = inner_extent().hint() % block_ == 0;
        for (int64_t k = 0; k < items; ++k) {
          load_slots_.clear();
          load_records_.clear();
          value_slots_.clear();
          value_records_.clear();
          for (int32_t i : cached) (recorded.count(i) ? load_slots_ : load_records_)[i] = element_of(cache[i], k);
          for (const auto& [i, a] : kept) (pass == 0 ? value_records_ : value_slots_)[i] = element_of(a, k);
          const std::string j = op("add i64 ", tid_, ", ", k * block_);
          if (full) step(j);
          else when(op("icmp slt i64 ", j, ", ", inner_total), [&] { step(j); });
        }
        load_slots_.clear();
        load_records_.clear();
        value_slots_.clear();
        value_records_.clear();
        recorded.insert(recorded_.begin(), recorded_.end());
      } else {
        loop_loading_ahead(pass, outer, ntid, inner_total, step, step_in);
      }
      if (ost) online_combine(*online, *ost);
      else block_combine(reds, states);
      bind_row_values(pass, online.has_value(), outer);
    }
  }

  // A thread's elements of an uncached row, kRowLoadsAhead at a time with the row loads of all of
  // them issued before the first is used, then one at a time for the rest: a step's use of its
  // load (a branch of the online softmax, a store) otherwise waits for that load before the next
  // one is issued, one load in flight per thread (GPT-2's cross-entropy over [4096, 50257] bf16:
  // 1.1 ms for 1.2 GB). The same elements in the same order, so the same sums.
  // (cuda_c.cpp, the NVRTC path, does not do this yet.)
  static constexpr int kRowLoadsAhead = 4;
  template <class F, class G>
  void loop_loading_ahead(int32_t pass, const Scope& outer, const std::string& ntid, const std::string& inner_total, F step,
                          G step_in) {
    const size_t n = k_.domain.size(), no = static_cast<size_t>(k_.num_outer);
    std::vector<int32_t> ahead;
    for (int32_t li : cstyle::loads_of_pass(k_, pass)) {
      const Instr& in = k_.instrs[static_cast<size_t>(li)];
      if (in.inner && in.plain_load()) ahead.push_back(li);
    }
    if (ahead.empty()) {
      loop(tid_, inner_total, ntid, step);
      return;
    }
    // A group from j0 is whole where j0 + (kRowLoadsAhead - 1) * ntid < inner_total.
    const std::string whole = op("sub i64 ", inner_total, ", ", op("mul i64 ", ntid, ", ", kRowLoadsAhead - 1));
    const std::string rest = loop(tid_, whole, op("mul i64 ", ntid, ", ", kRowLoadsAhead), [&](const std::string& j0) {
      std::vector<Scope> scopes;
      std::vector<std::string> at;
      for (int u = 0; u < kRowLoadsAhead; ++u) {
        at.push_back(u == 0 ? j0 : op("add i64 ", j0, ", ", op("mul i64 ", ntid, ", ", u)));
        scopes.push_back(outer.child());
        unflatten(at.back(), no, n, scopes.back());
      }
      for (Scope& sc : scopes)
        for (int32_t li : ahead) value(li, sc);  // memoised in the step's scope: the step reads these
      for (int u = 0; u < kRowLoadsAhead; ++u) step_in(scopes[static_cast<size_t>(u)], at[static_cast<size_t>(u)]);
    });
    loop(rest, inner_total, ntid, step);
  }

  // The passes with kVec consecutive elements of the row per thread and step (vector loads and
  // stores); a static row of at most kMaxCachedItems elements per thread kept in registers from
  // the pass that first loads it.
  void emit_row_vector_passes(Scope& outer, const std::string& ntid, const std::string& inner_total) {
    const size_t n = k_.domain.size(), no = static_cast<size_t>(k_.num_outer);
    const int32_t passes = k_.num_passes();
    const int64_t groups = row_cache_steps(k_, o_, block_, kVec);
    const bool cached = groups > 0;
    // Computed values kept instead of the loads where they are fewer (cstyle::row_values_to_keep).
    const std::set<int32_t> keep = cached ? cstyle::row_values_to_keep(k_) : std::set<int32_t>();
    std::map<int32_t, Registers> kept;
    for (int32_t i : keep) kept[i] = registers(ct_of(k_.instrs[static_cast<size_t>(i)].dtype), groups * kVec);
    auto kept_slot = [&](int32_t i, int64_t at) { return element_of(kept.at(i), at); };
    std::map<int32_t, Registers> cache;
    if (cached && keep.empty())
      for (int32_t i : vectors_->loads) cache[i] = registers(ct_of(buffer_dtype(k_.instrs[static_cast<size_t>(i)].buffer)), groups * kVec);
    auto cache_slot = [&](int32_t i, int64_t at) { return element_of(cache.at(i), at); };
    std::set<int32_t> in_registers;
    const std::optional<OnlinePair> online = cached ? std::nullopt : online_pair();
    for (int32_t pass = 0; pass < passes; ++pass) {
      if (online && pass == 1) continue;  // folded into pass 0
      const std::vector<int32_t> reds = cstyle::reductions_of_pass(k_, pass);
      const PassState ps = begin_pass(reds, pass == 0 ? online : std::nullopt);
      const std::map<int32_t, std::vector<Var>>& states = ps.states;
      const std::optional<OnlineState>& ost = ps.online;
      std::set<int32_t> fresh_loads;
      // The instructions a lane computes in this pass, in the order one lane's chain evaluates
      // them (post-order from the pass's reduction arguments, the online pair's among them, and
      // its stores); earlier passes' results, kept values and vector loads are leaves.
      std::vector<int32_t> interleavable;
      std::set<int32_t> visited;
      std::function<void(int32_t)> visit = [&](int32_t i) {
        if (!visited.insert(i).second) return;
        const Instr& in = k_.instrs[static_cast<size_t>(i)];
        if (in.kind == InstrKind::reduce) return;
        if (!(pass > 0 && keep.count(i)) && !vectors_->loads.count(i))
          for (int32_t a : in.args) visit(a);
        interleavable.push_back(i);
      };
      for (int32_t r : reds) visit(k_.instrs[static_cast<size_t>(r)].args[0]);
      for (const schedule::Store& st : k_.stores)
        if (k_.store_is_inner(st) && k_.instrs[static_cast<size_t>(st.value)].pass == pass) visit(st.value);
      // This pass's vector loads not yet in registers: each group loads them.
      std::set<int32_t> pass_loads;
      for (int32_t li : cstyle::loads_of_pass(k_, pass, pass > 0 ? keep : std::set<int32_t>()))
        if (vectors_->loads.count(li) && !in_registers.count(li)) pass_loads.insert(li);
      // Groups of kVec elements, each from its jg on (g: the cached group's index, -1 uncached),
      // in one step. Every lane of every group has its registers: its scope and the maps that
      // value() reads, swapped in while the lane is emitted.
      struct Group {
        std::string jg;
        int64_t g = -1;
        Scope base;
        std::set<int32_t> to_load;  // this pass's vector loads not yet in registers
        std::vector<LaneValues> lv;
        std::vector<Scope> sc;
      };
      auto step_groups = [&](const std::vector<std::pair<std::string, int64_t>>& at) {
        std::vector<Group> gs(at.size());
        for (size_t gi = 0; gi < at.size(); ++gi) {
          Group& gr = gs[gi];
          gr.jg = at[gi].first;
          gr.g = at[gi].second;
          gr.base = outer.child();
          gr.base.vars.assign(n, "");
          for (size_t d = 0; d < no; ++d) gr.base.vars[d] = outer.vars[d];
          unflatten(gr.jg, no, n, gr.base);
          gr.to_load = pass_loads;
          gr.lv.resize(kVec);
        }
        // (Scopes point at their parents: built once gs no longer moves.)
        for (Group& gr : gs)
          for (int c = 0; c < kVec; ++c) {
            LaneValues& l = gr.lv[static_cast<size_t>(c)];
            const int64_t slot = gr.g * kVec + c;
            for (int32_t li : in_registers) l.load_slots[li] = cache_slot(li, slot);
            for (int32_t vi : keep) (pass == 0 ? l.value_records : l.value_slots)[vi] = kept_slot(vi, slot);
            gr.sc.push_back(gr.base.child());
            if (c > 0) gr.sc.back().vars[vectors_->dim] = op("add i64 ", gr.base.vars[vectors_->dim], ", ", c);
          }
        // A vector load: one access, its lanes handed to the lanes' maps (and the row cache).
        auto load_vector = [&](Group& gr, int32_t li) {
          const std::vector<Val> ls = load_group_of(li, gr.base);
          fresh_loads.insert(li);
          gr.to_load.erase(li);
          for (int c = 0; c < kVec; ++c) {
            const Val& v = ls[static_cast<size_t>(c)];
            gr.lv[static_cast<size_t>(c)].load_reads[li] = v;
            if (cached && keep.empty()) line("store ", type_of(v.ct), " ", v.v, ", ptr ", cache_slot(li, gr.g * kVec + c));
          }
        };
        // All lanes' values interleaved instruction by instruction, each vector loaded just before
        // its first use. Emitted lane after lane (and group after group), every vector's lanes,
        // and every value the lanes share (a stencil tap's bounds), stayed live until the last
        // lane's chain: a 7x7 depthwise convolution before a norm, 49 taps of 12 lanes, took 255
        // registers and spilled.
        for (int32_t i : interleavable) {
          for (Group& gr : gs) {
            if (gr.to_load.count(i)) load_vector(gr, i);
            for (int c = 0; c < kVec; ++c) {
              LaneScope enter(*this, gr.lv[static_cast<size_t>(c)]);
              value(i, gr.sc[static_cast<size_t>(c)]);
            }
          }
        }
        for (Group& gr : gs) {
          while (!gr.to_load.empty()) load_vector(gr, *gr.to_load.begin());
          std::map<size_t, std::vector<std::string>> lanes;
          for (int c = 0; c < kVec; ++c) {
            LaneScope enter(*this, gr.lv[static_cast<size_t>(c)]);
            Scope& s = gr.sc[static_cast<size_t>(c)];
            const std::string j = c == 0 ? gr.jg : op("add i64 ", gr.jg, ", ", c);
            if (ost) {
              online_step(*online, *ost, s);
            } else {
              for (int32_t r : reds) merge(r, states.at(r), element(r, value(k_.instrs[static_cast<size_t>(r)].args[0], s), j));
            }
            for (size_t si = 0; si < k_.stores.size(); ++si) {
              const schedule::Store& st = k_.stores[si];
              if (!k_.store_is_inner(st) || k_.instrs[static_cast<size_t>(st.value)].pass != pass) continue;
              if (vectors_->stores.count(si)) lanes[si].push_back(to_storage(buffer_dtype(st.buffer), value(st.value, s)));
              else store(st, s);
            }
          }
          for (const auto& [si, ls] : lanes) store_group(k_.stores[si].buffer, affine(k_.stores[si].index, gr.base), ls);
        }
      };
      if (cached) {
        // Rows that fill every group need no bounds check: the groups' lanes interleave in one
        // step. Otherwise each group is a step of its own under its check.
        const bool full = inner_extent().hint() % (block_ * kVec) == 0;
        std::vector<std::pair<std::string, int64_t>> all;
        for (int64_t g = 0; g < groups; ++g) {
          const std::string jg = op("mul i64 ", op("add i64 ", tid_, ", ", g * block_), ", ", kVec);
          if (full) all.push_back({jg, g});
          else when(op("icmp slt i64 ", jg, ", ", inner_total), [&] { step_groups({{jg, g}}); });
        }
        if (full) step_groups(all);
        if (keep.empty())
          for (int32_t li : fresh_loads) in_registers.insert(li);
      } else {
        const std::string first = op("mul i64 ", tid_, ", ", kVec), step = op("mul i64 ", ntid, ", ", kVec);
        loop(first, inner_total, step, [&](const std::string& jg) { step_groups({{jg, -1}}); });
      }
      if (ost) online_combine(*online, *ost);
      else block_combine(reds, states);
      bind_row_values(pass, online.has_value(), outer);
    }
  }

  void emit_pointwise(plan::PlanLaunch& launch) {
    const size_t n = k_.domain.size();
    SymInt total = 1;
    for (const SymInt& e : k_.domain) total = total * e;
    if (plan_vectors(0, false)) {
      // Each thread takes kVec consecutive elements (one vector per access) per step.
      const Loop l = open_pointwise_loop(launch, total, kVec);
      Scope base;
      base.vars.assign(n, "");
      unflatten(l.i, 0, n, base);
      std::map<int32_t, std::vector<Val>> groups;
      for (int32_t li : vectors_->loads) groups[li] = load_group_of(li, base);
      std::map<size_t, std::vector<std::string>> lanes;
      for (int c = 0; c < kVec; ++c) {
        for (const auto& [li, g] : groups) load_reads_[li] = g[static_cast<size_t>(c)];
        Scope sc = base.child();
        if (c > 0) sc.vars[vectors_->dim] = op("add i64 ", base.vars[vectors_->dim], ", ", c);
        vector_lane_ = {vectors_->dim, true, c, base.vars[vectors_->dim], sc.vars[vectors_->dim]};
        for (size_t si = 0; si < k_.stores.size(); ++si) {
          if (vectors_->stores.count(si)) lanes[si].push_back(to_storage(buffer_dtype(k_.stores[si].buffer), value(k_.stores[si].value, sc)));
          else store(k_.stores[si], sc);
        }
      }
      load_reads_.clear();
      vector_lane_ = {};
      for (const auto& [si, ls] : lanes) store_group(k_.stores[si].buffer, affine(k_.stores[si].index, base), ls);
      close_pointwise_loop(l);
      return;
    }
    const Loop l = open_pointwise_loop(launch, total, 1);
    Scope sc;
    sc.vars.assign(n, "");
    if (n > 0) unflatten(l.i, 0, n, sc);
    for (const schedule::Store& st : k_.stores) store(st, sc);
    close_pointwise_loop(l);
  }
};

}  // namespace

bool nvptx_emits(const Kernel& k, const CodegenOptions& o) {
  if (o.compiler != "llvm" || (o.arch != 0 && o.arch < 80)) return false;
  if (k.reference || k.attention) return false;
  // sin and cos: LLVM 16 makes slower code of libdevice's sinf and cosf than NVVM does (the
  // suite's sincos 0.0496 against 0.0420 ms on the H200, docs/cuda.md); such kernels stay CUDA C.
  for (const Instr& in : k.instrs)
    if (in.kind == InstrKind::pointwise && (in.op == OpId::sin || in.op == OpId::cos)) return false;
  if (k.kind == KernelKind::reduction) return k.num_passes() == 0 || !uses_column_strategy(k);
  return k.kind == KernelKind::pointwise || (k.kind == KernelKind::matmul && k.num_passes() == 0);
}

std::string emit_nvptx(const Kernel& k, const schedule::Schedule& s, const CodegenOptions& o, plan::PlanLaunch& launch) {
  return NvptxEmitter(k, s, o).emit(launch);
}

}  // namespace kiln::cuda::detail

namespace kiln::cuda {

bool is_nvptx_program(const std::string& source) { return source.rfind(detail::kModuleHeader, 0) == 0; }

std::vector<std::string> nvptx_modules(const std::string& program) {
  std::vector<std::string> modules;
  const std::string next = std::string("\n") + detail::kModuleHeader;
  size_t at = 0;
  while (at < program.size()) {
    const size_t end = program.find(next, at);
    const size_t stop = end == std::string::npos ? program.size() : end + 1;
    modules.push_back(program.substr(at, stop - at));
    at = stop;
  }
  return modules;
}

}  // namespace kiln::cuda
