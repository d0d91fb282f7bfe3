// kiln report: one self-contained HTML compile report, as tlparse makes for torch.compile. Of a
// debug directory (a program run with KILN_DEBUG_DIR=DIR: every compile of every compiled
// function, why it happened, its graph breaks, guards and timings), or of one graph or model file
// compiled for a target. Each compile's passes, fusion decisions, kernels and plan come from the
// inspector's compile report (web/src/core: the same code the browser page runs), made again
// here from the captured graph under the options and device request the plan recorded; the report
// says whether that plan is the one the program compiled.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "../../web/src/core.h"
#include "commands.h"
#include "model_files.h"
#include "report_assets.h"
#include "kiln/cache/cache.h"
#include "kiln/config/config.h"
#include "kiln/format/graph_json.h"
#include "kiln/graph/device.h"
#include "kiln/graph/error.h"
#include "kiln/graph/files.h"
#include "kiln/plan/plan_json.h"

namespace kiln::cli {

namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

const CommandSpec& spec() {
  static const CommandSpec s{
      "report",
      "DIR|GRAPH.json|MODEL.onnx",
      "Writes one self-contained HTML compile report (graphs before and after the passes, graph breaks,\n"
      "recompiles with their reasons, guards, fusion decisions, kernels with their code, the plan, timings).",
      "DIR is a debug directory: run a program with KILN_DEBUG_DIR=DIR (every graph its compiled functions\n"
      "compile is dumped there, docs/config.md) and report it. A graph or model file is compiled for --target\n"
      "(default cpu) as `kiln show` compiles it. The report opens offline in any browser.",
      {{"--out", "FILE", "the HTML file to write (default kiln-report.html)"},
       {"--json", "FILE", "also write the report's data as JSON (kiln.report version 1)"},
       {"--target", "NAME", "for a graph or model file: the target to compile for (cpu, cuda, vulkan)"},
       {"--mode", "MODE", "for a graph or model file: the compile mode (default, reduce-overhead, max-autotune, ...)"}}};
  return s;
}

json parse_json(const std::string& text) { return json::parse(text, nullptr, /*allow_exceptions=*/false); }

std::string now_iso() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The inspector's compile report of `g` under `r`, as a JSON object, without the bulk a reader
// does not read: the plan's JSON (its text is there; plan_check below compares the JSON) and the
// bytes of big constants in the three graphs (weights a function captured), which a report would
// otherwise hold three times over.
json report_of(const Graph& g, const web::Request& r, std::string* plan_json = nullptr) {
  constexpr size_t kMaxInlineBase64 = 4096;
  json report = parse_json(web::compile_report(g, r));
  KILN_CHECK(report.is_object(), "kiln report: the compile report is not JSON (a bug)");
  if (plan_json) *plan_json = report["plan"].get<std::string>();
  report.erase("plan");
  for (const char* view : {"input", "optimized", "scheduled"}) {
    if (!report.contains(view) || !report[view].contains("nodes")) continue;
    for (json& node : report[view]["nodes"]) {
      if (!node.contains("attrs") || !node["attrs"].is_object()) continue;
      for (auto& [name, attr] : node["attrs"].items()) {
        if (!attr.is_object() || !attr.contains("data_base64") || !attr["data_base64"].is_string()) continue;
        const std::string& b64 = attr["data_base64"].get_ref<const std::string&>();
        if (b64.size() <= kMaxInlineBase64) continue;
        const size_t padding = b64.size() - b64.find_last_not_of('=') - 1;
        const size_t bytes = b64.size() / 4 * 3 - padding;
        attr["data_base64"] = "";
        attr["data_elided_bytes"] = bytes;
      }
    }
  }
  return report;
}

// One compile of a debug directory: compile.json, the captured graph and the plan the program made.
json dumped_compile(const fs::path& dir, const json& event) {
  json c = {{"kind", event.value("kind", "first")},
            {"reason", event.contains("reason") ? event["reason"] : json()},
            {"graph_breaks", event.value("graph_breaks", json::array())},
            {"target", ""},
            {"mode", event.value("mode", "default")},
            {"backend", event.value("backend", "")},
            {"timing_ms", event.value("timing_ms", json::object())},
            {"guards", event.value("guards", json::array())},
            {"sources", event.value("sources", json::array())},  // node -> the program's line that traced it
            {"report", json()}};
  if (event.contains("sources_recorded")) c["sources_recorded"] = event["sources_recorded"];
  if (event.contains("segment") && event["segment"].is_number_integer() && event["segment"].get<int64_t>() >= 0)
    c["segment"] = event["segment"];
  try {
    const std::string where = (dir / "graph.json").string();
    const Graph g = format::from_json(read_regular_file(where, "captured graph"), where);
    if (!fs::exists(dir / "plan.json")) {
      c["error"] = "no kernel plan was compiled for this graph (backend '" + c["backend"].get<std::string>() +
                   "', or it ran on the reference interpreter: inputs on no device with a target, or empty)";
      return c;
    }
    const std::string plan_path = (dir / "plan.json").string();
    const plan::KernelPlan made = plan::plan_from_json(read_regular_file(plan_path, "kernel plan"), plan_path);
    web::Request r;
    r.target = made.target;
    r.mode = c["mode"].get<std::string>();
    for (const auto& [name, text] : made.origin.options) r.options[name] = config::parse_value(name, text);
    r.device_request = made.origin.request;
    c["target"] = r.target;
    c["device_request"] = r.device_request;  // the device the plan was made for (a CUDA arch)
    std::string plan_json;
    json report = report_of(g, r, &plan_json);
    // The plan made here against the program's: the same unless this Kiln differs from the one
    // that ran the program.
    const plan::KernelPlan again = plan::plan_from_json(plan_json, "the report's plan");
    const std::string diff = plan::plan_difference(made, again);
    c["plan_check"] = diff.empty() ? "the plan made for this report is the one the program compiled"
                                   : "the plan made for this report differs from the program's at " + diff +
                                         " (plan.json in the dump is the program's)";
    c["report"] = std::move(report);
  } catch (const Error& e) {
    c["error"] = e.what();
  }
  return c;
}

// Every compile dumped under `dir`, in the order the program made them, grouped by function.
void add_debug_dir(const fs::path& dir, json& functions, json& compiles) {
  struct Dump {
    int64_t sequence;
    fs::path dir;
    json event;
  };
  std::vector<Dump> dumps;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (!e.is_directory() || !fs::exists(e.path() / "compile.json")) continue;
    json event = parse_json(read_regular_file((e.path() / "compile.json").string(), "compile record"));
    if (!event.is_object() || event.value("format", "") != "kiln.compile") {
      event = json{{"function", e.path().filename().string()},
                   {"error", "compile.json is not a kiln.compile record"}};
    }
    dumps.push_back({event.value("sequence", int64_t{0}), e.path(), std::move(event)});
  }
  KILN_CHECK(!dumps.empty(), "kiln report: ", dir.string(), " holds no compile dumps (directories with a compile.json); ",
             "run the program with KILN_DEBUG_DIR=", dir.string(), " first");
  std::sort(dumps.begin(), dumps.end(), [](const Dump& a, const Dump& b) { return a.sequence < b.sequence; });
  std::map<std::string, size_t> function_of;
  for (const Dump& d : dumps) {
    const std::string name = d.event.value("function", "?");
    auto [it, added] = function_of.emplace(name, functions.size());
    if (added) functions.push_back({{"name", name}, {"compiles", json::array()}, {"stats", ""}});
    json& f = functions[it->second];
    json c = d.event.contains("error") ? json{{"kind", "first"}, {"report", json()}, {"error", d.event["error"]}}
                                       : dumped_compile(d.dir, d.event);
    c["id"] = std::to_string(it->second) + "/" + std::to_string(f["compiles"].size());
    c["function"] = it->second;
    c["index"] = f["compiles"].size();
    c["dump"] = d.dir.filename().string();
    f["compiles"].push_back(compiles.size());
    f["stats"] = d.event.value("stats", "");  // as of the function's last compile (later calls not counted)
    compiles.push_back(std::move(c));
  }
}

