// Kernel IR -> LLVM 16 IR text, one function per kernel (see codegen.h for the strategies).
//
// The emitted code keeps loop counters, accumulators and reduction results in allocas and
// lets LLVM's mem2reg/SROA turn them into SSA: simpler to emit, and exactly as fast after O3.
// This file prints the loops (row segments, the row and column strategies of reductions, the
// gemm); every value in them comes from the LLVM IR printer's CPU flavour (targets/render/llvm):
// computed in a compute type, float (f32, f16, bf16), double (f64), i64 (i32, i64) or i1 (bool),
// loads converted from the storage type and stores back.
#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <sstream>

#include "kiln/plan/replay.h"
#include "kiln/lower/skeleton.h"
#include "kiln/config/config.h"
#include "kiln/cpu/codegen.h"
#include "kiln/graph/error.h"
#include "kiln/render/llvm.h"
#include "kiln/schedule/strategy.h"

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

using render::llvm::CT;
using render::llvm::ct_of;
using render::llvm::is_float;
using render::llvm::literal;
using render::llvm::storage_type;
using render::llvm::type_of;
using render::llvm::Val;

// Column strategy: outer points per block. Measured with max-autotune on col_sum ([1024, 8192]
// summed over dim 0, 2-core znver4): 1024 beat 256 and 64 (1.09 vs 1.49 ms).
constexpr int64_t kLanes = 1024;

// Matmul kernels split C into tiles of rows x columns, so that each gemm call has rows enough
// for the BLAS and each thread multiplies a column block of B that stays in its cache: a split
// by rows alone gave 16 threads calls of 16 rows, each packing all of B (bert-base's
// [1024, 768] x [768, 3072] took 9.8 ms on 16 threads, about 31 GFLOP/s a core, where the whole
// model ran at about 112 GFLOP/s on one thread). Columns come
// in about equal tiles of at most kGemmColumnTile (a multiple of 16: whole vectors), where N is
// static and larger than one tile; the parallel range is (batch..., column tile, row).
constexpr int64_t kGemmColumnTile = 512;
constexpr int64_t kGemmRowGrain = 64;

struct ColumnTiles {
  int64_t count = 1;   // tiles of N
  int64_t width = 0;   // columns per tile, the last one shorter (0: all of N)
};
ColumnTiles gemm_column_tiles(const schedule::Gemm& g) {
  const std::optional<int64_t> n = g.n.static_value();
  if (!n || *n <= kGemmColumnTile) return {};
  const int64_t count = (*n + kGemmColumnTile - 1) / kGemmColumnTile;
  const int64_t width = ((*n + count - 1) / count + 15) / 16 * 16;
  return {(*n + width - 1) / width, width};
}

// The range a kernel's calls split, [0, extent): the outer points of a pointwise or reduction
// kernel, a gemm's row tiles. The plan's parallel_extent, and each kernel's own bound on %end.
SymInt parallel_extent_of(const Kernel& k) {
  if (k.kind != KernelKind::matmul) return k.outer_extent();
  SymInt rows = k.gemm->m * SymInt(gemm_column_tiles(*k.gemm).count);
  for (const SymInt& b : k.gemm->batch) rows = rows * b;
  return rows;
}


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

