// libFuzzer target for kernel plans (sdk/plan): plan_from_json (which runs plan::validate) on
// arbitrary bytes may give a plan or throw kiln::Error; any other exception (kiln::InternalError,
// a bug in Kiln, included: it escapes and libFuzzer reports the abort), a crash or a sanitizer
// report is a finding. For a plan that loads:
// - plan_to_json of it must load again and print the same bytes (the round trip);
// - when its inputs are small at its symbols' example values (or their minimum, when an example
//   is large), plan::bind on contiguous inputs of those sizes must give a binding or throw
//   kiln::Error;
// - when bind gives one and every buffer is small, the plan's reference kernels run on the
//   reference interpreter as the cpu runtime runs them (views of each buffer's memory at the
//   bound sizes and strides, the result copied to the output buffer's memory), with every
//   buffer, slot and output allocated at exactly the bytes bind gives (so ASan sees any read or
//   write past what bind promised), then plan::finish_outputs reads the checks' counts.
// In a build with the CPU target (KILN_FUZZ_JIT: tests/fuzz/CMakeLists.txt compiles the code
// generator and targets/cpu/runtime in, instrumented), cpu plans also run their generated
// kernels, but only Kiln's own code: a kernel source is code, and arbitrary LLVM IR runs only
// under --trust-plan (docs/plan-trust.md; fuzzing LLVM is not the point). So:
// - a cpu plan of at most 16 kernels with an origin (its graph at most 32 KiB) is regenerated from
//   it as `kiln run` does (target::regenerate; kept per origin, so mutations that keep a seed's
//   origin cost nothing more); a kiln::Error there is a clean rejection;
// - the plan the runtime gets is Kiln's code: the plan itself when its prelude and every
//   kernel's source, entry, variants and language are the regenerated plan's, else the plan with
//   those put back from the regenerated one (as fuzz_cache_entry sets checksums: most mutations
//   of a cpu seed land in its IR text, most of its bytes, and would never reach the runtime),
//   when the regenerated plan has as many kernels, generated where the plan's are;
// - when its module is at most 64 KiB and bind gave a small binding as above, the cpu runtime
//   loads it (cpu::PlanExecutable: the module JIT-compiled at O3 the first time that code is
//   seen, its object code only linked again after that, as a cache hit does) and runs it on one
//   thread on copies of the inputs, with KILN_CPU_GUARD_PAGES set: every input, output and slot
//   ends just before an inaccessible page, so a generated kernel (not instrumented: no sanitizer
//   sees what it touches) that reaches past what bind gave it faults. Any kiln::Error of load or
//   run is a clean rejection; an input or constant the kernels wrote is a finding;
// - the plan's other fields may be anything that validates (slots, buffer kinds, indices and
//   slot numbers, constant data, symbols, facts, bindings, grains, gemms, reference kernels,
//   outputs, checks), except those the generated code takes on trust because validate and bind
//   cannot tie them to a source: every buffer's dtype, sizes and strides and each kernel's
//   parallel extent, reads, writes, arg_buffers and arg_values must also be the regenerated
//   plan's. An edit of one of those runs Kiln's code out of its buffers (issue 31, still open);
//   KILN_FUZZ_JIT_LAYOUT=1 in the environment lifts this condition to show it (not for CI: the
//   seed corpus/plan_json/edit_cpu_extent_larger.plan.json, a matmul kernel's extent 4 made 5,
//   then faults in kiln_sgemm on the first input);
// - a cpu plan whose code is not Kiln's and whose module text names a function the JIT must not
//   link (system, getenv, puts, popen, exec*, dlopen, mmap, open, write, ...) is loaded as with
//   --trust-plan (compiled at O0 and linked, never run; a module text the JIT refused once is not
//   compiled again, and of new texts only the first 16 and then one in 8, by hash, are): a
//   kiln::Error is expected, and a load whose object code has an undefined reference to such a
//   name is a finding. At start-up the
//   JIT must refuse fixed modules calling system, getenv and puts and with inline and module-level
//   assembly (at O0 and O3). At exit the fuzzer prints how many inputs reached each step.
// The generated kernels of other targets (CUDA, GLSL) are not run: their outputs stay zero.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/eval/interpreter.h"
#include "kiln/graph/error.h"
#include "fuzz_util.h"
#include "kiln/plan/bind.h"
#include "kiln/plan/plan_json.h"

