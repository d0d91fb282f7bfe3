#include "kiln/capture/grad_mode.h"

namespace kiln {

namespace {
thread_local bool t_grad_enabled = true;
}  // namespace

NoGrad::NoGrad(bool enabled) : previous_(t_grad_enabled) { t_grad_enabled = enabled; }
NoGrad::~NoGrad() { t_grad_enabled = previous_; }
bool grad_enabled() { return t_grad_enabled; }

}  // namespace kiln
