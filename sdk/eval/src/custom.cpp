// custom: a registered op's host kernel (kiln/graph/custom_ops.h) on contiguous copies of the
// inputs, its errors named after it.
#include "kiln/eval/interpreter.h"
#include "kiln/graph/custom_ops.h"
#include "kiln/graph/error.h"
#include "kernels.h"

namespace kiln::eval::detail {

void custom_kernel(const KernelArgs& a) {
  const std::string& name = a.attrs.s(0);
  const std::shared_ptr<const CustomOpDef> op = find_custom_op(name, a.attrs.s(1));
  std::vector<TensorData> inputs;
  inputs.reserve(a.inputs.size());
  for (const TensorData& t : a.inputs) inputs.push_back(t.is_contiguous() && t.offset == 0 ? t : contiguous(t));
  run_custom_op_function(name, "host kernel", [&] { op->compute(inputs, a.attrs.s(2), a.out); });
}

}  // namespace kiln::eval::detail
