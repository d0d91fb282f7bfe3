// The ONNX node conformance runner: loads every test case of the ONNX backend test data
// (Debian libonnx-testdata: <dir>/test_*/model.onnx + test_data_set_*/input_N.pb, output_N.pb),
// runs it on one target and compares with rtol 1e-3, atol 1e-7 (NaN matches NaN).
//
//   onnx_conformance --target reference|cpu|vulkan|cuda [--data DIR] [--unsupported FILE]
//                    [--filter SUBSTRING] [--shard I/N] [--write-unsupported FILE] [--verbose]
//
// Cases listed in the unsupported file (one per line: `name: reason`, or `name [targets]: reason`
// for a reason that holds on some targets only) are counted as unsupported; any other case that
// does not pass fails the run. Every case runs inside try/catch: a kiln::Error or any other
// exception is that case's result, never the end of the run. A target without a device
// (vulkan, cuda) prints why and exits 0 with everything skipped.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/compile.h"
#include "kiln/graph/error.h"
#include "kiln/onnx/onnx.h"
#include "kiln/eval/interpreter.h"
#include "kiln/tensor.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

struct Listed {
  std::string reason;
  std::set<std::string> targets;  // empty: every target
};

std::map<std::string, Listed> read_unsupported(const std::string& path) {
  std::map<std::string, Listed> out;
  if (path.empty()) return out;
  std::ifstream f(path);
  KILN_CHECK(f.good(), "cannot open the unsupported-cases file '", path, "'");
  std::string line;
  int no = 0;
  while (std::getline(f, line)) {
    ++no;
    if (line.empty() || line[0] == '#') continue;
    const size_t colon = line.find(':');
    KILN_CHECK(colon != std::string::npos, path, ":", no, ": expected 'name: reason'");
    std::string head = line.substr(0, colon);
    Listed l;
    l.reason = line.substr(colon + 1);
    while (!l.reason.empty() && l.reason[0] == ' ') l.reason.erase(0, 1);
    const size_t br = head.find('[');
    if (br != std::string::npos) {
      std::string ts = head.substr(br + 1, head.find(']') - br - 1);
      std::stringstream ss(ts);
      std::string t;
      while (std::getline(ss, t, ',')) l.targets.insert(t);
      head = head.substr(0, br);
    }
    while (!head.empty() && head.back() == ' ') head.pop_back();
    KILN_CHECK(!out.count(head), path, ":", no, ": case '", head, "' is listed twice");
    out[head] = l;
  }
  return out;
}

double value_at(const TensorData& t, int64_t k) {
  switch (t.dtype) {
    case DType::bool_: return t.data_as<uint8_t>()[k];
    case DType::i32: return t.data_as<int32_t>()[k];
    case DType::i64: return static_cast<double>(t.data_as<int64_t>()[k]);
    case DType::f16: return half_bits_to_float(t.data_as<uint16_t>()[k]);
    case DType::bf16: return bf16_bits_to_float(t.data_as<uint16_t>()[k]);
    case DType::f32: return t.data_as<float>()[k];
    case DType::f64: return t.data_as<double>()[k];
  }
  return 0;
}

std::string sizes_str(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t k = 0; k < s.size(); ++k) o += (k ? ", " : "") + std::to_string(s[k]);
  return o + "]";
}

// "" when `got` matches `want` (rtol 1e-3, atol 1e-7; integers and bools exactly).
std::string compare(const TensorData& got_any, const TensorData& want, size_t index) {
  const std::string what = "output " + std::to_string(index);
  if (got_any.dtype != want.dtype)
    return what + " has dtype " + std::string(dtype_name(got_any.dtype)) + ", expected " +
           std::string(dtype_name(want.dtype));
  if (got_any.sizes != want.sizes)
    return what + " has shape " + sizes_str(got_any.sizes) + ", expected " + sizes_str(want.sizes);
  const TensorData got = eval::contiguous(got_any);
  int64_t bad = 0, first = -1;
  for (int64_t k = 0; k < want.numel(); ++k) {
    const double g = value_at(got, k), w = value_at(want, k);
    const bool ok = (std::isnan(g) && std::isnan(w)) || g == w || std::abs(g - w) <= 1e-7 + 1e-3 * std::abs(w);
    if (!ok && bad++ == 0) first = k;
  }
  if (!bad) return "";
  std::ostringstream s;
  s << what << ": " << bad << " of " << want.numel() << " elements differ, first at " << first << ": got "
    << value_at(got, first) << ", expected " << value_at(want, first);
  return s.str();
}

std::vector<std::string> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<std::string> out;
  for (int k = 0;; ++k) {
    const fs::path p = dir / (prefix + std::to_string(k) + ".pb");
    if (!fs::exists(p)) break;
    out.push_back(p.string());
  }
  return out;
}