class FunctionEmitter : public render::llvm::Printer {
 public:
  using Variant = KernelVariant;
  // `bindings`: plan::kernel_bindings of the kernel's plan entry.
  FunctionEmitter(const Kernel& k, std::vector<int32_t> bindings, const schedule::Schedule& s, const CodegenOptions& o,
                  Variant v = Variant())
      : Printer(render::llvm::cpu(), k.name), k_(k), s_(s), o_(o), v_(std::move(v)), bindings_(std::move(bindings)) {
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
      case KernelKind::convolution:
        fail("cpu codegen: kernel ", k_.name, " is a library convolution, which the cpu target does not run "
             "(schedule for it with Target::cpu(), which decomposes convolutions)");
    }
    // A call covers [begin, end) of the kernel's parallel extent, which the kernel computes from
    // the sizes itself: %end is bounded by it, so a plan whose launch extent was edited (a plan
    // run with --trust-plan) cannot make a kernel read or write past its buffers.
    const std::string extent = sym(parallel_extent_of(k_));
    std::ostringstream f;
    f << "define void @" << v_.name << "(ptr noalias %buffers, ptr noalias %sizes, i64 %begin, i64 %end.arg) #"
      << v_.attributes << " {\n"
      << "entry:\n"
      << entry_.str() << "  %end.in = icmp slt i64 %end.arg, " << extent << "\n"
      << "  %end = select i1 %end.in, i64 %end.arg, i64 " << extent << "\n"
      << "  br label %start\nstart:\n"
      << body_.str() << "}\n";
    f << alias_metadata() << loop_md_;
    return f.str();
  }

 private:
  const Kernel& k_;
  const schedule::Schedule& s_;
  const CodegenOptions& o_;
  Variant v_;
  // The kernel's buffers in id order (plan::kernel_bindings): `buffers` holds their addresses in
  // this order, so the text names no buffer id and a model's repeated layers print alike.
  std::vector<int32_t> bindings_;
  std::map<int32_t, std::string> bufs_;
  std::map<int32_t, std::string> red_;  // reduce instr -> alloca holding its result
  std::map<int32_t, std::string> state_[3];  // reduce instr -> the slot of its state's component c
  // Blocked float sums (blocked_sums): the state of the current block, and of the current run
  // of kSumBlock blocks, which folds into state_.
  std::map<int32_t, std::string> block_state_[3], super_state_[3];
  enum class Level { running, super, block };
  Level level_ = Level::running;  // where combine() folds: Level::block inside a block
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
  static constexpr int64_t kMetadataRange = 4096;     // ids per function (see make_module)
  int64_t loop_ids_ = 0;     // loop metadata ids used so far
  std::string loop_md_;      // their definitions
  std::string access_group_;  // inside a parallel loop: its access group, which buffer accesses join

  // ---- alias metadata ----
  int64_t binding_of(int32_t b) const {
    const auto it = std::lower_bound(bindings_.begin(), bindings_.end(), b);
    KILN_INTERNAL_CHECK(it != bindings_.end() && *it == b, "cpu codegen: kernel ", k_.name, " touches buffer ", b,
                        " that it neither reads nor writes");
    return it - bindings_.begin();
  }
  // The memory a buffer lives in, named by binding: an intermediate by the first binding in its
  // slot (buffers updated in place share it), any other buffer by its own.
  std::string memory_of(int32_t b) const {
    const schedule::Buffer& buf = s_.buffers[static_cast<size_t>(b)];
    if (buf.kind == schedule::BufferKind::intermediate)
      for (int32_t o : bindings_) {
        const schedule::Buffer& ob = s_.buffers[static_cast<size_t>(o)];
        if (ob.kind == schedule::BufferKind::intermediate && ob.slot == buf.slot) return "m" + std::to_string(binding_of(o));
      }
    return "m" + std::to_string(binding_of(b));
  }
  std::string alias(int32_t b) {
    const std::string group = access_group_.empty() ? "" : ", !llvm.access.group " + access_group_;
    if (v_.metadata_base <= 0) return group;
    const std::string m = memory_of(b);
    auto it = scope_id_.find(m);
    if (it == scope_id_.end())
      it = scope_id_.emplace(m, v_.metadata_base + 1 + 3 * static_cast<int64_t>(scope_id_.size())).first;
    return ", !alias.scope !" + std::to_string(it->second + 1) + ", !noalias !" + std::to_string(it->second + 2) + group;
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
  // A plan symbol: loaded from the sizes array once, in the entry block.
  std::string symbol(SymbolId id) override {
    const std::string key = "#s" + std::to_string(id);
    if (auto it = syms_.find(key); it != syms_.end()) return it->second;
    const std::string p = tmp(), v = tmp();
    entry_ << "  " << p << " = getelementptr i64, ptr %sizes, i64 " << id << "\n"
           << "  " << v << " = load i64, ptr " << p << ", align 8\n";
    syms_[key] = v;
    return v;
  }
  std::string buffer(int32_t b) {
    if (auto it = bufs_.find(b); it != bufs_.end()) return it->second;
    const std::string p = tmp(), v = tmp();
    entry_ << "  " << p << " = getelementptr ptr, ptr %buffers, i64 " << binding_of(b) << "\n"
           << "  " << v << " = load ptr, ptr " << p << ", align 8\n";
    bufs_[b] = v;
    return v;
  }
  using Printer::affine;
  std::string affine(const Affine& a, const Scope& sc) { return affine(a, sc.vars); }

  // ---- loads and stores ----
  Val load(const Instr& in, Scope& sc) {
    const DType t = s_.buffers[static_cast<size_t>(in.buffer)].dtype;
    std::string idx = affine(in.index, sc);
    if (in.gathered) idx = op("add i64 ", idx, ", ", convert(value(in.gather_offset(), sc), CT::i64).v);
    const std::string p = op("getelementptr ", storage_type(t), ", ptr ", buffer(in.buffer), ", i64 ", idx);
    std::string raw;
    if (in.masked) {
      // Only where the mask holds: a branch around the load (the loop vectorizer turns it into a
      // masked load or gather), the slot holding 0 otherwise.
      const std::string m = convert(value(in.mask(), sc), CT::b).v;
      raw = masked_load(t, m, [&] { return op("load ", storage_type(t), ", ptr ", p, ", align ", dtype_size(t), alias(in.buffer)); });
    } else {
      raw = op("load ", storage_type(t), ", ptr ", p, ", align ", dtype_size(t), alias(in.buffer));
    }
    return to_dtype(from_storage(t, raw), in.dtype);
  }

  void store(const schedule::Store& st, const Val& x0, Scope& sc) {
    const DType t = s_.buffers[static_cast<size_t>(st.buffer)].dtype;
    const std::string raw = st.combine == schedule::Combine::none ? to_storage(t, x0) : "";
    std::string idx = affine(st.index, sc);
    if (st.offset >= 0) idx = op("add i64 ", idx, ", ", convert(value(st.offset, sc), CT::i64).v);
    const std::string p = op("getelementptr ", storage_type(t), ", ptr ", buffer(st.buffer), ", i64 ", idx);
    if (st.combine != schedule::Combine::none) {
      // Other threads may combine into the same element (a scatter's repeated index).
      atomic_combine(st.combine, t, "ptr", p, x0);
      return;
    }
    line("store ", storage_type(t), " ", raw, ", ptr ", p, ", align ", dtype_size(t), alias(st.buffer));
  }

  // ---- values ----
  Val value(int32_t i, Scope& sc) {
    if (const Val* v = sc.find(i)) return *v;
    const Instr& in = k_.instrs[static_cast<size_t>(i)];
    Val r;
    if (auto kept = kept_.find(i); kept != kept_.end() && sweep_ > in.pass) {
      const CT c = ct_of(in.dtype);
      const std::string p = op("getelementptr ", type_of(c), ", ptr ", kept->second, ", i64 ", inner_flat(sc));
      r = {op("load ", type_of(c), ", ptr ", p), c};
      sc.memo[i] = r;
      return r;
    }
    switch (in.kind) {
      case InstrKind::constant: r = {literal(in.value, ct_of(in.dtype)), ct_of(in.dtype)}; break;
      case InstrKind::size: r = {sym(in.size), CT::i64}; break;
      case InstrKind::index: r = {affine(in.index, sc), CT::i64}; break;
      case InstrKind::load: r = load(in, sc); break;
      case InstrKind::pointwise: r = pointwise_value(in, sc); break;
      case InstrKind::reduce: {
        KILN_CHECK(red_.count(i), "cpu codegen: kernel ", k_.name, ": reduction v", i, " read before its pass");
        const CT c = ct_of(in.dtype);
        r = {op("load ", type_of(c), ", ptr ", slot(red_, i, c, sc.lane)), c};
        break;
      }
    }
    sc.memo[i] = r;
    return r;
  }

  // In a reduction kernel: a division of a value that varies along the row by one that does not.
  bool divides_by_row_value(const Instr& in) const {
    return k_.kind == KernelKind::reduction && k_.instrs[static_cast<size_t>(in.args[0])].inner &&
           !k_.instrs[static_cast<size_t>(in.args[1])].inner;
  }

  Val pointwise_value(const Instr& in, Scope& sc) {
    std::vector<Val> a;
    std::vector<DType> at;
    for (int32_t x : in.args) {
      a.push_back(value(x, sc));
      at.push_back(k_.instrs[static_cast<size_t>(x)].dtype);
    }
    return pointwise(in, a, at, o_.emulate_precision_casts, in.op == OpId::div && divides_by_row_value(in));
  }

  // ---- loops ----
  // for (v = from; v < to; ++v) body(v): counted loop through an alloca. `parallel`: the loop's
  // iterations write disjoint elements and read an element of a buffer they write only where
  // they write it (pointwise kernels' rows, a gemm epilogue's columns: what the thread pool's
  // disjoint slices already rely on), so its buffer accesses are marked parallel
  // (llvm.loop.parallel_accesses) and the vectoriser needs no overlap check. Without the mark,
  // an output updated in place (in its input's slot: the same address) failed LLVM's run-time
  // check and the loop ran scalar: gpt2's tanh GELU took 14 ns an element instead of 2.
  void loop(const std::string& from, const std::string& to, const std::function<void(const std::string&)>& body,
            bool parallel = false) {
    std::vector<std::string> properties;
    const std::string outer_group = access_group_;
    if (parallel) {
      access_group_ = "!" + std::to_string(loop_metadata_id());
      loop_md_ += access_group_ + " = distinct !{}\n";
      properties.push_back("!{!\"llvm.loop.parallel_accesses\", " + access_group_ + "}");
    }
    const std::string iv = alloca("i64");
    const std::string cond = label("cond"), bodyl = label("body"), done = label("done");
    line("store i64 ", from, ", ptr ", iv);
    line("br label %", cond);
    block(cond);
    const std::string v = op("load i64, ptr ", iv);
    line("br i1 ", op("icmp slt i64 ", v, ", ", to), ", label %", bodyl, ", label %", done);
    block(bodyl);
    body(v);
    access_group_ = outer_group;
    line("store i64 ", op("add i64 ", v, ", 1"), ", ptr ", iv);
    // An unroll variant's hint on every loop: the vectoriser acts on innermost loops only.
    if (v_.unroll > 0) properties.push_back("!{!\"llvm.loop.interleave.count\", i32 " + std::to_string(v_.unroll) + "}");
    if (properties.empty())
      line("br label %", cond);
    else
      line("br label %", cond, ", !llvm.loop ", loop_id(properties));
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

  // Splits a flat index over the domain's dims [first, last) (row-major) into sc.vars.
  using Printer::unflatten;
  void unflatten(const std::string& flat, size_t first, size_t last, Scope& sc) {
    unflatten(flat, k_.domain, first, last, sc.vars);
  }

  // Whether every store's index moves with domain var `var` (so a loop over it writes each
  // element once: its accesses may be marked parallel).
  bool writes_each_element_once(size_t var) const {
    for (const schedule::Store& st : k_.stores)
      if (!st.plain() || !st.index.depends_on(var)) return false;
    return true;
  }

  void emit_pointwise() {
    const size_t n = k_.domain.size();
    Scope top;
    top.vars.assign(n, "");
    if (n == 0) {
      line("br i1 ", op("icmp sgt i64 %end, %begin"), ", label %one, label %exit");
      block("one");
      for (const schedule::Store& st : k_.stores) store(st, value(st.value, top), top);
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
        for (const schedule::Store& st : k_.stores) store(st, value(st.value, in), in);
      }, writes_each_element_once(n - 1));
    });
  }

  // Accumulator handling of the reductions. Row strategy: one scalar slot per reduction. Column
  // strategy: an array of kLanes slots, one per outer point of the block, indexed by `lane`.
  std::string slot(std::map<int32_t, std::string>& m, int32_t i, CT c, const std::string& lane) {
    if (!m.count(i)) {
      m[i] = lanes_ > 0 ? alloca(("[" + std::to_string(lanes_) + " x " + type_of(c) + "]").c_str()) : alloca(type_of(c));
      slot_type_[m[i]] = c;
    }
    if (lanes_ == 0) return m[i];
    return op("getelementptr [", lanes_, " x ", type_of(c), "], ptr ", m[i], ", i64 0, i64 ", lane);
  }

  // Reductions: each one's rule (sdk/lower/reduction.h) over its state's slots. The CPU has no
  // NaN-propagating extremum that vectorises, so a float max or min folds skipping NaN (the
  // flavour's nnan nsz fold) beside a NaN flag.
  lower::Rule rule(int32_t i) const { return reduction_rule(k_, i); }
  // The running state's slots, or those of the current block or run of blocks of a blocked sum.
  std::vector<std::string> state_slots(const lower::Rule& rl, int32_t i, const std::string& lane, Level level) {
    std::vector<std::string> s;
    for (size_t c = 0; c < rl.state.size(); ++c) {
      auto& m = level == Level::block ? block_state_[c] : level == Level::super ? super_state_[c] : state_[c];
      s.push_back(slot(m, i, rl.state[c].ct, lane));
    }
    return s;
  }
  std::vector<std::string> state_slots(const lower::Rule& rl, int32_t i, const std::string& lane) {
    return state_slots(rl, i, lane, level_);
  }
  // Folds the states of `from` into those of `to` (blocked sums).
  void fold_level(const std::vector<int32_t>& reds, Level from, Level to) {
    for (int32_t r : reds) {
      const lower::Rule rl = rule(r);
      const std::vector<std::string> slots = state_slots(rl, r, "", from);
      std::vector<std::string> values;
      for (size_t c = 0; c < slots.size(); ++c) values.push_back(op("load ", type_of(rl.state[c].ct), ", ptr ", slots[c]));
      fold_into(rl, state_slots(rl, r, "", to), values);
    }
  }
  void init_acc(int32_t i, const std::string& lane) {
    const lower::Rule rl = rule(i);
    store_identity(rl, state_slots(rl, i, lane));
  }
  void combine(int32_t i, Scope& sc, const std::string& flat) {
    const lower::Rule rl = rule(i);
    const Val x = value(k_.instrs[static_cast<size_t>(i)].args[0], sc);
    fold_into(rl, state_slots(rl, i, sc.lane), element_state(rl, x, flat));
  }
  void finish_acc(int32_t i, const std::string& lane) {
    const Instr& in = k_.instrs[static_cast<size_t>(i)];
    const lower::Rule rl = rule(i);
    std::vector<std::string> st;
    const std::vector<std::string> slots = state_slots(rl, i, lane);
    for (size_t c = 0; c < slots.size(); ++c) st.push_back(op("load ", type_of(rl.state[c].ct), ", ptr ", slots[c]));
    const CT c = ct_of(in.dtype);
    const std::string v = convert(finish_state(rl, st, in.dtype), c).v, p = slot(red_, i, c, lane);
    line("store ", type_of(c), " ", v, ", ptr ", p);
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

  // Float sums fold the innermost inner dim in blocks of kSumBlock elements, each block from the
  // identity, then the block into the state of its run of kSumBlock blocks, and each run into
  // the running state: every accumulator (the vectoriser's lanes) adds at most kSumBlock
  // elements in a row, each run kSumBlock blocks, and the running state one per kSumBlock^2
  // elements, so the error grows with kSumBlock + kSumBlock + n / kSumBlock^2 rather than with n
  // (a 1M-element partial of sum_all was off by 1.3e-5 relative to the exact sum; the reference
  // sums in double). With one level of blocks a partial of more than 2^36 ones would stop at
  // 2^36 (adding a block's 4096 to it rounds back), with two it does not before 2^48.
  static constexpr int64_t kSumBlock = 4096;
  bool blocked_sums(const std::vector<int32_t>& reds) const {
    const SymInt& extent = k_.domain.back();
    if (extent.is_static() && extent.hint() <= kSumBlock) return false;
    for (int32_t r : reds) {
      const Instr& in = k_.instrs[static_cast<size_t>(r)];
      if (in.reduce == ReduceKind::sum && is_floating(k_.instrs[static_cast<size_t>(in.args[0])].dtype)) return true;
    }
    return false;
  }

  // Nested loops over the inner dims, innermost contiguous; body gets the innermost scope. With
  // `blocked` (the row strategy's float sums, blocked_sums), the innermost runs block by block.
  void inner_loops(Scope& parent, size_t d, const std::function<void(Scope&)>& body,
                   const std::vector<int32_t>* blocked = nullptr) {
    if (d == k_.domain.size()) {
      body(parent);
      return;
    }
    if (blocked && d + 1 == k_.domain.size()) {
      const std::string extent = sym(k_.domain[d]);
      auto min_of = [&](const std::string& a, const std::string& b) {
        return op("select i1 ", op("icmp slt i64 ", a, ", ", b), ", i64 ", a, ", i64 ", b);
      };
      constexpr int64_t kRun = kSumBlock * kSumBlock;
      loop_by("0", extent, kRun, [&](const std::string& run) {
        level_ = Level::super;
        for (int32_t r : *blocked) init_acc(r, "");
        const std::string run_end = min_of(op("add i64 ", run, ", ", kRun), extent);
        loop_by(run, run_end, kSumBlock, [&](const std::string& b) {
          level_ = Level::block;
          for (int32_t r : *blocked) init_acc(r, "");
          loop(b, min_of(op("add i64 ", b, ", ", kSumBlock), run_end), [&](const std::string& v) {
            Scope sc;
            sc.vars = parent.vars;
            sc.vars[d] = v;
            sc.parent = &parent;
            body(sc);
          });
          fold_level(*blocked, Level::block, Level::super);
        });
        fold_level(*blocked, Level::super, Level::running);
        level_ = Level::running;
      });
      return;
    }
    loop("0", sym(k_.domain[d]), [&](const std::string& v) {
      Scope sc;
      sc.vars = parent.vars;
      sc.vars[d] = v;
      sc.parent = &parent;
      inner_loops(sc, d + 1, body, blocked);
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
      kept_[i] = alloca(("[" + std::to_string(inner.hint()) + " x " + type_of(c) + "], align 64").c_str());
    }
  }

  // One step of pass p at the point of scope sc: fold into the accumulators, store what is due.
  void pass_body(int32_t p, const std::vector<int32_t>& reds, Scope& sc) {
    for (const auto& [i, scratch] : kept_) {
      if (k_.instrs[static_cast<size_t>(i)].pass != p) continue;
      const Val x = value(i, sc);
      const std::string q = op("getelementptr ", type_of(x.ct), ", ptr ", scratch, ", i64 ", inner_flat(sc));
      line("store ", type_of(x.ct), " ", x.v, ", ptr ", q);
    }
    std::string flat;
    for (int32_t r : reds) {
      const ReduceKind kind = k_.instrs[static_cast<size_t>(r)].reduce;
      if ((kind == ReduceKind::argmax || kind == ReduceKind::argmin) && flat.empty()) flat = inner_flat(sc);
      combine(r, sc, flat);
    }
    for (const schedule::Store& st : k_.stores)
      if (k_.store_is_inner(st) && k_.instrs[static_cast<size_t>(st.value)].pass == p)
        store(st, value(st.value, sc), sc);
  }

  void outer_stores(Scope& sc) {
    for (const schedule::Store& st : k_.stores)
      if (!k_.store_is_inner(st)) store(st, value(st.value, sc), sc);
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
          const bool blocked = blocked_sums(reds);
          inner_loops(outer, no, [&](Scope& sc) { pass_body(p, reds, sc); }, blocked ? &reds : nullptr);
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
  // Loop metadata: ids after this function's alias scopes, in the order loops are printed.
  int64_t loop_metadata_id() {
    KILN_CHECK(kLoopMetadataBase + loop_ids_ < kMetadataRange, "cpu codegen: kernel ", k_.name,
               " has more loops than its metadata id range holds");
    return v_.metadata_base + kLoopMetadataBase + loop_ids_++;
  }
  // A loop id (for `br ..., !llvm.loop <id>`) carrying the properties, e.g. !{!"llvm.loop.unroll.disable"}.
  std::string loop_id(const std::vector<std::string>& properties) {
    const std::string id = "!" + std::to_string(loop_metadata_id());
    std::string refs, defs;
    for (const std::string& p : properties) {
      const std::string pid = "!" + std::to_string(loop_metadata_id());
      refs += ", " + pid;
      defs += pid + " = " + p + "\n";
    }
    loop_md_ += id + " = distinct !{" + id + refs + "}\n" + defs;
    return id;
  }
  std::string no_unroll() { return loop_id({"!{!\"llvm.loop.unroll.disable\"}"}); }
  std::string splat_i64(const std::string& x) {
    return op("shufflevector <16 x i64> ", op("insertelement <16 x i64> poison, i64 ", x, ", i64 0"),
              ", <16 x i64> poison, <16 x i32> zeroinitializer");
  }

  // C[0:rows, 0:N] = A[0:rows, 0:K] @ B[0:K, 0:N] (C with row stride ldc, columns contiguous; A
  // by element strides; B rows contiguous). Tiles of tile_rows rows (4 unless a variant says otherwise) x
  // 32 columns keep their 2 x tile_rows vector accumulators in registers over the whole K loop
  // (each step: two vector loads of B, one broadcast of A per row, two fused multiply-adds per
  // row); the columns past N are masked off, and the rows left over go in tiles of half, a
  // quarter, ... as many rows.
  void tiled_gemm(const std::string& ap, const std::string& bp, const std::string& cp, const std::string& rows,
                  const std::string& N, const std::string& ldc, const std::string& K, const std::string& a_rs,
                  const std::string& a_cs, const std::string& b_rs) {
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
          const std::string crow = op("mul i64 ", op("add i64 ", r0, ", ", t), ", ", ldc);
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
    const ColumnTiles tiles = gemm_column_tiles(g);
    // Rows of the flattened (batch..., column tile, m): one gemm per run of rows within one
    // batch element and column tile.
    walk_rows(M, 0, [&](const std::string& bt, const std::string& m0, const std::string& rows) {
      Scope outer;
      outer.vars.assign(n, "");
      std::string b = bt, c0 = "0", cols = N;
      if (tiles.count > 1) {
        b = op("sdiv i64 ", bt, ", ", tiles.count);
        const std::string tile = op("srem i64 ", bt, ", ", tiles.count);
        c0 = op("mul i64 ", tile, ", ", tiles.width);
        const std::string left = op("sub i64 ", N, ", ", c0);
        const std::string short_tile = op("icmp slt i64 ", left, ", ", tiles.width);
        cols = select(short_tile, CT::i64, left, std::to_string(tiles.width)).v;
      }
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
      const std::string c_row_off = op("add i64 ", batch_off, ", ", row_off);
      const std::string coff = op("add i64 ", c_row_off, ", ", c0);
      const char* et = g.dtype == DType::f64 ? "double" : "float";
      const std::string ap = op("getelementptr ", et, ", ptr ", buffer(g.a), ", i64 ", aoff);
      // One statement per emitted instruction: argument evaluation order is unspecified, and the
      // text must not depend on the compiler (the browser build prints the same plans).
      const std::string b_col_stride = sym(g.b_col_stride);
      const std::string b_col_off = op("mul i64 ", c0, ", ", b_col_stride);
      const std::string b_tile_off = op("add i64 ", boff, ", ", b_col_off);
      const std::string bp = op("getelementptr ", et, ", ptr ", buffer(g.b), ", i64 ", b_tile_off);
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
        tiled_gemm(ap, bp, cp, rows, cols, N, K, a_rs, a_cs, b_rs);
      } else {
      std::string lda, ldb;
      const std::string ta = trans(g.a_row_stride, g.a_col_stride, M, K, lda);
      const std::string tb = trans(g.b_row_stride, g.b_col_stride, K, N, ldb);
      line("call void @", g.dtype == DType::f64 ? "kiln_dgemm" : "kiln_sgemm", "(i32 ", ta, ", i32 ", tb, ", i64 ", rows, ", i64 ", cols, ", i64 ", K, ", ptr ", ap,
           ", i64 ", lda, ", ptr ", bp, ", i64 ", ldb, ", ptr ", cp, ", i64 ", N, ")");
      }
      if (k_.stores.empty()) return;
      // The epilogue over the rows just multiplied, while they are in cache.
      loop(m0, op("add i64 ", m0, ", ", rows), [&](const std::string& m) {
        Scope rs;
        rs.vars = outer.vars;
        rs.vars[n - 2] = m;
        rs.parent = &outer;
        const std::string c_end = op("add i64 ", c0, ", ", cols);
        loop(c0, c_end, [&](const std::string& c) {
          Scope sc;
          sc.vars = rs.vars;
          sc.vars[n - 1] = c;
          sc.parent = &rs;
          for (const schedule::Store& st : k_.stores) store(st, value(st.value, sc), sc);
        }, writes_each_element_once(n - 1));
      });
    });
  }
};

// The gemm's declarations: its BLAS call and the generated tiles' vector intrinsics.
constexpr const char* kGemmDeclarations = R"(declare <16 x float> @llvm.masked.load.v16f32.p0(ptr, i32, <16 x i1>, <16 x float>)
declare void @llvm.masked.store.v16f32.p0(<16 x float>, ptr, i32, <16 x i1>)
declare <16 x float> @llvm.fmuladd.v16f32(<16 x float>, <16 x float>, <16 x float>)
declare void @kiln_sgemm(i32, i32, i64, i64, i64, ptr, i64, ptr, i64, ptr, i64)
declare void @kiln_dgemm(i32, i32, i64, i64, i64, ptr, i64, ptr, i64, ptr, i64)

)";
// Attribute groups of the kernel variants: #0 the default, #1-#3 a preferred vector width.
constexpr const char* kAttributes = R"(
attributes #0 = { nounwind }
attributes #1 = { nounwind "prefer-vector-width"="256" }
attributes #2 = { nounwind "prefer-vector-width"="512" }
attributes #3 = { nounwind "prefer-vector-width"="128" }
)";

