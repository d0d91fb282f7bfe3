// Autograd: reverse-mode gradients of computations over kiln::Tensor, eager or inside a
// compiled function. A floating tensor marked with requires_grad_() is a leaf; every op over
// tensors that require gradients records itself (while grad mode is on: kiln::NoGrad turns it
// off); backward() or kiln::grad walks the records backwards with the op table's derivative
// rules (sdk/autodiff). Eagerly the gradient ops run as ops do; inside kiln::compile they are
// traced into the same graph as the forward, so one compiled training step fuses both.
//
// Inside a compiled function, differentiate with respect to its arguments (mark them there, or
// use value_and_grad) and return the gradients: a leaf captured from outside the arguments is
// a constant of the graph and cannot receive a .grad. Calling a compiled function on arguments
// that require gradients, to differentiate it from outside, is refused for now.
#pragma once

#include <utility>
#include <vector>

#include "kiln/capture/grad_mode.h"
#include "kiln/compile.h"
#include "kiln/tensor.h"

namespace kiln {

struct GradOptions {
  // d(loss)/d(output) for each output; may be left out (or undefined) for one-element outputs.
  std::vector<Tensor> grad_outputs;
  // Record the gradient ops too, so the gradients can be differentiated again.
  bool create_graph = false;
  // An input that no output depends on gets an undefined tensor instead of an error.
  bool allow_unused = false;
};

// torch.autograd.grad: the gradient of the outputs (summed, weighted by grad_outputs) with
// respect to each input, without touching any grad(). Inputs are tensors that require
// gradients (leaves or computed).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const GradOptions& options = {});

// The Tensor leaves of a pytree (a Tensor, std::vector, std::array, std::tuple, std::pair,
// std::optional, std::map<std::string, T>, or a struct registered with KILN_PYTREE such as the
// kiln::nn modules), in the order kiln::compile traces them; and the same pytree with its leaves
// replaced, in that order.
template <class P>
std::vector<Tensor> tree_leaves(const P& tree) {
  std::vector<Tensor> out;
  detail::result_tensors(tree, out);
  return out;
}
template <class P>
P tree_replace(const P& tree, std::vector<Tensor> leaves) {
  P out = tree;
  size_t next = 0;
  detail::fill_result(out, &leaves, next);
  KILN_CHECK(next == leaves.size(), "tree_replace: ", leaves.size(), " tensors for a tree of ", next, " leaves");
  return out;
}

// The value of f(params) and its gradient with respect to each floating tensor of params, as
// a pytree of params' structure (jax.value_and_grad): f sees params with fresh leaves in their
// place, so params themselves need not require gradients; f returns a one-element tensor. A
// leaf f does not use (a running statistic updated outside autograd) and an integer leaf (token
// ids in a batch) get an undefined tensor, as torch leaves such a parameter's grad None: the
// optimizers' steps leave those as they are.
template <class F, class P>
std::pair<Tensor, P> value_and_grad(F&& f, const P& params) {
  std::vector<Tensor> leaves = tree_leaves(params);
  std::vector<Tensor> wrt;
  for (Tensor& t : leaves) {
    if (!t.defined() || !is_floating(t.dtype())) continue;
    t = t.detach().requires_grad_();
    wrt.push_back(t);
  }
  const Tensor value = f(tree_replace(params, leaves));
  const std::vector<Tensor> grads = grad({value}, wrt, {.allow_unused = true});
  size_t k = 0;
  for (Tensor& t : leaves) {
    if (!t.defined() || !is_floating(t.dtype())) {
      t = Tensor();
      continue;
    }
    t = grads[k];
    ++k;
  }
  return {value.detach(), tree_replace(params, std::move(leaves))};
}

}  // namespace kiln
