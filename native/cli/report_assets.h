// The page `kiln report` writes, from native/cli/report/ (report.html with its markers, report.css,
// report.js), built into the tool by native/CMakeLists.txt (report_assets.cpp is generated).
#pragma once

#include <string_view>

namespace kiln::cli::report_assets {

std::string_view html();
std::string_view css();
std::string_view js();

}  // namespace kiln::cli::report_assets
