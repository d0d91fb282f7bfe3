// KernelPlan's readable form and module assembly.
#include "kiln/plan/plan.h"

#include <limits>
#include <sstream>

#include "kiln/graph/error.h"

namespace kiln::plan {

namespace {

std::string guard_line(const SymbolInfo& s) {
  std::string max = s.max == std::numeric_limits<int64_t>::max() ? "inf" : std::to_string(s.max);
  return "s" + std::to_string(s.id) + " in [" + std::to_string(s.min) + ", " + max + "]" +
         (s.source.empty() ? "" : " (" + s.source + ")");
}

}  // namespace

KernelPlan plan_skeleton(const schedule::Schedule& s, std::string_view target) {
  KernelPlan p;
  p.target = std::string(target);
  const ShapeEnv& env = s.graph.shapes();
  p.symbols = env.symbols();
  p.facts = env.facts();
  for (const SymbolInfo& sym : env.symbols()) p.guards.push_back(guard_line(sym));
  for (const ShapeFact& f : env.facts())
    p.guards.push_back(f.lhs.str() + (f.equal ? " == " : " != ") + f.rhs.str() +
                       (f.reason.empty() ? "" : " (" + f.reason + ")"));
  for (const SymbolInfo& sym : env.symbols()) {
    bool bound = false;
    for (const schedule::Buffer& b : s.buffers) {
      if (b.kind != schedule::BufferKind::input || bound) continue;
      for (size_t d = 0; d < b.sizes.size() && !bound; ++d)
        if (b.sizes[d].is_symbolic() && b.sizes[d].expr() == SymExpr::symbol(sym.id)) {
          p.bindings.push_back({sym.id, b.index, static_cast<int32_t>(d)});
          bound = true;
        }
    }
    KILN_CHECK(bound, target, " codegen: size symbol s", sym.id, " (", sym.source,
               ") is not the size of any input dim, so the plan cannot learn its value");
  }
  for (const schedule::Buffer& b : s.buffers) {
    PlanBuffer pb;
    pb.id = b.id;
    pb.kind = std::string(schedule::buffer_kind_name(b.kind));
    pb.dtype = b.dtype;
    pb.sizes = b.sizes;
    pb.strides = b.strides;
    pb.index = b.index;
    pb.slot = b.slot;
    pb.data = b.data;
    p.buffers.push_back(std::move(pb));
  }
  for (const schedule::Slot& sl : s.slots) p.slots.push_back(sl.bytes);
  p.outputs = s.outputs;
  p.peak_intermediate_bytes = s.peak_intermediate_bytes;
  return p;
}

std::string KernelPlan::module_source() const {
  std::string m = prelude;
  for (const PlanKernel& k : kernels)
    if (!k.source.empty()) {
      m += "\n";
      m += k.source;
    }
  return m;
}

std::string KernelPlan::str() const {
  std::ostringstream os;
  os << "kernel plan v" << version << " for " << target << ": " << kernels.size() << " kernel"
     << (kernels.size() == 1 ? "" : "s") << ", " << buffers.size() << " buffers, peak intermediate memory "
     << peak_intermediate_bytes << " bytes\n";
  if (!symbols.empty()) {
    os << "symbols:\n";
    for (const SymbolBinding& b : bindings)
      os << "  s" << b.symbol << " = size of input " << b.input << " dim " << b.dim << "\n";
  }
  if (!guards.empty()) {
    os << "guards:\n";
    for (const std::string& g : guards) os << "  " << g << "\n";
  }
  os << "buffers:\n";
  for (const PlanBuffer& b : buffers) {
    os << "  b" << b.id << " " << b.kind << " " << dtype_name(b.dtype) << shape_str(b.sizes);
    if (b.kind == "input" || b.kind == "output") os << " #" << b.index;
    if (b.slot >= 0) os << " slot " << b.slot;
    os << "\n";
  }
  for (size_t s = 0; s < slots.size(); ++s) os << "  slot " << s << ": " << slots[s].str() << " bytes\n";
  os << "kernels:\n";
  for (const PlanKernel& k : kernels) {
    os << "  " << k.name << " (" << k.kind << ")";
    if (k.kind == "reference") {
      os << " " << op_name(k.op) << "(";
      for (size_t i = 0; i < k.inputs.size(); ++i) os << (i ? ", b" : "b") << k.inputs[i];
      os << ") -> b" << k.output;
    } else {
      os << " entry @" << k.entry << ", parallel over " << k.parallel_extent.str() << " in chunks of >= " << k.grain;
    }
    os << "\n    nodes:";
    for (NodeId n : k.provenance) os << " %" << n;
    os << "\n    reads:";
    for (int32_t b : k.reads) os << " b" << b;
    os << "; writes:";
    for (int32_t b : k.writes) os << " b" << b;
    os << "\n";
  }
  os << "outputs:";
  for (int32_t o : outputs) os << " b" << o;
  os << "\n";
  return os.str();
}

}  // namespace kiln::plan