// One graph or model file compiled for a target.
void add_file(const std::string& path, const ParsedArgs& a, json& functions, json& compiles) {
  web::Request r;
  r.target = a.has("--target") ? a.get("--target") : "cpu";
  r.mode = a.has("--mode") ? a.get("--mode") : "default";
  config::mode_options(r.mode);  // an unknown mode: the message listing them
  // Imported as kiln::onnx::compile imports a model: its weights are inputs on every target.
  const ModelFile model = load_model_file(path, {}, parse_device(r.target), /*weights_as_inputs=*/true);
  json c = {{"id", "0/0"},      {"function", 0},       {"index", 0},
            {"kind", "graph"},  {"reason", json()},    {"graph_breaks", json::array()},
            {"target", r.target}, {"mode", r.mode},    {"timing_ms", json::object()},
            {"guards", json::array()}, {"report", report_of(model.graph, r)}};
  c["guards"] = c["report"]["guards"];
  functions.push_back({{"name", path}, {"compiles", {0}}, {"stats", model.summary}});
  compiles.push_back(std::move(c));
}

// The page: report.html with its CSS, the data and its script put in (report_assets.h). `<` in
// the data is written as \u003c, so no string in it can end the script element holding it.
std::string html_page(const json& data) {
  std::string text = data.dump();
  std::string escaped;
  escaped.reserve(text.size() + text.size() / 64);
  for (char ch : text) {
    if (ch == '<') escaped += "\\u003c";
    else escaped += ch;
  }
  std::string page(report_assets::html());
  auto put = [&page](std::string_view marker, std::string_view value) {
    const size_t at = page.find(marker);
    KILN_CHECK(at != std::string::npos, "kiln report: the page template lacks ", marker, " (a bug)");
    page.replace(at, marker.size(), value);
  };
  put("/*@KILN_REPORT_CSS@*/", report_assets::css());
  put("/*@KILN_REPORT_JS@*/", report_assets::js());
  put("@KILN_REPORT_DATA@", escaped);  // last: the data may hold the other markers' text
  return page;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  f.close();
  KILN_CHECK(f.good(), "kiln report: cannot write ", path);
}

}  // namespace