#if KILN_FUZZ_JIT
#include <elf.h>

#include <map>
#include <set>

#include "kiln/cpu/executable.h"
#include "kiln/cpu/jit.h"
#include "kiln/format/graph_json.h"
#include "kiln/target/target.h"

void kiln_register_cpu_codegen();  // targets/cpu/target/codegen.cpp
#endif

namespace {

constexpr int64_t kMaxSymbol = 64;                // symbols are bound to values at most this
constexpr int64_t kMaxInputBytes = int64_t{1} << 20;  // all inputs together
constexpr int64_t kMaxBufferElements = 1 << 16;   // per buffer, for the reference run
constexpr int64_t kMaxRunBytes = int64_t{4} << 20;  // outputs and slots together, for the reference run
constexpr size_t kMaxJitKernels = 16;              // kernels of a plan the JIT runs
constexpr size_t kMaxJitSource = size_t{64} << 10;  // bytes of its module (prelude and sources)
constexpr size_t kMaxOriginGraph = size_t{32} << 10;  // bytes of the origin's graph it regenerates

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "%s\n", what.c_str());
  std::abort();
}

// What the fuzzer did with an input, printed under KILN_FUZZ_VERBOSE (as kiln::fuzz::rejected).
bool verbose() {
  static const bool on = std::getenv("KILN_FUZZ_VERBOSE") != nullptr;
  return on;
}
void note(const std::string& what) {
  if (verbose()) std::fprintf(stderr, "note: %s\n", what.c_str());
}

// Memory of exactly `n` bytes, zero-filled (new char[0] for none: any access is reported).
std::shared_ptr<char[]> exact(int64_t n) {
  std::shared_ptr<char[]> p(new char[static_cast<size_t>(n)]);
  std::memset(p.get(), 0, static_cast<size_t>(n));
  return p;
}

// A contiguous host tensor in memory of exactly its bytes.
kiln::TensorData exact_tensor(kiln::DType dtype, std::vector<int64_t> sizes) {
  kiln::TensorData t;
  t.dtype = dtype;
  t.sizes = std::move(sizes);
  t.strides = kiln::contiguous_strides(std::span<const int64_t>(t.sizes));
  const int64_t n = t.numel() * kiln::dtype_size(dtype);
  char* mem = new char[static_cast<size_t>(n)];
  std::memset(mem, 0, static_cast<size_t>(n));
  t.storage = std::make_shared<kiln::Storage>(kiln::Device::cpu(), mem, static_cast<size_t>(n),
                                              [](void* q) { delete[] static_cast<char*>(q); });
  return t;
}

// Whether a bound plan is small enough to run: every buffer at most kMaxBufferElements, outputs
// and slots together at most kMaxRunBytes.
bool small_run(const kiln::plan::KernelPlan& p, const kiln::plan::Binding& bound) {
  const kiln::plan::BoundSizes& z = *bound.at;
  int64_t total = 0;
  for (int64_t b : bound.slot_bytes()) total += b;
  for (const kiln::plan::PlanBuffer& b : p.buffers) {
    const size_t id = static_cast<size_t>(b.id);
    int64_t n = 1;
    for (size_t d = z.first[id]; d < z.first[id + 1]; ++d)
      if (__builtin_mul_overflow(n, std::max<int64_t>(z.sizes[d], 1), &n) || n > kMaxBufferElements) return false;
    if (b.kind == "output") total += bound.buffer_bytes()[id];
    if (total > kMaxRunBytes) return false;
  }
  return true;
}

