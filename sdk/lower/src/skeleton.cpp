// plan_skeleton: the part of a plan every target's codegen shares.
#include "kiln/lower/skeleton.h"

#include <cctype>
#include <cstdio>
#include <limits>
#include <map>
#include <string_view>

#include "kiln/graph/custom_ops.h"
#include "kiln/graph/error.h"

namespace kiln::lower {

using plan::KernelPlan;
using plan::PlanBuffer;
using plan::PlanKernel;

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
    p.guards.push_back(f.str() + (f.reason.empty() ? "" : " (" + f.reason + ")"));
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
  p.checks = s.checks;
  p.peak_intermediate_bytes = s.peak_intermediate_bytes;
  return p;
}

PlanKernel kernel_skeleton(const schedule::Kernel& k) {
  PlanKernel pk;
  pk.name = k.name;
  pk.kind = std::string(schedule::kernel_kind_name(k.kind));
  pk.provenance = k.provenance;
  pk.reads = k.reads();
  pk.writes = k.writes();
  if (k.convolution) {
    const schedule::Convolution& c = *k.convolution;
    pk.convolution = plan::PlanConvolution{c.x,       c.w,    c.y,         c.dtype, c.x_sizes,
                                           c.w_sizes, c.strides, c.pads, c.dilations, c.groups, c.channels_last,
                                           c.computes};
  }
  if (k.reference) {
    pk.op = k.reference->op;
    pk.attrs = k.reference->attrs;
    pk.inputs = k.reference->inputs;
    pk.output = k.reference->output;
  }
  return pk;
}

std::optional<PlanKernel> custom_device_kernel(const schedule::Kernel& k, const schedule::Schedule& s,
                                               std::string_view target) {
  if (!k.reference || k.reference->op != OpId::custom) return std::nullopt;
  const Attrs& attrs = k.reference->attrs;
  const std::shared_ptr<const CustomOpDef> op = find_custom_op(attrs.s(0), attrs.s(1));
  const auto it = op->device_kernels.find(target);
  if (it == op->device_kernels.end()) return std::nullopt;
  const CustomOpKernel& dk = it->second;
  // Its signature passes bare pointers: a strided input (a plan's input may be a view) stays
  // with the reference kernel, which reads it through its strides.
  for (int32_t b : k.reference->inputs) {
    const schedule::Buffer& buf = s.buffers.at(static_cast<size_t>(b));
    if (!buf.strides.empty() && buf.strides != contiguous_strides(std::span<const SymInt>(buf.sizes))) return std::nullopt;
  }
  const Node& node = s.graph.node(k.provenance.at(0));
  std::vector<const TensorMeta*> inputs;
  for (NodeId i : node.inputs) inputs.push_back(&s.graph.node(i).meta);
  PlanKernel pk = kernel_skeleton(k);
  pk.kind = "custom";
  pk.op = OpId::input;  // no longer the reference interpreter's op
  pk.attrs = {};
  pk.inputs = {};
  pk.output = -1;
  pk.entry = dk.entry;
  pk.source = dk.source;
  pk.arg_buffers = k.reference->inputs;
  pk.arg_buffers.push_back(k.reference->output);
  try {
    pk.parallel_extent = dk.threads ? dk.threads(inputs, node.meta, attrs.s(2)) : node.meta.numel();
  } catch (const std::exception& e) {
    fail("custom op ", attrs.s(0), ": its ", target, " kernel's thread count threw: ", e.what());
  }
  pk.arg_values.push_back(pk.parallel_extent);
  pk.arg_values.insert(pk.arg_values.end(), node.meta.sizes.begin(), node.meta.sizes.end());
  for (const TensorMeta* m : inputs) pk.arg_values.insert(pk.arg_values.end(), m->sizes.begin(), m->sizes.end());
  pk.launch.block = dk.block;
  pk.launch.items_per_block = dk.block;
  pk.launch.grid_stride = false;
  return pk;
}

plan::PlanGemm plan_gemm(const schedule::Gemm& gemm) {
  schedule::Gemm g = gemm;
  while (g.last_batch_is_rows()) g.fold_last_batch();
  g.merge_batch_dims();
  plan::PlanGemm p;
  p.a = g.a;
  p.b = g.b;
  p.c = g.c;
  p.dtype = g.dtype;
  p.m = g.m;
  p.n = g.n;
  p.k = g.k;
  p.batch = g.batch;
  p.a_batch_strides = g.a_batch_strides;
  p.b_batch_strides = g.b_batch_strides;
  p.a_offset = g.a_offset;
  p.b_offset = g.b_offset;
  p.a_row_stride = g.a_row_stride;
  p.a_col_stride = g.a_col_stride;
  p.b_row_stride = g.b_row_stride;
  p.b_col_stride = g.b_col_stride;
  return p;
}

std::string rename_identifiers(std::string_view src, const Renames& renames) {
  // Identifier by identifier: a longer one that merely contains a name, as k1 in k12, is another.
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size();) {
    if (!ident(src[i])) {
      out += src[i++];
      continue;
    }
    size_t e = i;
    while (e < src.size() && ident(src[e])) ++e;
    const std::string_view word = src.substr(i, e - i);
    if (auto it = renames.find(word); it != renames.end()) {
      out += it->second;
    } else {
      out += word;
    }
    i = e;
  }
  return out;
}

void name_by_content(plan::PlanKernel& pk, const Renames& renames) {
  KILN_INTERNAL_CHECK(!pk.entry.empty() && !pk.source.empty(), "lower: kernel ", pk.name, " has no entry or source to name");
  // The entry becomes a placeholder, renamed ones their new names.
  const std::string placeholder = "\x01";
  Renames all = renames;
  all[pk.entry] = placeholder;
  const std::string out = rename_identifiers(pk.source, all);
  uint64_t h = 1469598103934665603ull;  // FNV-1a: stable across builds and processes
  for (char c : out) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  pk.entry = std::string("kiln_") + hex;
  std::string named;
  named.reserve(out.size() + 32);
  for (size_t at = 0;;) {
    const size_t p = out.find(placeholder, at);
    named.append(out, at, p == std::string::npos ? std::string::npos : p - at);
    if (p == std::string::npos) break;
    named += pk.entry;
    at = p + placeholder.size();
  }
  pk.source = std::move(named);
}

}  // namespace kiln::lower
