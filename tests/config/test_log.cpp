// kiln::logs: category parsing, prefixes, the sink, KILN_LOGS and KILN_LOG_FILE.
#include <kiln/config/log.h>

#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace logs = kiln::logs;
using logs::Category;

namespace {

// Captures everything written while alive; restores categories and destination afterwards.
struct Capture {
  std::vector<std::string> blocks;
  Capture() {
    ::unsetenv("KILN_LOGS");
    ::unsetenv("KILN_LOG_FILE");
    logs::reset_for_testing();
    logs::set_sink_for_testing([this](std::string_view s) { blocks.emplace_back(s); });
  }
  ~Capture() {
    logs::set_sink_for_testing({});
    ::unsetenv("KILN_LOGS");
    ::unsetenv("KILN_LOG_FILE");
    logs::reset_for_testing();
  }
  std::string all() const {
    std::string out;
    for (const auto& b : blocks) out += b;
    return out;
  }
};

const Category kAll[] = {Category::graph,       Category::guards,   Category::recompiles,
                         Category::graph_breaks, Category::schedule, Category::fusion,
                         Category::output_code,  Category::cache,    Category::perf_hints,
                         Category::dynamic};

int evaluations = 0;
int counted(int v) {
  ++evaluations;
  return v;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(logging, Capture)

BOOST_AUTO_TEST_CASE(category_list) {
  logs::set_categories_for_testing("graph, guards");
  BOOST_TEST(logs::enabled(Category::graph));
  BOOST_TEST(logs::enabled(Category::guards));
  BOOST_TEST(!logs::enabled(Category::fusion));
  BOOST_TEST(!logs::enabled(Category::graph_breaks));  // not a prefix match
  BOOST_TEST(blocks.empty());
}

BOOST_AUTO_TEST_CASE(all_forms) {
  for (const char* spec : {"all", "+all", " +all "}) {
    BOOST_TEST_CONTEXT("spec " << spec) {
      logs::set_categories_for_testing(spec);
      for (Category c : kAll) BOOST_TEST(logs::enabled(c));
    }
  }
  // profile changes how plans run (each kernel timed alone): only when named.
  logs::set_categories_for_testing("all");
  BOOST_TEST(!logs::enabled(Category::profile));
  logs::set_categories_for_testing("all,profile");
  BOOST_TEST(logs::enabled(Category::profile));
  BOOST_TEST(logs::category_name(Category::profile) == "profile");
  logs::set_categories_for_testing("all,-output_code");
  BOOST_TEST(!logs::enabled(Category::output_code));
  BOOST_TEST(logs::enabled(Category::dynamic));
  logs::set_categories_for_testing("");
  for (Category c : kAll) BOOST_TEST(!logs::enabled(c));
  BOOST_TEST(blocks.empty());
}

BOOST_AUTO_TEST_CASE(unknown_category_warns_once_and_keeps_the_rest) {
  logs::set_categories_for_testing("graph,bogus,+nope");
  BOOST_TEST(logs::enabled(Category::graph));
  BOOST_REQUIRE(blocks.size() == 1u);
  const std::string& w = blocks[0];
  BOOST_TEST(w ==
             "[kiln warning] log categories: unknown log categories 'bogus', 'nope'; valid "
             "categories are all, graph, guards, recompiles, graph_breaks, schedule, fusion, "
             "output_code, cache, perf_hints, dynamic, partition, profile.\n");
}

BOOST_AUTO_TEST_CASE(write_prefixes_every_line) {
  logs::write(Category::graph_breaks, "first\nsecond\n");
  logs::write(Category::cache, "one line");
  logs::warn("careful\nreally");
  BOOST_REQUIRE(blocks.size() == 3u);
  BOOST_TEST(blocks[0] == "[kiln:graph_breaks] first\n[kiln:graph_breaks] second\n");
  BOOST_TEST(blocks[1] == "[kiln:cache] one line\n");
  BOOST_TEST(blocks[2] == "[kiln warning] careful\n[kiln warning] really\n");
}

BOOST_AUTO_TEST_CASE(macro_formats_only_when_enabled) {
  logs::set_categories_for_testing("recompiles");
  evaluations = 0;
  KILN_LOG(fusion, "never ", counted(1));
  BOOST_TEST(evaluations == 0);
  BOOST_TEST(blocks.empty());
  KILN_LOG(recompiles, "limit ", counted(8), " hit");
  BOOST_TEST(evaluations == 1);
  BOOST_TEST(all() == "[kiln:recompiles] limit 8 hit\n");
}

BOOST_AUTO_TEST_CASE(category_names) {
  BOOST_TEST(logs::category_name(Category::perf_hints) == "perf_hints");
  BOOST_TEST(logs::category_name(Category::dynamic) == "dynamic");
}

BOOST_AUTO_TEST_CASE(kiln_logs_env_is_read_on_first_use) {
  ::setenv("KILN_LOGS", "dynamic,schedul", 1);
  logs::reset_for_testing();
  BOOST_TEST(blocks.empty());  // nothing read yet
  BOOST_TEST(!logs::enabled(Category::graph));
  BOOST_TEST(logs::enabled(Category::dynamic));
  BOOST_TEST(!logs::enabled(Category::schedule));
  BOOST_REQUIRE(blocks.size() == 1u);  // one warning, not one per enabled() call
  BOOST_TEST(blocks[0].rfind("[kiln warning] KILN_LOGS: unknown log category 'schedul'; valid "
                             "categories are all, graph,", 0) == 0);
}

BOOST_AUTO_TEST_CASE(log_file_is_appended) {
  std::string path = (std::filesystem::temp_directory_path() / "kiln_test_log_file.txt").string();
  {
    std::ofstream pre(path, std::ios::trunc);
    pre << "existing\n";
  }
  logs::set_sink_for_testing({});
  ::setenv("KILN_LOG_FILE", path.c_str(), 1);
  ::setenv("KILN_LOGS", "cache", 1);
  logs::reset_for_testing();
  KILN_LOG(cache, "hit ", 3);
  KILN_LOG(graph, "not shown");
  logs::warn("w");
  logs::reset_for_testing();  // closes the file
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  BOOST_TEST(text.str() == "existing\n[kiln:cache] hit 3\n[kiln warning] w\n");
  std::remove(path.c_str());
}

BOOST_AUTO_TEST_SUITE_END()
