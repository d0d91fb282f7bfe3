// kiln show GRAPH.json: the graph as text, its symbols and the checks its inputs must pass.
#include <fstream>
#include <iostream>
#include <iterator>

#include "commands.h"
#include "input_checks.h"
#include "model_files.h"
#include "plan_files.h"
#include "kiln/graph/files.h"
#include "kiln/format/graph_json.h"
#include "kiln/plan/plan_json.h"
#include "kiln/graph/error.h"
#include "kiln/passes/passes.h"
#include "kiln/target/target.h"

namespace kiln::cli {

const CommandSpec& show_spec() {
  static const CommandSpec spec{
      "show",
      "GRAPH.json|MODEL.onnx",
      "Prints a graph file (or a kernel plan file, kiln.plan JSON): its nodes, its size symbols with their ranges, and its guards (the\n"
      "checks an input must pass: dtype, device, rank, each size exact or within a symbol's\n"
      "range, and the shape facts the graph relies on).",
      "With --plan, --schedule or --code it also compiles the graph for a target (--target, default\n"
      "cpu; for any device of it) the way the \"kiln\" backend does (graph passes, fusion, the\n"
      "target's codegen) and prints what came out.",
      {{"--schedule", "", "print the fusion decisions and each kernel's loop-level IR"},
       {"--plan", "", "print the kernel plan: kernels, launch shapes, provenance, buffers, guards"},
       {"--code", "", "print the generated module (LLVM IR for cpu, CUDA C for cuda, GLSL for vulkan)"},
       {"--target", "NAME", "the codegen to show: cpu (default), cuda, vulkan (an ONNX model is imported for that "
                            "target's device, as kiln::onnx::compile does: off the CPU its weights become inputs)"},
       {"--save-plan", "FILE", "write the kernel plan as JSON (kiln show / kiln run take such files); given a plan file, "
                               "write it again; signed with KILN_CACHE_SECRET when set (docs/plan-trust.md)"},
       {"--save-graph", "FILE", "write the graph as a graph file (JSON, docs/graph-format.md): an ONNX model as imported"}}};
  return spec;
}

int cmd_show(std::span<char* const> args) {
  const CommandSpec& spec = show_spec();
  ParsedArgs a = parse_args(spec, args);
  if (a.help) {
    std::cout << command_help(spec);
    return 0;
  }
  {
    // A kernel plan file (kiln show --plan ... output saved by debug_dir, or made in the browser).
    const std::string text = read_regular_file(a.positional[0], "graph, model or plan file");
    if (text.find("\"kiln.plan\"") != std::string::npos && text.find("\"kiln.graph\"") == std::string::npos) {
      const plan::KernelPlan p = plan::plan_from_json(text, a.positional[0]);
      std::cout << p.str();
      // A plan file written again: signed with KILN_CACHE_SECRET when set, which is how a
      // secret's holder vouches for a plan that was edited (docs/plan-trust.md).
      if (a.has("--save-plan")) {
        write_plan_file(a.get("--save-plan"), p, "kiln show --save-plan");
        std::cout << "\nwrote " << a.get("--save-plan") << (p.signature.empty() ? "" : " (its old signature replaced)") << "\n";
      }
      return 0;
    }
  }
  const ModelFile model = load_model_file(a.positional[0], {}, parse_device(a.has("--target") ? a.get("--target") : "cpu"));
  const Graph& g = model.graph;
  std::cout << model.summary;
  std::cout << "graph " << a.positional[0] << ": " << g.size() << " nodes (" << g.op_count() << " ops), "
            << g.inputs().size() << " input" << (g.inputs().size() == 1 ? "" : "s") << ", " << g.outputs().size()
            << " output" << (g.outputs().size() == 1 ? "" : "s") << "\n\n";
  std::cout << g.str();
  if (!g.str().empty() && g.str().back() != '\n') std::cout << "\n";
  std::cout << "\nsymbols:";
  if (g.shapes().symbols().empty()) std::cout << " none (all sizes are static)";
  std::cout << "\n";
  for (const SymbolInfo& s : g.shapes().symbols()) {
    std::cout << "  s" << s.id << " in " << range_str(s.min, s.max) << ", example " << s.example;
    if (!s.source.empty()) std::cout << ", from " << s.source;
    if (s.user_dynamic) std::cout << ", marked dynamic";
    std::cout << "\n";
  }
  std::cout << "\nguards:\n";
  for (const std::string& line : guard_lines(g)) std::cout << "  " << line << "\n";
  if (a.has("--save-graph")) {
    std::ofstream f(a.get("--save-graph"), std::ios::binary);
    f << format::to_json(g);
    f.close();
    KILN_CHECK(f.good(), "kiln show --save-graph: cannot write ", a.get("--save-graph"));
    std::cout << "\nwrote " << a.get("--save-graph") << "\n";
  }
  if (a.has("--schedule") || a.has("--plan") || a.has("--code") || a.has("--save-plan")) {
    target::ensure_builtin_targets();
    const Graph scheduled = passes::run_default_pipeline(g);
    const target::Compiled c =
        target::compile_graph(target::codegen(a.has("--target") ? a.get("--target") : "cpu"), scheduled, {});
    const schedule::Schedule& s = c.schedule;
    if (a.has("--schedule")) {
      // The node ids of the decisions and kernels are those of the graph as prepared for the
      // target (passes, composites decomposed, operands cast and padded), not the file's.
      std::cout << "\ngraph as scheduled (after the passes and the target's preparation):\n" << s.graph.str();
      std::cout << "\nfusion decisions:\n";
      for (const std::string& d : s.decisions) std::cout << "  " << d << "\n";
      std::cout << "\nschedule (" << s.kernels.size() << " kernel" << (s.kernels.size() == 1 ? "" : "s") << "):\n"
                << s.str();
    }
    const plan::KernelPlan& p = c.generated.plan;
    if (a.has("--plan")) std::cout << "\n" << p.str();
    if (a.has("--code")) std::cout << "\n" << p.module_source();
    if (a.has("--save-plan")) {
      plan::KernelPlan saved = p;  // with what made it, so that `kiln run` can check it
      saved.origin = target::plan_origin(format::to_json(scheduled, -1), {});
      write_plan_file(a.get("--save-plan"), std::move(saved), "kiln show --save-plan");
      std::cout << "\nwrote " << a.get("--save-plan") << "\n";
    }
  }
  return 0;
}

}  // namespace kiln::cli
