// The sample graphs of samples/graphs load, and re-serialise to exactly the committed bytes.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "helpers.h"

using namespace kiln;

BOOST_AUTO_TEST_SUITE(samples)

BOOST_AUTO_TEST_CASE(sample_graphs_load_and_reserialise) {
  const std::filesystem::path dir = KILN_SAMPLE_GRAPHS_DIR;
  for (const char* name : {"mlp.json", "softmax.json", "layernorm.json", "transformer_block.json",
                           "dynamic_softmax.json"}) {
    BOOST_TEST_CONTEXT(name) {
      const std::string path = (dir / name).string();
      std::ifstream in(path, std::ios::binary);
      BOOST_REQUIRE_MESSAGE(in, "cannot open " << path);
      std::stringstream buf;
      buf << in.rdbuf();
      Graph g;
      try {
        g = format::load_graph(path);
      } catch (const Error& e) {
        BOOST_ERROR(e.what());
        continue;
      }
      BOOST_TEST(!g.outputs().empty());
      BOOST_TEST(format::to_json(g) + "\n" == buf.str());
    }
  }
  // The dynamic sample keeps its symbolic batch size.
  const Graph d = format::load_graph((dir / "dynamic_softmax.json").string());
  BOOST_TEST(d.shapes().symbols().size() == 1u);
  BOOST_TEST(d.node(d.outputs()[0]).meta.str() == "f32[s0, 16]");
}

BOOST_AUTO_TEST_SUITE_END()