// The reference kernels of a bound plan (small_run), as targets/cpu/runtime runs them.
void run_reference_kernels(const kiln::plan::KernelPlan& p, const kiln::plan::Binding& bound,
                           const std::vector<kiln::TensorData>& inputs) {
  const kiln::plan::BoundSizes& z = *bound.at;
  std::vector<std::shared_ptr<char[]>> slots;
  for (int64_t bytes : bound.slot_bytes()) slots.push_back(exact(bytes));
  std::vector<std::shared_ptr<char[]>> memory(p.buffers.size());  // what holds each buffer
  std::vector<char*> ptrs(p.buffers.size(), nullptr);
  const std::vector<int32_t> in_buffers = kiln::plan::input_buffers(p);
  for (size_t k = 0; k < inputs.size(); ++k) ptrs[static_cast<size_t>(in_buffers[k])] = static_cast<char*>(inputs[k].data());
  for (const kiln::plan::PlanBuffer& b : p.buffers) {
    const size_t id = static_cast<size_t>(b.id);
    if (b.kind == "constant") {
      ptrs[id] = const_cast<char*>(reinterpret_cast<const char*>(b.data->bytes.data()));
    } else if (b.kind == "output") {
      memory[id] = exact(bound.buffer_bytes()[id]);
      ptrs[id] = memory[id].get();
    } else if (b.kind == "intermediate") {
      memory[id] = slots[static_cast<size_t>(b.slot)];
      ptrs[id] = memory[id].get();
    }
  }
  // A buffer as a tensor: its bound sizes and strides over its memory (not owned).
  auto view = [&](int32_t bid, bool contiguous) {
    const size_t id = static_cast<size_t>(bid);
    kiln::TensorData t;
    t.dtype = p.buffers[id].dtype;
    t.sizes.assign(z.sizes.begin() + static_cast<std::ptrdiff_t>(z.first[id]),
                   z.sizes.begin() + static_cast<std::ptrdiff_t>(z.first[id + 1]));
    if (contiguous) {
      t.strides = kiln::contiguous_strides(std::span<const int64_t>(t.sizes));
    } else {
      t.strides.assign(z.strides.begin() + static_cast<std::ptrdiff_t>(z.first[id]),
                       z.strides.begin() + static_cast<std::ptrdiff_t>(z.first[id + 1]));
    }
    t.storage = std::make_shared<kiln::Storage>(kiln::Device::cpu(), ptrs[id], static_cast<size_t>(bound.buffer_bytes()[id]),
                                                nullptr);
    return t;
  };
  for (const kiln::plan::PlanKernel& k : p.kernels) {
    if (k.kind != "reference") continue;
    std::vector<kiln::TensorData> args;
    for (int32_t b : k.inputs) args.push_back(view(b, false));
    const kiln::TensorData out = view(k.output, false);
    kiln::TensorData r;
    try {
      r = kiln::eval::run_op(k.op, args, k.attrs, out.dtype, out.sizes);
    } catch (const kiln::Error& e) {
      kiln::fuzz::rejected(e);
      return;  // e.g. an index out of range: the run stops there, as the runtime's would
    }
    const int64_t bytes = r.numel() * kiln::dtype_size(r.dtype);
    if (r.dtype != out.dtype || r.sizes != out.sizes || !r.is_contiguous())
      finding("a reference kernel's result is not the contiguous " + std::string(kiln::dtype_name(out.dtype)) +
              kiln::shape_str(kiln::static_shape(out.sizes)) + " of its output buffer");
    // What the runtime copies: bind must have given the output at least these bytes.
    if (bytes > bound.buffer_bytes()[static_cast<size_t>(k.output)])
      finding("a reference kernel's result of " + std::to_string(bytes) + " bytes does not fit its output buffer " +
              std::to_string(k.output) + ", bound at " + std::to_string(bound.buffer_bytes()[static_cast<size_t>(k.output)]));
    if (bytes > 0) std::memcpy(ptrs[static_cast<size_t>(k.output)], r.data(), static_cast<size_t>(bytes));
  }
  std::vector<kiln::TensorData> outs;
  for (int32_t id : p.outputs) {
    const kiln::plan::PlanBuffer& b = p.buffers[static_cast<size_t>(id)];
    if (b.kind == "input") outs.push_back(inputs[static_cast<size_t>(b.index)]);
    else outs.push_back(view(id, b.kind == "output"));
  }
  try {
    kiln::plan::finish_outputs(p, outs, [](const kiln::TensorData& t) { return t; }, "fuzz");
  } catch (const kiln::Error& e) {
    kiln::fuzz::rejected(e);  // a check's count is not 0
  }
}


#if KILN_FUZZ_JIT
// ---- the cpu runtime: generated kernels JIT-compiled and run ---------------------------------

