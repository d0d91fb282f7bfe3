// native/cli/errors: the message and exit status the `kiln` tool gives for each kind of
// exception a command throws (a bug in Kiln: 70 and "please report it").
#define BOOST_TEST_MODULE cli_errors
#include <boost/test/unit_test.hpp>

#include <sstream>
#include <stdexcept>
#include <string>

#include "../../native/cli/args.h"
#include "../../native/cli/errors.h"
#include "kiln/graph/error.h"

namespace {

struct Report {
  int status;
  std::string text;
};

template <class F>
Report report(F&& throws) {
  std::ostringstream err;
  try {
    throws();
  } catch (...) {
    const int status = kiln::cli::report_exception(std::current_exception(), err);
    return {status, err.str()};
  }
  BOOST_FAIL("no exception");
  return {};
}

}  // namespace

BOOST_AUTO_TEST_CASE(each_kind_of_exception) {
  Report r = report([] { throw kiln::cli::UsageError("kiln run: give --inputs or --random"); });
  BOOST_TEST(r.status == 2);
  BOOST_TEST(r.text == "kiln run: give --inputs or --random\n");

  r = report([] { kiln::fail("cannot open graph file 'x.json'"); });
  BOOST_TEST(r.status == 1);
  BOOST_TEST(r.text == "kiln: error: cannot open graph file 'x.json'\n");

  r = report([] { KILN_INTERNAL_CHECK(2 + 2 == 5, "buffer b", 3, " is never written"); });
  BOOST_TEST(r.status == 70);
  BOOST_TEST(r.text.starts_with("kiln: internal error (a bug in Kiln, please report it): tests/cli/test_cli_errors.cpp:"),
             r.text);
  BOOST_TEST(r.text.find("check `2 + 2 == 5` failed: buffer b3 is never written (this is a bug in Kiln)\n") !=
                 std::string::npos,
             r.text);

  // A standard exception that no stage turned into a kiln::Error is a bug too.
  r = report([] { throw std::out_of_range("vector::_M_range_check"); });
  BOOST_TEST(r.status == 70);
  BOOST_TEST(r.text == "kiln: internal error (a bug in Kiln, please report it): vector::_M_range_check\n");

  r = report([] { throw std::bad_alloc(); });
  BOOST_TEST(r.status == 1);
  BOOST_TEST(r.text == "kiln: error: out of memory\n");

  r = report([] { throw 42; });
  BOOST_TEST(r.status == 70);
}
