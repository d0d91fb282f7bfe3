// sdk/eval, the reference interpreter: a plain interpreter of the Graph over every op and dtype.
// It is an sdk stage, not a target: the oracle every target is tested against, the engine of
// constant folding (sdk/passes), the eager fallback and the runner of plans' reference kernels.
// It aims to be correct and clear, not fast.
//
// Takes host TensorData of any strides and offset (never written to); gives new contiguous
// host tensors. Floating math is done in double and rounded once to the output dtype; integer
// math in int64, wrapping to the output width; bool is 0/1. Semantics follow torch (see the
// notes in kiln/graph/ops.h). Bad input (a shape that does not broadcast, an index out of
// range, an input that does not match the graph) throws kiln::Error.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kiln/graph/graph.h"
#include "kiln/graph/ops.h"
#include "kiln/graph/tensor_data.h"

namespace kiln::eval {

// Runs one op on concrete host inputs of any strides/offsets; returns a new contiguous host
// tensor of `out_dtype` and sizes `out_sizes` (which the caller took from the op's shape rule;
// symbolic attributes are not read, the sizes say everything). Composite ops (those whose
// OpDef has a decomposition) run through it: op_def(op).decompose applied to a small Graph
// built from the inputs' static metas, then interpreted.
TensorData run_op(OpId op, std::span<const TensorData> inputs, const Attrs& attrs, DType out_dtype,
                  std::span<const int64_t> out_sizes);

// Computes the static output meta of one op on concrete inputs (the op's shape rule, through
// Graph::add on a throwaway graph, so arity and attributes are checked too), then run_op.
TensorData eval_op(OpId op, std::span<const TensorData> inputs, const Attrs& attrs);

// Interprets a whole graph. Inputs are bound in order (host tensors; 0-d tensors for scalar
// arguments). Symbol values are bound from inputs whose size is a bare symbol (an expression
// of one term, coefficient 1); every other symbolic size (node metas, symints attributes of
// reshape/expand/full/randn) is evaluated from them. A mismatch between an input and the
// graph's input meta (dtype, rank, a static size, a size expression, two bindings of one
// symbol) or a violated shape fact throws naming the input. Only nodes the outputs depend on
// run. An output that is an input node is returned as that input (sharing its storage).
std::vector<TensorData> run_graph(const Graph& g, std::span<const TensorData> inputs);

// The symbol values of `g` (indexed by SymbolId) bound from `inputs`, after the checks that
// run_graph makes; throws when a symbol of the graph's ShapeEnv is not bound by any input.
std::vector<int64_t> bind_symbols(const Graph& g, std::span<const TensorData> inputs);

// Copies any strided tensor to a new contiguous host tensor of the same dtype.
TensorData contiguous(const TensorData& t);
// Copies to a new contiguous host tensor of dtype `to`, with cast semantics (float -> int
// truncates toward zero, -> bool is != 0, float -> narrower float rounds to nearest even).
TensorData convert(const TensorData& t, DType to);

// Throws kiln::Error naming every op that is neither `input`, nor a composite with a
// decomposition, nor covered by a reference kernel. run_op checks this on first use.
void check_kernel_table();

}  // namespace kiln::eval