struct Runner {
  std::string target;
  Device device = Device::cpu();

  TensorData to_device(const TensorData& t) const {
    return device == Device::cpu() ? t : Tensor::from_data(t).to(device).data();
  }
  TensorData to_host(const TensorData& t) const {
    return t.device() == Device::cpu() ? t : Tensor::from_data(t).to(Device::cpu()).data();
  }

  // Imports the model; with `inputs`, dynamic dims take their sizes as examples and inputs whose
  // values the import needs are bound to them (as kiln::onnx::compile does).
  static onnx::Model load(const std::string& path, onnx::LoadOptions& lo, const std::vector<TensorData>& inputs) {
    if (!inputs.empty()) {
      const std::vector<std::string> names = onnx::input_names(path);
      for (size_t k = 0; k < std::min(inputs.size(), names.size()); ++k) {
        lo.example_sizes[names[k]] = inputs[k].sizes;
        if (lo.constant_inputs.count(names[k])) lo.constant_inputs[names[k]] = inputs[k];
      }
    }
    for (;;) {
      try {
        return onnx::load(path, lo);
      } catch (const onnx::InputValueNeeded& e) {
        if (inputs.empty() && !lo.constant_inputs.count(e.input)) {
          lo.constant_inputs[e.input] = TensorData();  // bound once the test data is read
          return onnx::Model();
        }
        const std::vector<std::string> names = onnx::input_names(path);
        const auto at = std::find(names.begin(), names.end(), e.input);
        if (at == names.end() || static_cast<size_t>(at - names.begin()) >= inputs.size() ||
            (lo.constant_inputs.count(e.input) && lo.constant_inputs[e.input].storage))
          throw;
        lo.constant_inputs[e.input] = inputs[static_cast<size_t>(at - names.begin())];
      }
    }
  }

  // Runs one test case; returns "" on a pass, else what went wrong.
  std::string run_case(const fs::path& dir) const {
    const std::string model_path = (dir / "model.onnx").string();
    std::vector<fs::path> sets;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
    std::sort(sets.begin(), sets.end());
    if (sets.empty()) return "no test_data_set_* directory";
    onnx::LoadOptions lo;
    lo.device = device;
    onnx::Model m = load(model_path, lo, {});  // errors of the model come before those of its data
    for (const fs::path& set : sets) {
      std::vector<TensorData> inputs, expected;
      for (const std::string& p : numbered(set, "input_")) inputs.push_back(onnx::load_tensor(p));
      for (const std::string& p : numbered(set, "output_")) expected.push_back(onnx::load_tensor(p));
      if (!m.graph.shapes().empty() || set != sets.front() || !lo.constant_inputs.empty()) m = load(model_path, lo, inputs);
      if (inputs.size() != m.input_names.size())
        return "the test data has " + std::to_string(inputs.size()) + " inputs, the model " +
               std::to_string(m.input_names.size());
      if (expected.size() != m.output_names.size())
        return "the test data has " + std::to_string(expected.size()) + " outputs, the model " +
               std::to_string(m.output_names.size());
      std::vector<TensorData> outputs;
      if (target == "reference") {
        outputs = eval::run_graph(m.graph, inputs);
      } else {
        std::vector<TensorMeta> metas;
        for (NodeId i : m.graph.inputs()) metas.push_back(m.graph.node(i).meta);
        const Executable exe = BackendRegistry::get("kiln")(m.graph, metas);
        std::vector<TensorData> args;
        for (const TensorData& t : inputs) args.push_back(to_device(t));
        for (const TensorData& t : m.parameters) args.push_back(to_device(t));
        std::vector<const TensorData*> ptrs;
        for (const TensorData& t : args) ptrs.push_back(&t);
        for (const TensorData& t : exe(ptrs)) outputs.push_back(to_host(t));
      }
      for (size_t k = 0; k < expected.size(); ++k) {
        const std::string d = compare(outputs.at(k), expected[k], k);
        if (!d.empty()) return "wrong result: " + d;
      }
    }
    return "";
  }
};

