// Buffer planning: drop buffers no kernel uses, number the rest (inputs, constants, outputs,
// intermediates), and give intermediates memory slots by a linear scan over kernel order: a
// buffer takes the slot of an input that dies at its own pointwise kernel when every read of
// that input is at the element being written (in place); else a freed slot of the same size;
// else a new slot. Sizes may be symbolic, so "the same size" means the same expression (or
// both static and the slot large enough).
#include <algorithm>
#include <map>

#include "internal.h"
#include "kiln/graph/error.h"

namespace kiln::schedule::detail {

namespace {

void remap(Kernel& k, const std::vector<int32_t>& to) {
  auto m = [&](int32_t& b) {
    if (b >= 0) b = to[static_cast<size_t>(b)];
  };
  for (Instr& in : k.instrs)
    if (in.kind == InstrKind::load) m(in.buffer);
  for (Store& s : k.stores) m(s.buffer);
  if (k.gemm) {
    m(k.gemm->a);
    m(k.gemm->b);
    m(k.gemm->c);
  }
  if (k.attention) {
    for (int32_t* b : {&k.attention->q, &k.attention->k, &k.attention->v, &k.attention->mask, &k.attention->out}) m(*b);
  }
  if (k.convolution) {
    for (int32_t* b : {&k.convolution->x, &k.convolution->w, &k.convolution->y}) m(*b);
  }
  if (k.reference) {
    for (int32_t& b : k.reference->inputs) m(b);
    m(k.reference->output);
  }
}

bool fits(const SymInt& slot, const SymInt& need) {
  if (slot == need) return true;
  return slot.is_static() && need.is_static() && need.hint() <= slot.hint();
}

// Every load of `r` in pointwise kernel `k` reads the element that the store into `w` writes.
bool in_place_ok(const Kernel& k, int32_t r, int32_t w, const std::vector<Buffer>& buffers) {
  if (k.kind != KernelKind::pointwise) return false;
  if (dtype_size(buffers[static_cast<size_t>(r)].dtype) != dtype_size(buffers[static_cast<size_t>(w)].dtype))
    return false;
  const Affine* store = nullptr;
  for (const Store& s : k.stores)
    if (s.buffer == w) {
      if (store && !(*store == s.index)) return false;
      store = &s.index;
    }
  if (!store) return false;
  for (const Instr& in : k.instrs)
    if (in.kind == InstrKind::load && in.buffer == r && (!in.plain_load() || !(in.index == *store))) return false;
  return true;
}

}  // namespace

void plan_buffers(Schedule& s) {
  const size_t nb = s.buffers.size();
  std::vector<bool> used(nb, false);
  for (const Kernel& k : s.kernels) {
    for (int32_t b : k.reads()) used[static_cast<size_t>(b)] = true;
    for (int32_t b : k.writes()) used[static_cast<size_t>(b)] = true;
  }
  for (int32_t b : s.outputs) used[static_cast<size_t>(b)] = true;
  for (Buffer& b : s.buffers)
    if (b.kind == BufferKind::input) used[static_cast<size_t>(b.id)] = true;  // the signature stays
  for (size_t k = 0; k < s.outputs.size(); ++k) {
    Buffer& b = s.buffers[static_cast<size_t>(s.outputs[k])];
    if (b.kind == BufferKind::intermediate) {
      b.kind = BufferKind::output;
      b.index = static_cast<int32_t>(k);
    }
  }
  // New order: inputs, constants, outputs, intermediates; each in its old order.
  std::vector<int32_t> to(nb, -1);
  std::vector<Buffer> out;
  for (BufferKind kind : {BufferKind::input, BufferKind::constant, BufferKind::output, BufferKind::intermediate})
    for (Buffer& b : s.buffers)
      if (used[static_cast<size_t>(b.id)] && b.kind == kind) {
        to[static_cast<size_t>(b.id)] = static_cast<int32_t>(out.size());
        b.id = static_cast<int32_t>(out.size());
        out.push_back(std::move(b));
      }
  s.buffers = std::move(out);
  for (Kernel& k : s.kernels) remap(k, to);
  for (int32_t& o : s.outputs) o = to[static_cast<size_t>(o)];

  // Every buffer a kernel reads exists by then.
  std::vector<bool> ready(s.buffers.size(), false);
  for (const Buffer& b : s.buffers)
    if (b.kind == BufferKind::input || b.kind == BufferKind::constant) ready[static_cast<size_t>(b.id)] = true;
  std::vector<int32_t> last_use(s.buffers.size(), -1), def(s.buffers.size(), -1);
  for (size_t ki = 0; ki < s.kernels.size(); ++ki) {
    const Kernel& k = s.kernels[ki];
    for (int32_t b : k.reads()) {
      KILN_INTERNAL_CHECK(ready[static_cast<size_t>(b)] || (k.gemm && b == k.gemm->c), "schedule: kernel ", k.name,
                 " reads buffer b", b, " before any kernel writes it");
      last_use[static_cast<size_t>(b)] = static_cast<int32_t>(ki);
    }
    for (int32_t b : k.writes()) {
      ready[static_cast<size_t>(b)] = true;
      if (def[static_cast<size_t>(b)] < 0) def[static_cast<size_t>(b)] = static_cast<int32_t>(ki);
      last_use[static_cast<size_t>(b)] = std::max(last_use[static_cast<size_t>(b)], static_cast<int32_t>(ki));
    }
  }
  for (int32_t o : s.outputs)
    KILN_INTERNAL_CHECK(ready[static_cast<size_t>(o)], "schedule: output buffer b", o, " is never written");

  // Linear scan.
  std::vector<bool> slot_free;
  for (size_t ki = 0; ki < s.kernels.size(); ++ki) {
    const Kernel& k = s.kernels[ki];
    std::vector<int32_t> dying;
    for (int32_t b : k.reads())
      if (s.buffers[static_cast<size_t>(b)].kind == BufferKind::intermediate && last_use[static_cast<size_t>(b)] ==
                                                                                    static_cast<int32_t>(ki))
        dying.push_back(b);
    for (int32_t w : k.writes()) {
      Buffer& wb = s.buffers[static_cast<size_t>(w)];
      if (wb.kind != BufferKind::intermediate || wb.slot >= 0) continue;
      const SymInt need = wb.bytes();
      for (auto it = dying.begin(); it != dying.end(); ++it) {
        const Buffer& rb = s.buffers[static_cast<size_t>(*it)];
        if (rb.slot >= 0 && fits(s.slots[static_cast<size_t>(rb.slot)].bytes, need) && in_place_ok(k, *it, w, s.buffers)) {
          wb.slot = rb.slot;
          dying.erase(it);
          break;
        }
      }
      for (size_t sl = 0; wb.slot < 0 && sl < s.slots.size(); ++sl)
        if (slot_free[sl] && fits(s.slots[sl].bytes, need)) {
          wb.slot = static_cast<int32_t>(sl);
          slot_free[sl] = false;
        }
      if (wb.slot < 0) {
        wb.slot = static_cast<int32_t>(s.slots.size());
        s.slots.push_back(Slot{need});
        slot_free.push_back(false);
      }
    }
    for (int32_t b : dying) {
      const Buffer& bb = s.buffers[static_cast<size_t>(b)];
      bool still = false;  // a slot taken in place stays busy
      for (const Buffer& o : s.buffers)
        if (o.id != b && o.slot == bb.slot && o.kind == BufferKind::intermediate && def[static_cast<size_t>(o.id)] >= 0 &&
            def[static_cast<size_t>(o.id)] <= static_cast<int32_t>(ki) && last_use[static_cast<size_t>(o.id)] > static_cast<int32_t>(ki))
          still = true;
      if (bb.slot >= 0 && !still) slot_free[static_cast<size_t>(bb.slot)] = true;
    }
  }
  const std::vector<int64_t> ex = s.graph.shapes().examples();
  s.peak_intermediate_bytes = 0;
  for (const Slot& sl : s.slots) s.peak_intermediate_bytes += sl.bytes.evaluate(ex);
}

}  // namespace kiln::schedule::detail