// The module prelude every kernel may use: the CPU flavour's declarations and helpers
// (targets/render/llvm), the gemm's declarations, the attribute groups.
const std::string& prelude() {
  static const std::string text = std::string("; Kiln CPU kernels (LLVM 16 IR)\n") + render::llvm::cpu_declarations() +
                                  kGemmDeclarations + render::llvm::cpu_helpers() + kAttributes;
  return text;
}

}  // namespace

plan::KernelPlan generate(const schedule::Schedule& s, const CodegenOptions& options) {
  plan::KernelPlan p = lower::plan_skeleton(s, "cpu");
  p.prelude = prelude();
  const ShapeEnv& env = s.graph.shapes();
  // Kernels alike but for their name and buffers (a model's repeated layers: their buffers are
  // bound by position) share the first one's functions: its entry, variants and source, which
  // the runtime compiles once. Keyed by the main function printed under one fixed name.
  std::map<std::string, size_t> alike;
  for (size_t pk_index = 0; pk_index < s.kernels.size(); ++pk_index) {
    const Kernel& k = s.kernels[pk_index];
    plan::PlanKernel pk = lower::kernel_skeleton(k);
    const std::vector<int32_t> bindings = plan::kernel_bindings(pk);
    auto emitter = [&](FunctionEmitter::Variant v) { return FunctionEmitter(k, bindings, s, options, std::move(v)); };
    std::string key;
    if (!k.reference) {
      FunctionEmitter::Variant canonical{"kiln_kernel"};
      canonical.metadata_base = 1;
      key = emitter(canonical).emit();
    }
    if (auto first = alike.find(key); !k.reference && first != alike.end()) {
      const plan::PlanKernel& f = p.kernels[first->second];
      pk.entry = f.entry;
      pk.variants = f.variants;
      pk.source = f.source;
    } else if (!k.reference) {
      alike.emplace(key, p.kernels.size());
      pk.entry = k.name;
      // Metadata ids: a range of 4096 per function, so kernels can share any module.
      int64_t next_metadata = static_cast<int64_t>(pk_index) * 16 * 4096 + 1;
      FunctionEmitter::Variant main;
      main.metadata_base = next_metadata;
      pk.source = emitter(main).emit();
      if (options.autotune_gemm && options.matmul == "auto" && k.kind == KernelKind::matmul &&
          k.gemm->dtype == DType::f32 && k.gemm->b_col_stride == 1) {
        // max-autotune: the BLAS call and the generated tiles, whichever the main one is not.
        const bool main_generated = emitter(main).generated_gemm();
        FunctionEmitter::Variant v{k.name + (main_generated ? "_blas" : "_tiled"), main_generated ? 0 : 2, 0};
        v.gemm = main_generated ? 0 : 1;
        v.metadata_base = (next_metadata += 4096);
        pk.source += "\n" + emitter(v).emit();
        pk.variants.push_back(v.name);
        // The generated tiles in other heights: 2 rows (more tiles to spread over threads) and 8
        // (each B vector reused by more rows; 16 of AVX-512's 32 registers hold accumulators).
        for (int64_t rows : {2, 8}) {
          FunctionEmitter::Variant t{k.name + "_tiled_r" + std::to_string(rows), 2, 0, 1};
          t.tile_rows = rows;
          t.metadata_base = (next_metadata += 4096);
          pk.source += "\n" + emitter(t).emit();
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
          pk.source += "\n" + emitter(v).emit();
          pk.variants.push_back(v.name);
        }
      }
    }
    if (!k.reference) {
      const std::vector<int64_t> ex = env.examples();
      pk.parallel_extent = parallel_extent_of(k);
      if (k.kind == KernelKind::pointwise) {
        pk.grain = options.pointwise_grain;
      } else if (k.kind == KernelKind::reduction) {
        SymInt inner = 1;
        for (size_t d = static_cast<size_t>(k.num_outer); d < k.domain.size(); ++d) inner = inner * k.domain[d];
        pk.grain = std::max<int64_t>(1, options.reduction_grain / std::max<int64_t>(1, inner.evaluate(ex)));
        if (uses_column_strategy(k)) pk.grain = std::max(pk.grain, kLanes);
      } else {
        pk.grain = kGemmRowGrain;
      }
    }
    p.kernels.push_back(std::move(pk));
  }
  if (plan::replay_enabled()) plan::record_for_replay(p, s.str());
  return p;
}

plan::KernelPlan generate_plan(const Graph& g) { return generate(schedule::schedule_graph(g)); }

}  // namespace kiln::cpu
