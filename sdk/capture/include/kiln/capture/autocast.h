// Autocast (mixed precision), torch.autocast's counterpart. Inside a kiln::autocast scope (this
// thread's), each op is given inputs of the type its rule asks for before it is traced or run:
//   - low: the matmul family (matmul, linear, convolution, scaled_dot_product_attention) takes
//     its floating inputs in the scope's low-precision type (bf16 or f16); targets accumulate in
//     f32, and the result is in the low type;
//   - f32: the ops that lose range or precision in a low type, torch.autocast's f32 list (sum,
//     prod, logsumexp, cumsum, softmax, log_softmax, layer/rms/group norm, exp, log, pow,
//     reciprocal, rsqrt) take bf16 and f16 inputs in f32 and give f32;
//   - like_input: batch_norm computes on its promoted type (its f32 statistics) and gives its
//     first input's type back (a bf16 activation stays bf16 between convolutions, as torch's);
//   - every other op computes on its inputs' promoted type, as outside a scope (mean and var of a
//     bf16 tensor accumulate in f32 and give bf16, as torch's).
// The frontend inserts the casts (they are ops of the graph, fused like any other); a compiled
// graph is guarded on the autocast state it was traced under, so a call under another state
// recompiles, with that as its reason.
#pragma once

#include <optional>

#include "kiln/graph/graph.h"

namespace kiln {

// Sets (or, with enabled = false, lifts) autocast for the current scope on this thread and
// restores the previous state after. The dtype is bf16 or f16, else kiln::Error.
class autocast {
 public:
  explicit autocast(DType dtype = DType::bf16, bool enabled = true);
  ~autocast();
  autocast(const autocast&) = delete;
  autocast& operator=(const autocast&) = delete;

 private:
  std::optional<DType> previous_;
};

// This thread's autocast type, or nullopt outside a scope (or in a disabled one).
std::optional<DType> autocast_dtype();

enum class AutocastRule { keep, low, f32, like_input };
AutocastRule autocast_rule(OpId op);

}  // namespace kiln