const CommandSpec& report_spec() { return spec(); }

int cmd_report(std::span<char* const> args) {
  const ParsedArgs a = parse_args(spec(), args);
  if (a.help) {
    std::cout << command_help(spec());
    return 0;
  }
  const std::string source = a.positional[0];
  json functions = json::array(), compiles = json::array();
  if (fs::is_directory(source)) {
    if (a.has("--target") || a.has("--mode"))
      throw UsageError("kiln report: --target and --mode are for a graph or model file; a debug directory's compiles "
                       "keep their own");
    add_debug_dir(source, functions, compiles);
  } else {
    add_file(source, a, functions, compiles);
  }
  const json data = {{"format", "kiln.report"},
                     {"version", 1},
                     {"kiln_version", cache::kiln_version()},
                     {"created", now_iso()},
                     {"source", fs::is_directory(source) ? "debug directory " + source
                                                         : source + " for " + compiles[0]["target"].get<std::string>()},
                     {"functions", std::move(functions)},
                     {"compiles", std::move(compiles)}};
  const std::string out = a.has("--out") ? a.get("--out") : "kiln-report.html";
  write_file(out, html_page(data));
  if (a.has("--json")) write_file(a.get("--json"), data.dump(1));
  size_t failed = 0;
  for (const json& c : data["compiles"]) failed += c.contains("error") ? 1 : 0;
  std::cout << "wrote " << out << ": " << data["compiles"].size() << " compile" << (data["compiles"].size() == 1 ? "" : "s")
            << " of " << data["functions"].size() << " function" << (data["functions"].size() == 1 ? "" : "s");
  if (failed) std::cout << " (" << failed << " without a report: see each one's error)";
  std::cout << "\n";
  return 0;
}

}  // namespace kiln::cli
