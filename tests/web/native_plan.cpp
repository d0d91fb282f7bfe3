// The native side of the WebAssembly tests: the same web/src/core calls the module makes,
// compiled natively, so tests/web/*.test.js can check that the module gives byte-identical
// plans and the same error messages as native code.
//   kiln_web_native COMMAND GRAPH.json [ARG]
//   plan GRAPH.json REQUEST_JSON    the KernelPlan JSON
//   report GRAPH.json REQUEST_JSON  compile_report (timings vary; the rest must match)
//   key GRAPH.json REQUEST_JSON     the cache key
//   key-inputs GRAPH.json REQUEST_JSON  the components it hashes
//   run GRAPH.json RUN_JSON         run_reference
//   normalize GRAPH.json            the graph re-serialised
// GRAPH.json may be "-" (standard input). On kiln::Error: prints "error: MESSAGE", exits 1.
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

#include "../../web/src/core.h"
#include "kiln/format/graph_json.h"
#include "kiln/graph/error.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: kiln_web_native plan|report|key|key-inputs|run|normalize GRAPH.json [ARG]\n";
    return 2;
  }
  const std::string cmd = argv[1], path = argv[2], arg = argc > 3 ? argv[3] : "";
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::cerr << "cannot read " << path << "\n";
      return 2;
    }
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  try {
    // "graph" as the source name, as the module's bindings use.
    const kiln::Graph g = kiln::format::from_json(text, "graph");
    if (cmd == "plan") std::cout << kiln::web::plan_json(g, kiln::web::parse_request(arg));
    else if (cmd == "report") std::cout << kiln::web::compile_report(g, kiln::web::parse_request(arg));
    else if (cmd == "key") std::cout << kiln::web::cache_key(g, kiln::web::parse_request(arg));
    else if (cmd == "key-inputs") std::cout << kiln::web::cache_key_inputs_json(g, kiln::web::parse_request(arg));
    else if (cmd == "run") std::cout << kiln::web::run_reference(g, arg);
    else if (cmd == "normalize") std::cout << kiln::format::to_json(g);
    else {
      std::cerr << "unknown command " << cmd << "\n";
      return 2;
    }
  } catch (const kiln::Error& e) {
    std::cout << "error: " << e.what();
    return 1;
  }
  return 0;
}
