// KernelPlan: the portable artifact a codegen makes from a Schedule and a runtime runs.
// Versioned JSON, byte-identical for the same graph, config and target wherever it is made
// (natively or in the browser). It holds source text, never binaries: per kernel its source,
// entry point, launch shape and the graph nodes it computes (provenance); the buffers with
// symbolic sizes and the memory slots intermediates share; how each size symbol is read off
// the inputs; the guards the plan assumes; and which buffer is each output.
//
// Takes: nothing but its own fields (codegens fill them). Gives: str(), the readable form
// `kiln show --plan` prints, and module_source(). The JSON form lives with the other JSON
// formats in frontends/graph (kiln/format/plan_json.h), which shares the graph format's
// encoders for sizes, symbols, facts, attributes and tensors.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/graph/graph.h"

namespace kiln::plan {

inline constexpr int kPlanVersion = 1;

struct PlanBuffer {
  int32_t id = 0;
  std::string kind;  // "input", "constant", "output", "intermediate"
  DType dtype = DType::f32;
  SymShape sizes;
  SymShape strides;   // element strides
  int32_t index = -1; // input: argument position; output: first output it serves
  int32_t slot = -1;  // intermediate: memory slot
  std::shared_ptr<const ConstantData> data;  // constants
};

struct PlanKernel {
  std::string name;
  std::string kind;    // "pointwise", "reduction", "matmul" (generated) or "reference"
  std::string entry;   // generated: the function to call
  // generated, max-autotune: other functions in the source computing the same thing another way
  // (vector width, block size); the runtime times them on the first call and keeps the fastest
  std::vector<std::string> variants;
  std::string source;  // generated: the kernel's source text (for cpu, an LLVM IR function)
  SymInt parallel_extent = 1;  // the launch: [0, extent) split over threads
  int64_t grain = 1;           // smallest chunk of that range worth a thread
  std::vector<NodeId> provenance;
  std::vector<int32_t> reads, writes;
  // reference kernels: one op of the op table on whole buffers
  OpId op = OpId::input;
  Attrs attrs;
  std::vector<int32_t> inputs;
  int32_t output = -1;
};

// Symbol `symbol` is the size of dim `dim` of input `input`.
struct SymbolBinding {
  SymbolId symbol = 0;
  int32_t input = 0;
  int32_t dim = 0;
};

struct KernelPlan {
  int version = kPlanVersion;
  std::string target;   // "cpu"
  std::string prelude;  // module text every kernel's source needs (declarations, helpers)
  std::vector<SymbolInfo> symbols;
  std::vector<ShapeFact> facts;
  std::vector<SymbolBinding> bindings;  // one per symbol
  std::vector<PlanBuffer> buffers;
  std::vector<SymInt> slots;            // bytes of each intermediate slot
  std::vector<PlanKernel> kernels;      // in execution order
  std::vector<int32_t> outputs;         // buffer per graph output
  int64_t peak_intermediate_bytes = 0;  // at the example sizes
  std::vector<std::string> guards;      // what the plan assumes, one sentence each

  std::string str() const;
  // The whole module: prelude then every generated kernel's source.
  std::string module_source() const;
};

}  // namespace kiln::plan