// What the JIT path did, printed at exit (how much of a run reached the generated kernels).
struct JitStats {
  int64_t regenerated = 0, kilns_code = 0, put_back = 0, other_layouts = 0, compiled = 0, linked = 0, ran = 0, refused = 0,
          foreign = 0, foreign_refused = 0;
};
JitStats stats;
void print_stats() {
  std::fprintf(stderr,
               "fuzz_plan_json: cpu JIT: %lld origins regenerated; %lld inputs with Kiln's code, %lld with it put "
               "back (%lld of these with other layouts, not run); %lld loads compiled, %lld linked from cached "
               "objects; %lld runs finished, %lld rejected with kiln::Error; %lld foreign plans loaded with trust, "
               "%lld refused\n",
               static_cast<long long>(stats.regenerated), static_cast<long long>(stats.kilns_code),
               static_cast<long long>(stats.put_back), static_cast<long long>(stats.other_layouts), static_cast<long long>(stats.compiled),
               static_cast<long long>(stats.linked), static_cast<long long>(stats.ran),
               static_cast<long long>(stats.refused), static_cast<long long>(stats.foreign),
               static_cast<long long>(stats.foreign_refused));
}

// What Kiln makes from an origin (target::regenerate, as `kiln run` checks a plan file), or
// nothing when the origin makes no plan (a kiln::Error: its graph does not load, an option's
// value is not one). Kept per origin: most inputs are mutations of a seed that keep its origin.
std::shared_ptr<const std::optional<kiln::plan::KernelPlan>> made_from(const kiln::plan::PlanOrigin& o) {
  static std::map<std::string, std::shared_ptr<const std::optional<kiln::plan::KernelPlan>>> made;
  std::string key = o.graph;
  for (const auto& [k, v] : o.request) key += "\x01" + k + "=" + v;
  for (const auto& [k, v] : o.options) key += "\x02" + k + "=" + v;
  if (auto it = made.find(key); it != made.end()) return it->second;
  std::optional<kiln::plan::KernelPlan> plan;
  ++stats.regenerated;
  try {
    const kiln::Graph g = kiln::format::from_json(o.graph, "fuzz.plan.json: origin.graph");
    plan = kiln::target::regenerate(kiln::target::codegen("cpu"), g, o);
  } catch (const kiln::Error& e) {
    kiln::fuzz::rejected(e);  // `kiln run` refuses such a plan with this message
  }
  if (made.size() >= 256) made.clear();
  auto r = std::make_shared<const std::optional<kiln::plan::KernelPlan>>(std::move(plan));
  made.emplace(std::move(key), r);
  return r;
}

// Whether the code of `p` is the code of `made`: the prelude, and each kernel's source, entry,
// variants and language (which functions of which text each kernel calls).
bool same_code(const kiln::plan::KernelPlan& p, const kiln::plan::KernelPlan& made) {
  if (p.prelude != made.prelude || p.kernels.size() != made.kernels.size()) return false;
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const kiln::plan::PlanKernel &a = p.kernels[k], &b = made.kernels[k];
    if (a.source != b.source || a.entry != b.entry || a.variants != b.variants || a.language != b.language) return false;
  }
  return true;
}

// Whether the fields that generated cpu code takes on trust are those of `made`: every buffer's
// dtype, sizes and strides, and each kernel's parallel extent and the buffers it is handed (reads,
// writes, arg_buffers, arg_values). A generated kernel computes its addresses from the layouts it
// was generated for and loops over whatever [0, extent) it is launched with; plan::validate and
// plan::bind do not tie those fields to the source (they cannot: nothing in the plan says what a
// kernel's source reaches), so a plan that edits them runs the code out of its buffers (issue 31;
// KILN_FUZZ_JIT_LAYOUT=1 runs such plans too, to show it). Every other field (slots, buffer kinds,
// indices and slot numbers, constants' data, symbols, facts, bindings, grains, gemms, reference
// kernels, outputs, checks, names) may differ: validate and bind must catch what would misuse it.
bool same_layouts(const kiln::plan::KernelPlan& p, const kiln::plan::KernelPlan& made) {
  static const bool any = [] {
    const char* e = std::getenv("KILN_FUZZ_JIT_LAYOUT");
    return e && *e && *e != '0';
  }();
  if (any) return true;
  if (p.buffers.size() != made.buffers.size()) return false;
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const kiln::plan::PlanBuffer &x = p.buffers[b], &y = made.buffers[b];
    if (x.dtype != y.dtype || !(x.sizes == y.sizes) || !(x.strides == y.strides)) return false;
  }
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const kiln::plan::PlanKernel &a = p.kernels[k], &b = made.kernels[k];
    if (!(a.parallel_extent == b.parallel_extent) || a.reads != b.reads || a.writes != b.writes ||
        a.arg_buffers != b.arg_buffers || !(a.arg_values == b.arg_values))
      return false;
  }
  return true;
}

