// kiln::modules: finding, loading and refusing Kiln's modules (kiln/config/modules.h). The two
// test modules are built beside this test (tests/config/CMakeLists.txt) under names no program
// asks for; module_dir points the loader at copies in a scratch folder.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "fixture.h"
#include "kiln/config/modules.h"

namespace config = kiln::config;
namespace fs = std::filesystem;
using kiln_test_util::contains;
using kiln_test_util::error_of;

namespace {
// A scratch folder named after the test, removed afterwards.
struct Scratch {
  fs::path dir;
  explicit Scratch(const std::string& name)
      : dir(fs::temp_directory_path() / ("kiln_modules_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
};

int call(const std::string& name) {
  using Entry = int (*)();
  return reinterpret_cast<Entry>(kiln::modules::entry(name, "kiln_test_entry", "a test"))();
}
}  // namespace

BOOST_FIXTURE_TEST_SUITE(modules, kiln_test::CleanConfig)

BOOST_AUTO_TEST_CASE(a_module_loads_once_from_module_dir) {
  Scratch s("load");
  fs::copy_file(KILN_TEST_MODULE_SAME_ABI, s.dir / "libkiln_test_fine.so");
  config::Patch p({{"module_dir", s.dir.string()}});
  BOOST_TEST(!kiln::modules::loaded("kiln_test_fine"));
  BOOST_TEST(call("kiln_test_fine") == 42);
  BOOST_TEST(kiln::modules::loaded("kiln_test_fine"));
  // Loaded once: the second call finds it even where module_dir no longer says so.
  config::Patch elsewhere({{"module_dir", (s.dir / "nothing").string()}});
  BOOST_TEST(call("kiln_test_fine") == 42);
  // A symbol the module lacks.
  const std::string e = error_of([] { kiln::modules::entry("kiln_test_fine", "no_such_entry", "a test"); });
  BOOST_TEST(contains(e, "libkiln_test_fine.so (a test) has no symbol no_such_entry"), e);
}

BOOST_AUTO_TEST_CASE(a_missing_module_names_every_folder_tried) {
  Scratch s("missing");
  config::Patch p({{"module_dir", s.dir.string()}});
  const std::string e = error_of([] { call("kiln_test_missing"); });
  BOOST_TEST(contains(e, "libkiln_test_missing.so (a test) could not be loaded; looked in:"), e);
  BOOST_TEST(contains(e, (s.dir / "libkiln_test_missing.so").string() + ": no such file"), e);
  BOOST_TEST(contains(e, "KILN_MODULE_DIR"), e);
  BOOST_TEST(!kiln::modules::loaded("kiln_test_missing"));
}

BOOST_AUTO_TEST_CASE(a_module_of_another_kiln_or_not_a_library_is_refused) {
  Scratch s("refused");
  config::Patch p({{"module_dir", s.dir.string()}});
  fs::copy_file(KILN_TEST_MODULE_OTHER_ABI, s.dir / "libkiln_test_other.so");
  std::string e = error_of([] { call("kiln_test_other"); });
  BOOST_TEST(contains(e, "libkiln_test_other.so (a test) was built by another Kiln (\"kiln modules 0, another compiler\""), e);
  BOOST_TEST(contains(e, "refused"), e);
  std::ofstream(s.dir / "libkiln_test_junk.so") << "not an ELF file";
  e = error_of([] { call("kiln_test_junk"); });
  BOOST_TEST(contains(e, "libkiln_test_junk.so (a test) could not be loaded: "), e);
  // Neither stays loaded, and a good copy put there later loads.
  BOOST_TEST(!kiln::modules::loaded("kiln_test_other"));
  fs::remove(s.dir / "libkiln_test_junk.so");
  fs::copy_file(KILN_TEST_MODULE_SAME_ABI, s.dir / "libkiln_test_junk.so");
  BOOST_TEST(call("kiln_test_junk") == 42);
}

BOOST_AUTO_TEST_SUITE_END()
