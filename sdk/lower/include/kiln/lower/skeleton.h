// sdk/lower: the seed of the lowering stage, which turns a scheduled kernel and its strategy
// into what a codegen prints (issue 25: loops, loads and stores, reductions expanded once). Today
// it holds what every target's codegen starts from: the skeleton of a KernelPlan built from a
// Schedule. It lives here, not in sdk/plan, so the plan (the portable artifact runtimes load,
// and its JSON format) does not depend on the scheduler.
// Takes: a schedule::Schedule (and its kernels). Gives: a plan::KernelPlan with everything but
// the target's prelude and kernels' sources, entries and launches; a GPU gemm's library call.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "kiln/plan/plan.h"
#include "kiln/schedule/schedule.h"

namespace kiln::lower {

// What every target's plan of a schedule shares: symbols, facts and their guards, symbol
// bindings (each symbol bound from the first input dim that is exactly that symbol; a symbol no
// input binds is a kiln::Error naming `target`), buffers, slots, outputs and peak memory. The
// codegen then adds its prelude and one kernel per schedule kernel.
plan::KernelPlan plan_skeleton(const schedule::Schedule& s, std::string_view target);

// A plan kernel's fields every target fills alike: name, kind, provenance, buffers read and
// written, and for a reference kernel its op, attributes and buffers. The codegen adds the
// source, entry and launch.
plan::PlanKernel kernel_skeleton(const schedule::Kernel& k);

// A reference kernel of a custom op (kiln/graph/custom_ops.h) as the op's own kernel for
// `target` ("cuda"), where the op registered one: a kernel of kind "custom" and fixed signature
// (its inputs' buffers, its output's, then the thread count and every size, as
// CustomOpKernel says) over its thread count; std::nullopt where it has none, or an input is
// strided (the runtime then runs it on the host). The source and entry are the op's own, so the
// kernel keeps its name.
std::optional<plan::PlanKernel> custom_device_kernel(const schedule::Kernel& k, const schedule::Schedule& s,
                                                     std::string_view target);

// The library call of a GPU matmul kernel: its gemm with every trailing batch dim that is more
// rows folded in (Gemm::fold_last_batch), whether or not the kernel's epilogue could fold them
// (the epilogue runs after the call over the kernel's own domain), and adjacent batch dims of
// one stride merged (a strided-batched call covers them at once).
plan::PlanGemm plan_gemm(const schedule::Gemm& g);

// Names a generated kernel after what it computes: its entry, and every use of that name in its
// source, becomes kiln_<hash of the source without the name>, after the identifiers in
// `renames` are renamed (a codegen's buffer names to their parameter positions). A model's
// repeated layers then give byte-identical kernels, which a plan's module holds once
// (KernelPlan::module_source) and the runtime compiles once. For targets whose kernels are
// separate functions of one program.
using Renames = std::map<std::string, std::string, std::less<>>;  // looked up by string_view
void name_by_content(plan::PlanKernel& pk, const Renames& renames = {});

// `src` with every identifier (a maximal run of letters, digits and '_') that `renames` names
// replaced by its new name; the rest as it was.
std::string rename_identifiers(std::string_view src, const Renames& renames);

}  // namespace kiln::lower