// `p` with the code of `made` put back (its prelude, and each kernel's source, entry, variants
// and language), as fuzz_cache_entry sets checksums: most mutations of a seed land in its
// kernel sources or prelude (most of a cpu plan's bytes), and would otherwise never reach the
// runtime. Only where `made` has as many kernels, generated where p's are; else nullopt.
std::optional<kiln::plan::KernelPlan> with_code_of(const kiln::plan::KernelPlan& p, const kiln::plan::KernelPlan& made) {
  if (p.kernels.size() != made.kernels.size()) return std::nullopt;
  kiln::plan::KernelPlan q = p;
  q.prelude = made.prelude;
  for (size_t k = 0; k < q.kernels.size(); ++k) {
    kiln::plan::PlanKernel &a = q.kernels[k];
    const kiln::plan::PlanKernel& b = made.kernels[k];
    if ((a.kind == "reference") != (b.kind == "reference")) return std::nullopt;
    a.source = b.source;
    a.entry = b.entry;
    a.variants = b.variants;
    a.language = b.language;
  }
  return q;
}

kiln::cpu::ExecutableOptions jit_options(int opt_level) {
  kiln::cpu::ExecutableOptions o;
  o.threads = 1;
  o.opt_level = opt_level;
  return o;
}

// `p` (whose code is Kiln's: same_code) on the cpu runtime: loaded (its module JIT-compiled the
// first time its code is seen, its object code linked again after that, as a cache hit does)
// and run on copies of the inputs in guarded memory (KILN_CPU_GUARD_PAGES: every input, output
// and slot ends just before an inaccessible page, so a generated kernel, which no sanitizer
// sees, faults when it reaches past what bind gave it). kiln::Error: a clean rejection.
void run_jit(const kiln::plan::KernelPlan& p, const std::vector<kiln::TensorData>& inputs) {
  static std::map<std::string, std::vector<std::string>> objects;  // by the plan's code
  std::string key = p.prelude;
  for (const kiln::plan::PlanKernel& k : p.kernels) key += "\x01" + k.source;
  const std::vector<kiln::TensorData> guarded = kiln::fuzz::guarded_copies(inputs);
  try {
    std::shared_ptr<kiln::cpu::PlanExecutable> exe;
    if (auto it = objects.find(key); it != objects.end()) {
      ++stats.linked;
      exe = kiln::cpu::PlanExecutable::load_compiled(p, it->second, jit_options(3));
    } else {
      ++stats.compiled;
      exe = kiln::cpu::PlanExecutable::load(p, jit_options(3));
      if (objects.size() >= 64) objects.clear();
      objects.emplace(std::move(key), exe->objects());
    }
    std::vector<std::vector<std::byte>> constants;  // what the kernels must not write
    for (const kiln::plan::PlanBuffer& b : p.buffers)
      if (b.kind == "constant") constants.push_back(b.data->bytes);
    note("cpu runtime: loaded, running " + std::to_string(p.kernels.size()) + " kernels");
    const std::vector<kiln::TensorData> outs = exe->run(std::span<const kiln::TensorData>(guarded));
    note("cpu runtime: ran");
    ++stats.ran;
    if (outs.size() + p.checks.size() != p.outputs.size())
      finding("the cpu runtime gave " + std::to_string(outs.size()) + " outputs for a plan of " +
              std::to_string(p.outputs.size()) + " outputs and " + std::to_string(p.checks.size()) + " checks");
    // The caller's inputs and the plan's constants are read, never written.
    for (size_t k = 0; k < inputs.size(); ++k)
      if (std::memcmp(guarded[k].data(), inputs[k].data(), static_cast<size_t>(inputs[k].numel() * kiln::dtype_size(inputs[k].dtype))) != 0)
        finding("a plan's kernels wrote into input " + std::to_string(k));
    size_t c = 0;
    for (const kiln::plan::PlanBuffer& b : p.buffers)
      if (b.kind == "constant" && b.data->bytes != constants[c++])
        finding("a plan's kernels wrote into constant buffer " + std::to_string(b.id));
  } catch (const kiln::Error& e) {
    ++stats.refused;
    kiln::fuzz::rejected(e);
  }
}

