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
//   write past what bind promised), then plan::finish_outputs reads the checks' counts. The
//   generated kernels (LLVM IR, CUDA, GLSL) are not run: their outputs stay zero.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

namespace {

constexpr int64_t kMaxSymbol = 64;                // symbols are bound to values at most this
constexpr int64_t kMaxInputBytes = int64_t{1} << 20;  // all inputs together
constexpr int64_t kMaxBufferElements = 1 << 16;   // per buffer, for the reference run
constexpr int64_t kMaxRunBytes = int64_t{4} << 20;  // outputs and slots together, for the reference run

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "%s\n", what.c_str());
  std::abort();
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

// The reference kernels of a bound plan, as targets/cpu/runtime runs them.
void run_reference_kernels(const kiln::plan::KernelPlan& p, const kiln::plan::Binding& bound,
                           const std::vector<kiln::TensorData>& inputs) {
  const kiln::plan::BoundSizes& z = *bound.at;
  int64_t total = 0;
  for (int64_t b : bound.slot_bytes()) total += b;
  for (const kiln::plan::PlanBuffer& b : p.buffers) {
    const size_t id = static_cast<size_t>(b.id);
    int64_t n = 1;
    for (size_t d = z.first[id]; d < z.first[id + 1]; ++d)
      if (__builtin_mul_overflow(n, std::max<int64_t>(z.sizes[d], 1), &n) || n > kMaxBufferElements) return;
    if (b.kind == "output") total += bound.buffer_bytes()[id];
    if (total > kMaxRunBytes) return;
  }
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

}  // namespace

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
  run_reference_kernels(p, bound, inputs);
  return 0;
}
