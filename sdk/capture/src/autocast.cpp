#include "kiln/capture/autocast.h"

#include "kiln/graph/error.h"

namespace kiln {

namespace {
thread_local std::optional<DType> t_autocast;
}

autocast::autocast(DType dtype, bool enabled) : previous_(t_autocast) {
  KILN_CHECK(dtype == DType::bf16 || dtype == DType::f16, "autocast: the low-precision type is bf16 or f16, not ",
             dtype_name(dtype));
  t_autocast = enabled ? std::optional<DType>(dtype) : std::nullopt;
}

autocast::~autocast() { t_autocast = previous_; }

std::optional<DType> autocast_dtype() { return t_autocast; }

AutocastRule autocast_rule(OpId op) {
  switch (op) {
    case OpId::matmul:
    case OpId::linear:
    case OpId::convolution:
    case OpId::convolution_channels_last:
    case OpId::convolution_input_grad:
    case OpId::convolution_weight_grad:
    case OpId::scaled_dot_product_attention:
      return AutocastRule::low;
    case OpId::sum:
    case OpId::prod:
    case OpId::logsumexp:
    case OpId::cumsum:
    case OpId::cumprod:
    case OpId::softmax:
    case OpId::log_softmax:
    case OpId::layer_norm:
    case OpId::rms_norm:
    case OpId::group_norm:
    case OpId::exp:
    case OpId::log:
    case OpId::pow:
    case OpId::reciprocal:
    case OpId::rsqrt:
      return AutocastRule::f32;
    case OpId::batch_norm:
      return AutocastRule::like_input;
    default:
      return AutocastRule::keep;
  }
}

}  // namespace kiln