// What the JIT links nothing to (docs/plan-trust.md): a plan whose kernels call one of these
// must not load, even with trust.
constexpr const char* kForbidden[] = {"system", "getenv", "puts", "popen", "execve", "execv", "execl", "fork",
                                      "dlopen", "dlsym", "mprotect", "mmap", "syscall", "fopen", "open", "write"};

// The symbols an ELF object leaves undefined (what the linker had to resolve).
std::vector<std::string> undefined_symbols(const std::string& o) {
  std::vector<std::string> out;
  auto at = [&](size_t off, size_t n) { return off <= o.size() && n <= o.size() - off; };
  if (!at(0, sizeof(Elf64_Ehdr))) return out;
  Elf64_Ehdr eh;
  std::memcpy(&eh, o.data(), sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) return out;
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh;
    if (!at(eh.e_shoff + i * sizeof sh, sizeof sh)) return out;
    std::memcpy(&sh, o.data() + eh.e_shoff + i * sizeof sh, sizeof sh);
    if (sh.sh_type != SHT_SYMTAB || sh.sh_link >= eh.e_shnum || !at(sh.sh_offset, sh.sh_size)) continue;
    Elf64_Shdr strtab;
    if (!at(eh.e_shoff + sh.sh_link * sizeof strtab, sizeof strtab)) return out;
    std::memcpy(&strtab, o.data() + eh.e_shoff + sh.sh_link * sizeof strtab, sizeof strtab);
    if (!at(strtab.sh_offset, strtab.sh_size)) return out;
    for (size_t s = 0; s + sizeof(Elf64_Sym) <= sh.sh_size; s += sizeof(Elf64_Sym)) {
      Elf64_Sym sym;
      std::memcpy(&sym, o.data() + sh.sh_offset + s, sizeof sym);
      if (sym.st_shndx != SHN_UNDEF || sym.st_name == 0 || sym.st_name >= strtab.sh_size) continue;
      const char* name = o.data() + strtab.sh_offset + sym.st_name;
      out.emplace_back(name, strnlen(name, strtab.sh_size - sym.st_name));
    }
  }
  return out;
}

// A cpu plan whose code is not Kiln's (`kiln run` refuses it without --trust-plan) and whose
// module text names something the JIT must not link: loaded as --trust-plan loads it (compiled
// at O0 and linked, never run). A kiln::Error is the expected refusal; a load that links an
// undefined reference to a forbidden name is a finding. (A load that succeeds without one is
// fine: the call was not in the code, e.g. a mutation made it a function of the module.)
void check_foreign_code_refused(const kiln::plan::KernelPlan& p) {
  const std::string text = p.module_source();
  if (text.size() > kMaxJitSource) return;
  bool named = false;
  for (const char* f : kForbidden) named = named || text.find("@" + std::string(f) + "(") != std::string::npos;
  if (!named) return;
  // Module texts the JIT refused already: the same text is refused again (most mutations of a
  // plan leave its kernels' text alone), so it is compiled once (an O0 compile: ~10 ms).
  static std::set<std::string> refused;
  if (refused.count(text)) return;
  // Of new texts (a mutation inside a kernel's IR), the first 16 and then one in 8 by hash:
  // compiling mutated IR is LLVM's parser and code generator at work, not the point here.
  static int64_t seen = 0;
  if (++seen > 16 && std::hash<std::string>{}(text) % 8 != 0) return;
  std::shared_ptr<kiln::cpu::PlanExecutable> exe;
  ++stats.foreign;
  try {
    exe = kiln::cpu::PlanExecutable::load(p, jit_options(0));
  } catch (const kiln::Error& e) {
    ++stats.foreign_refused;
    kiln::fuzz::rejected(e);
    if (std::string_view(e.what()).find("cpu JIT:") != std::string_view::npos) {  // not plan::validate's
      if (refused.size() >= 256) refused.clear();
      refused.insert(text);
    }
    return;
  }
  for (const std::string& o : exe->objects())
    for (const std::string& u : undefined_symbols(o))
      for (const char* f : kForbidden)
        if (u == f) finding("a cpu plan whose kernels call " + u + "() loaded: the JIT linked it");
}

