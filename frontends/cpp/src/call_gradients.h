// Internal to frontends/cpp: a kiln::compile'd call made on arguments that require gradients
// (grad mode on), as torch's AOTAutograd runs one.
// The call's graph, its gradient nodes appended (sdk/autodiff, seeded by one new input per
// floating output: that output's gradient), is a joint graph; passes::partition_stored splits it
// where the forward ends (the minimum cut: what the backward is given, the rest it computes
// again). The forward graph returns the stored values after its own outputs; the backward graph
// takes the forward's inputs, its outputs, the stored values and the outputs' gradients, and
// returns the gradients of the inputs that require them. Both are compiled as the function's
// graphs are (FunctionCache::compile_graph) once per (graph, inputs requiring gradients); each
// call's outputs then carry a record whose backward runs the backward graph on what this call
// stored.
#pragma once

#include <memory>
#include <span>

#include "kiln/capture/capture.h"
#include "kiln/compile.h"

namespace kiln::detail {

// Runs `e`'s graph for `args` as a forward that also returns what its backward needs, and gives
// each floating output a record of the call (GradRecord::call) whose backward runs the
// backward graph. Compiles the pair at the first call per entry and inputs requiring gradients.
Outputs run_for_gradients(FunctionCache& cache, const std::shared_ptr<const CompiledEntry>& e,
                          std::span<const ArgView> args);
// Forgets the compiled pairs (kiln::reset).
void forget_training_pairs();

}  // namespace kiln::detail
