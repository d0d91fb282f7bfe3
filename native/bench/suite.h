// The benchmark suite of shared/bench/suite.md as data: each workload builds its inputs,
// runs through Kiln (compiled in a mode, or eager), and optionally has two references on the
// CPU: hand-written fused loops (-O3 -march=native, OpenMP: the practical roofline) and
// Eigen's Tensor module. `kiln bench` (native/cli/cmd_bench.cpp) times and prints them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::bench {

using Tensors = std::vector<Tensor>;
// A reference implementation on host float buffers: inputs in order, outputs preallocated.
using HostImpl = std::function<void(const std::vector<const float*>& in, const std::vector<float*>& out)>;

struct Workload {
  std::string name;
  bool launch_bound = false;  // small_chain: time 2000 back-to-back calls
  std::function<Tensors(bool small)> make_inputs;
  // Plain Kiln code over Tensors (eager when called directly).
  std::function<Tensors(const Tensors&)> eager;
  // The same code through kiln::compile with these options; a fresh compiled function each call.
  std::function<std::function<Tensors(const Tensors&)>(const CompileOptions&)> compiled;
};

const std::vector<Workload>& suite();

// Hand-written fused loops and Eigen versions, by workload name (empty when absent).
HostImpl handwritten_impl(const std::string& name, const std::vector<std::vector<int64_t>>& input_shapes);
HostImpl eigen_impl(const std::string& name, const std::vector<std::vector<int64_t>>& input_shapes);

}  // namespace kiln::bench