// The JIT's allow-list on fixed modules, once: a call to system, getenv or puts, inline and
// module-level assembly must each be a kiln::Error (the modules are compiled, never run); and
// undefined_symbols must see the libm call of a module that links.
void check_jit_refuses_foreign_calls() {
  const std::string head = "@cmd = private constant [5 x i8] c\"true\\00\"\n";
  const std::pair<const char*, std::string> modules[] = {
      {"system", head + "declare i32 @system(ptr)\ndefine void @k(ptr %b) {\n  %r = call i32 @system(ptr @cmd)\n  ret void\n}\n"},
      {"getenv", head + "declare ptr @getenv(ptr)\ndefine void @k(ptr %b) {\n  %r = call ptr @getenv(ptr @cmd)\n"
                        "  store ptr %r, ptr %b\n  ret void\n}\n"},
      {"puts", head + "declare i32 @puts(ptr)\ndefine void @k(ptr %b) {\n  %r = call i32 @puts(ptr @cmd)\n  ret void\n}\n"},
      {"inline asm", "define void @k(ptr %b) {\n  call void asm sideeffect \"nop\", \"\"()\n  ret void\n}\n"},
      {"module asm", "module asm \".globl kiln_fuzz_asm\"\nmodule asm \"kiln_fuzz_asm: ret\"\n"
                     "define void @k(ptr %b) {\n  ret void\n}\n"},
  };
  // What check_foreign_code_refused reads of a module that links: a call to libm's sinf (which
  // the JIT links) is an undefined symbol of its object.
  const std::unique_ptr<kiln::cpu::JitModule> libm = kiln::cpu::JitModule::compile(
      "declare float @sinf(float)\ndefine void @k(ptr %b) {\n  %x = load float, ptr %b\n"
      "  %y = call float @sinf(float %x)\n  store float %y, ptr %b\n  ret void\n}\n",
      "fuzz_libm", 0);
  const std::vector<std::string> undefined = undefined_symbols(libm->object());
  if (std::find(undefined.begin(), undefined.end(), "sinf") == undefined.end())
    finding("the object of a module calling sinf has no undefined symbol 'sinf': undefined_symbols is broken");
  for (const auto& [what, ir] : modules) {
    for (int level : {0, 3}) {
      bool refused = false;
      try {
        (void)kiln::cpu::JitModule::compile(ir, "fuzz_foreign", level);
      } catch (const kiln::Error& e) {
        kiln::fuzz::rejected(e);
        refused = true;
      }
      if (!refused) finding(std::string("the cpu JIT compiled and linked a module with ") + what + " at O" + std::to_string(level));
    }
  }
}
#endif

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
#if KILN_FUZZ_JIT
  ::setenv("KILN_CPU_GUARD_PAGES", "1", 1);  // before the runtime's first allocation reads it
  kiln_register_cpu_codegen();
  check_jit_refuses_foreign_calls();
  std::atexit(print_stats);
#endif
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::plan::KernelPlan p;
  try {
    p = kiln::plan::plan_from_json(text, "fuzz.plan.json");
  } catch (const kiln::Error& e) {
    kiln::fuzz::rejected(e);
    return 0;  // rejected with a message: fine (only kiln::Error: an InternalError must escape)
  }
  // The round trip: what plan_to_json prints loads again and prints the same bytes.
  std::string once;
  try {
    once = kiln::plan::plan_to_json(p);
    const kiln::plan::KernelPlan back = kiln::plan::plan_from_json(once, "round-trip.plan.json");
    if (kiln::plan::plan_to_json(back) != once) finding("re-serialisation is not byte-identical:\n" + once);
  } catch (const kiln::Error& e) {
    finding(std::string("a plan that loaded does not round-trip: ") + e.what() + "\n" + once);
  }

