// kiln::passes: Graph -> Graph rewrites, one pass a file, and the pipeline the "kiln" backend runs.
// Takes: a well-formed Graph (as Graph::add builds them), static or symbolic.
// Gives: a new Graph computing the same outputs (the reference interpreter gives the same values,
//   up to floating rounding where a pass says so), with the same signature: the input nodes, in
//   order, with their metas and names; as many outputs, in order, each with the same dtype,
//   device and sizes (an output may come to be an input node, or the same node twice); and the
//   same ShapeEnv (symbols and facts: a pass never adds an assumption about sizes).
// Every pass goes through run_pass, which checks those invariants (a violation is a bug in the
// pass: it throws kiln::InternalError naming the pass) and logs under KILN_LOGS=graph the graph before,
// the graph after and a line saying what changed ("cse: merged 3 nodes"). docs/passes.md says
// what each pass rewrites, what it never touches and why.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/graph/graph.h"

namespace kiln::passes {

struct PassResult {
  Graph graph;
  bool changed = false;
  std::string summary;  // one line: "cse: merged 3 nodes"
};

// A pass as a value: its name and the rewrite itself (no checks, no logging: see run_pass).
struct Pass {
  std::string_view name;
  PassResult (*run)(const Graph&);
};

extern const Pass decompose_pass;       // "decompose"
extern const Pass dce_pass;             // "dce"
extern const Pass cse_pass;             // "cse"
extern const Pass fold_constants_pass;  // "fold_constants"
extern const Pass simplify_pass;        // "simplify"
extern const Pass recognize_pass;       // "recognize"
extern const Pass recognize_attention_pass;  // "recognize_attention"
extern const Pass to_channels_last_pass;      // "to_channels_last"
extern const Pass sink_permutes_pass;         // "sink_permutes"
extern const Pass rematerialize_pass;         // "rematerialize"

// Runs one pass, checks the invariants above against `g`, logs it.
PassResult run_pass(const Pass& pass, const Graph& g);
// Runs passes in order (each through run_pass); `changed` is true when any of them changed.
PassResult run_passes(std::span<const Pass> passes, const Graph& g);

// Composites (op_def(op).decompose != nullptr) -> primitives, recursively: no composite is left.
Graph decompose(const Graph& g);
// The same, except that top-level composites `keep` accepts stay as they are (a composite a
// target has its own kernel for, like attention on CUDA); their inputs are still decomposed.
Graph decompose_except(const Graph& g, const std::function<bool(const Graph&, const Node&)>& keep);
// The same (without run_pass's checks and log), also giving for every node of the result the
// top-level composite it came from ("" for nodes that were primitives), e.g. to name the
// composites a fused kernel computes.
Graph decompose_with_origins(const Graph& g, std::vector<std::string_view>& origin);
// Keeps every input node (the signature); drops the nodes no output depends on.
Graph eliminate_dead_code(const Graph& g);
// Merges nodes with the same op, the same (already merged) inputs and equal attributes (rand,
// randn and philox with equal attributes and keys are deterministic, so they merge too;
// different seeds never do).
Graph eliminate_common_subexpressions(const Graph& g);
// Evaluates with the reference interpreter the nodes whose inputs are all constant (constant,
// full, arange, or folded) when the result is static and small (<= kMaxFoldElements), and
// pointwise or layout nodes over `full` nodes of any shape (symbolic too). A uniform result
// becomes a `full`, any other a `constant`. Random numbers are never folded.
Graph fold_constants(const Graph& g);
inline constexpr int64_t kMaxFoldElements = 4096;
// Algebraic identities that leave every value unchanged: x*1, x+0, x-0, x/1 (only where the
// result has x's dtype, device and sizes), neg(neg x), identity casts/reshapes/permutes/
// expands/squeezes/slices, exact cast chains, reshape/permute/expand chains composed.
Graph simplify(const Graph& g);
// Hand-written softmax, log_softmax, layer_norm and rms_norm -> the composite op, when no
// intermediate value is used elsewhere (or is an output).
Graph recognize_patterns(const Graph& g);
// softmax(q @ k^T [* c | / c], -1) @ v -> scaled_dot_product_attention, when no intermediate
// is used elsewhere. Not in the default pipeline: the scheduler runs it for targets that have a
// fused attention kernel (schedule::Target::fused_attention).
Graph recognize_attention(const Graph& g);

// Every convolution -> convolution_channels_last between permutes (a constant weight permuted
// now). Not in the default pipeline: the scheduler runs it, then sink_permutes and simplify,
// for targets whose convolutions run best channels last (schedule::Target::channels_last).
Graph to_channels_last(const Graph& g);
// Permutes moved past the pointwise ops, reductions, slices and pads that read them (towards
// the outputs), so that pairs meet and simplify cancels them; a permute moving only size-1
// dims becomes a reshape. layout.cpp lists the rules.
Graph sink_permutes(const Graph& g);

// Large pointwise values read early and again much later (a training step's activations, read
// by its forward and again by its backward) are computed again for the late readers, from
// inputs stored until then anyway, instead of being stored across the gap; each such choice is
// logged with its reason under KILN_LOGS=partition. Not in the default pipeline: the scheduler
// runs it last, on the graph whose node order its kernels follow.
Graph rematerialize(const Graph& g);
// AOTAutograd's forward/backward split of a joint graph whose nodes before `boundary` are the
// forward's and the rest the backward's: the forward values the backward is given (the fewest
// bytes, rematerialize's minimum cut), from which with the graph's inputs, constants and outputs
// it computes again the others it reads (cheap ops only). Logged under KILN_LOGS=partition,
// headed by `what`.
std::vector<NodeId> partition_stored(const Graph& joint, NodeId boundary, std::string_view what);
// Per node: computed from constants and sources alone (full, iota, randn without a key, ...; not inputs), so
// computable anywhere at no cost in memory.
std::vector<bool> generated_only(const Graph& g);

// The pipeline the "kiln" backend runs before scheduling: recognize -> fold_constants ->
// simplify -> cse -> recognize -> dce (docs/passes.md says why in this order). decompose is not
// in it: the scheduler runs it itself.
std::span<const Pass> default_pipeline();
Graph run_default_pipeline(const Graph& g);

}  // namespace kiln::passes
