// Grad mode, torch's torch.no_grad / torch.enable_grad counterpart. While it is on (the
// default), each op over a tensor that requires gradients is recorded for autograd (the C++
// frontend's kiln/autograd.h); in a kiln::NoGrad scope (this thread's) nothing is recorded.
// A compiled graph is guarded on the mode it was traced under: a function that differentiates
// inside traces differently without it.
#pragma once

namespace kiln {

// Turns recording off (or, with enabled = true, on) for the scope on this thread and restores
// the previous mode after.
class NoGrad {
 public:
  explicit NoGrad(bool enabled = false);
  ~NoGrad();
  NoGrad(const NoGrad&) = delete;
  NoGrad& operator=(const NoGrad&) = delete;

 private:
  bool previous_;
};

// Whether ops are recorded for autograd on this thread.
bool grad_enabled();

}  // namespace kiln