#if KILN_FUZZ_JIT
  // Kiln's code, or (on a few inputs) foreign code that must not load.
  std::shared_ptr<const std::optional<kiln::plan::KernelPlan>> made;
  bool kilns_code = false;
  if (p.target == "cpu" && p.kernels.size() <= kMaxJitKernels && !p.origin.empty() &&
      p.origin.graph.size() <= kMaxOriginGraph) {
    made = made_from(p.origin);
    kilns_code = made->has_value() && same_code(p, **made);
    if (verbose())  // (plan_difference prints both plans: not on every input)
      note(!made->has_value() ? "origin: makes no plan"
           : kilns_code       ? (same_layouts(p, **made) ? "origin: Kiln's code and layouts" : "origin: Kiln's code, other layouts")
                              : "origin: not Kiln's code (" + kiln::plan::plan_difference(p, **made) + ")");
  }
  if (p.target == "cpu" && !kilns_code && p.kernels.size() <= kMaxJitKernels) check_foreign_code_refused(p);
  // What the runtime gets: p itself, or p with Kiln's code put back.
  std::optional<kiln::plan::KernelPlan> put_back;
  if (made && made->has_value() && !kilns_code) put_back = with_code_of(p, **made);
  const kiln::plan::KernelPlan& to_run = put_back ? *put_back : p;
  const bool run_generated = (kilns_code || put_back) && same_layouts(to_run, **made);
  stats.kilns_code += kilns_code;
  stats.put_back += put_back.has_value();
  stats.other_layouts += (kilns_code || put_back) && !run_generated;
#endif

  // Inputs at small symbol values, contiguous, with deterministic bytes.
  std::vector<int64_t> values;
  for (const kiln::SymbolInfo& s : p.symbols) {
    int64_t v = s.example;
    if (v < s.min || v > s.max || v > kMaxSymbol) v = s.min;
    if (v < 0 || v > kMaxSymbol || v > s.max) return 0;
    values.push_back(v);
  }
  const std::vector<int32_t> in_buffers = kiln::plan::input_buffers(p);
  std::vector<kiln::TensorData> inputs;
  int64_t in_bytes = 0;
  for (int32_t id : in_buffers) {
    const kiln::plan::PlanBuffer& b = p.buffers[static_cast<size_t>(id)];
    std::vector<int64_t> sizes;
    int64_t n = kiln::dtype_size(b.dtype);
    for (const kiln::SymInt& s : b.sizes) {
      const std::optional<int64_t> v = kiln::fuzz::checked_evaluate(s, values);
      if (!v || *v < 0) return 0;
      sizes.push_back(*v);
      if (__builtin_mul_overflow(n, std::max<int64_t>(*v, 1), &n) || n > kMaxInputBytes) return 0;
    }
    in_bytes += n;
    if (in_bytes > kMaxInputBytes) return 0;
    inputs.push_back(exact_tensor(b.dtype, std::move(sizes)));
    kiln::TensorData& t = inputs.back();
    auto* bytes = static_cast<unsigned char*>(t.data());
    const int64_t nbytes = t.numel() * kiln::dtype_size(t.dtype);
    for (int64_t i = 0; i < nbytes; ++i)  // small values: bool 0/1, low bytes of integers 0..3
      bytes[i] = t.dtype == kiln::DType::bool_ ? static_cast<unsigned char>(i % 2)
                 : kiln::dtype_category(t.dtype) == kiln::DTypeCategory::integral
                     ? static_cast<unsigned char>(i % kiln::dtype_size(t.dtype) == 0 ? (i / kiln::dtype_size(t.dtype)) % 4 : 0)
                     : static_cast<unsigned char>((i * 37 + 11) % 61);
  }
  kiln::plan::Binding bound;
  try {
    bound = kiln::plan::bind(p, inputs, "fuzz");
  } catch (const kiln::Error& e) {
    kiln::fuzz::rejected(e);
    return 0;
  }
  if (!small_run(p, bound)) return 0;
  run_reference_kernels(p, bound, inputs);
#if KILN_FUZZ_JIT
  if (run_generated && to_run.module_source().size() <= kMaxJitSource) run_jit(to_run, inputs);
#endif
  return 0;
}
