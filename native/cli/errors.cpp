#include "errors.h"

#include <new>
#include <string>
#include <string_view>

#include "args.h"
#include "kiln/graph/error.h"

namespace kiln::cli {

int report_exception(std::exception_ptr e, std::ostream& err) {
  try {
    std::rethrow_exception(e);
  } catch (const UsageError& u) {
    err << u.what() << "\n";
    return kExitUsage;
  } catch (const Error& k) {
    err << "kiln: error: " << k.what() << "\n";
    return kExitError;
  } catch (const std::bad_alloc&) {
    err << "kiln: error: out of memory\n";
    return kExitError;
  } catch (const std::exception& x) {
    // kiln::InternalError (its message starts "internal error: ", said once here), or a
    // standard exception (std::out_of_range, say) no stage turned into a kiln::Error.
    constexpr std::string_view prefix = "internal error: ";
    std::string what = x.what();
    if (what.starts_with(prefix)) what.erase(0, prefix.size());
    err << "kiln: internal error (a bug in Kiln, please report it): " << what << "\n";
    return kExitInternal;
  } catch (...) {
    err << "kiln: internal error (a bug in Kiln, please report it): an exception that is not a std::exception\n";
    return kExitInternal;
  }
}

}  // namespace kiln::cli