// The first line of an error, without the model path (the case name says it).
std::string short_reason(std::string s) {
  const size_t nl = s.find('\n');
  if (nl != std::string::npos) s = s.substr(0, nl);
  const size_t at = s.find("model.onnx: ");
  if (at != std::string::npos) s = s.substr(at + 12);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string data = KILN_ONNX_NODE_DATA, unsupported_path, target = "reference", filter, write_path;
  int shard = 0, shards = 1;
  bool verbose = false;
  for (int k = 1; k < argc; ++k) {
    const std::string a = argv[k];
    auto next = [&]() -> std::string {
      if (k + 1 >= argc) {
        std::cerr << "onnx_conformance: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++k];
    };
    if (a == "--data") data = next();
    else if (a == "--unsupported") unsupported_path = next();
    else if (a == "--target") target = next();
    else if (a == "--filter") filter = next();
    else if (a == "--write-unsupported") write_path = next();
    else if (a == "--verbose" || a == "-v") verbose = true;
    else if (a == "--shard") {
      const std::string s = next();
      if (std::sscanf(s.c_str(), "%d/%d", &shard, &shards) != 2 || shards < 1 || shard < 0 || shard >= shards) {
        std::cerr << "onnx_conformance: --shard takes I/N with 0 <= I < N\n";
        return 2;
      }
    } else {
      std::cerr << "onnx_conformance: unknown argument '" << a << "' (see the comment at the top of "
                << "tests/onnx/onnx_conformance.cpp)\n";
      return 2;
    }
  }
  std::map<std::string, Listed> listed;
  try {
    listed = read_unsupported(unsupported_path);
  } catch (const Error& e) {
    std::cerr << "onnx_conformance: " << e.what() << "\n";
    return 2;
  }
  Runner r{target};
  if (target == "vulkan" || target == "cuda") {
    r.device = target == "vulkan" ? Device::vulkan(0) : Device::cuda(0);
    try {
      (void)Tensor::from_data(TensorData::empty_host(DType::f32, {1})).to(r.device);
    } catch (const Error& e) {
      std::cout << "onnx conformance [" << target << "]: skipped, " << e.what() << "\n";
      return 0;
    }
  } else if (target != "reference" && target != "cpu") {
    std::cerr << "onnx_conformance: --target must be reference, cpu, vulkan or cuda\n";
    return 2;
  }
  list_backends();

  std::vector<fs::path> cases;
  if (!fs::is_directory(data)) {
    std::cerr << "onnx_conformance: no test data directory '" << data << "' (Debian: libonnx-testdata)\n";
    return 2;
  }
  for (const auto& e : fs::directory_iterator(data))
    if (e.is_directory() && fs::exists(e.path() / "model.onnx")) cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  const size_t total_cases = cases.size();

  int passed = 0, failed = 0, unsupported = 0, stale = 0, considered = 0;
  std::vector<std::pair<std::string, std::string>> failures, still_unsupported;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string name = cases[i].filename().string();
    if (!filter.empty() && name.find(filter) == std::string::npos) continue;
    if (static_cast<int>(i % static_cast<size_t>(shards)) != shard) continue;
    ++considered;
    const auto it = listed.find(name);
    const bool is_listed = it != listed.end() && (it->second.targets.empty() || it->second.targets.count(target));
    std::string result;
    const auto c0 = std::chrono::steady_clock::now();
    try {
      result = r.run_case(cases[i]);
    } catch (const Error& e) {
      result = short_reason(e.what());
    } catch (const std::exception& e) {
      result = std::string("exception: ") + e.what();
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count();
    if (verbose)
      std::cout << (result.empty() ? "PASS " : "FAIL ") << name << " (" << static_cast<int>(ms) << " ms)"
                << (result.empty() ? "" : ": " + result) << "\n";
    if (result.empty()) {
      ++passed;
      if (is_listed) {
        ++stale;
        std::cout << "note: " << name << " is listed as unsupported but passes on " << target << "\n";
      }
    } else if (is_listed) {
      ++unsupported;
      still_unsupported.push_back({name, it->second.reason});
    } else {
      ++failed;
      failures.push_back({name, result});
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const auto& [name, why] : failures) std::cout << "FAILED " << name << ": " << why << "\n";
  if (!write_path.empty()) {
    // The failures with their reasons, merged with the entries that still hold (to edit by hand).
    std::map<std::string, std::string> merged;
    for (const auto& [name, l] : listed) {
      std::string head = name;
      if (!l.targets.empty()) {
        head += " [";
        for (const std::string& t : l.targets) head += (head.back() == '[' ? "" : ",") + t;
        head += "]";
      }
      merged[head] = l.reason;
    }
    for (const auto& [name, why] : failures) merged[name] = why;
    std::ofstream f(write_path);
    for (const auto& [name, why] : merged) f << name << ": " << why << "\n";
  }
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.1f%%", considered ? 100.0 * passed / considered : 0.0);
  std::cout << "onnx conformance [" << target << "]: " << passed << " passed, " << failed << " failed, " << unsupported
            << " unsupported of " << considered << " cases (" << total_cases << " in the suite";
  if (shards > 1) std::cout << ", shard " << shard << "/" << shards;
  std::cout << "), pass rate " << rate;
  if (stale) std::cout << ", " << stale << " listed cases pass";
  std::cout << " (" << static_cast<int>(secs) << " s)\n";
  return failed ? 1 : 0;
}
