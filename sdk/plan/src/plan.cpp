// KernelPlan's readable form and module assembly.
#include "kiln/plan/plan.h"

#include "kiln/graph/ops.h"

#include <algorithm>
#include <sstream>
#include <string_view>
#include <unordered_set>

namespace kiln::plan {

std::vector<int32_t> kernel_bindings(const PlanKernel& k) {
  std::vector<int32_t> b = k.reads;
  b.insert(b.end(), k.writes.begin(), k.writes.end());
  std::sort(b.begin(), b.end());
  b.erase(std::unique(b.begin(), b.end()), b.end());
  return b;
}

std::string KernelPlan::module_source(bool fixed_too) const {
  std::string m = prelude;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const std::string& src = kernels[i].source;
    if (src.empty() || kernels[i].own_module() || (!fixed_too && kernels[i].fixed_signature())) continue;
    bool seen = false;
    for (size_t j = 0; j < i && !seen; ++j) seen = kernels[j].source == src;
    if (seen) continue;
    m += "\n";
    m += src;
  }
  return m;
}

SymShape PlanConvolution::y_sizes() const {
  const size_t n = x_sizes.size() - 2, first = channels_last ? 1 : 2;  // the first spatial dim
  SymShape y{x_sizes.at(0), w_sizes.at(0)};
  for (size_t d = 0; d < n; ++d) {
    const int64_t span = (w_sizes.at(first + d) - 1) * dilations.at(d) + 1;
    y.push_back((x_sizes.at(first + d).hint() + pads.at(d) + pads.at(d + n) - span) / strides.at(d) + 1);
  }
  return channels_last ? kiln::channels_last(y) : y;
}

std::string KernelPlan::own_modules() const {
  std::string m;
  std::unordered_set<std::string_view> seen;
  for (const PlanKernel& k : kernels)
    if (k.own_module() && seen.insert(k.source).second) m += k.source;
  return m;
}

std::string KernelPlan::kernel_program(size_t ki) const { return prelude + "\n" + kernels.at(ki).source; }

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
    } else if (k.convolution) {
      const PlanConvolution& c = *k.convolution;
      auto list = [](const std::vector<int64_t>& v) {
        std::string t;
        for (size_t i = 0; i < v.size(); ++i) t += (i ? "," : "") + std::to_string(v[i]);
        return t;
      };
      if (c.computes == ConvolutionComputes::x) os << " b" << c.x << " = conv_input_grad(b" << c.y << ", b" << c.w << ") ";
      else if (c.computes == ConvolutionComputes::w) os << " b" << c.w << " = conv_weight_grad(b" << c.x << ", b" << c.y << ") ";
      else os << " b" << c.y << " = conv(b" << c.x << ", b" << c.w << ") ";
      os << dtype_name(c.dtype) << " strides " << list(c.strides)
         << " pads " << list(c.pads) << " dilations " << list(c.dilations) << " groups " << c.groups;
    } else {
      os << " entry @" << k.entry << ", parallel over " << k.parallel_extent.str() << " in chunks of >= " << k.grain;
      if (k.fixed_signature()) {
        os << "\n    arguments:";
        for (int32_t b : k.arg_buffers) os << " b" << b;
        for (const SymInt& v : k.arg_values) os << " " << v.str();
      }
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
  for (size_t c = 0; c < checks.size(); ++c)
    os << "check b" << outputs[outputs.size() - checks.size() + c] << " == 0: " << checks[c] << "\n";
  return os.str();
}

}  // namespace kiln::plan
