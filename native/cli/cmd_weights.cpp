// kiln weights: what a weights file holds (an ONNX model's initializers or a .safetensors file):
// one line per tensor (name, dtype, shape) and the totals; --save writes them as a .safetensors
// file (PyTorch's exporter names initializers as the module's state dict does, so an export's
// weights load into kiln::nn modules by torch's names; --strip-prefix drops a wrapper's prefix).
#include <iostream>

#include "commands.h"
#include "kiln/graph/error.h"
#include "kiln/safetensors/safetensors.h"

#if KILN_HAVE_ONNX
#include "kiln/onnx/onnx.h"
#endif

namespace kiln::cli {

const CommandSpec& weights_spec() {
  static const CommandSpec spec{
      "weights", "FILE",
      "Lists the tensors of an ONNX model's initializers or a .safetensors file; --save writes them as .safetensors.",
      "FILE ending in .safetensors is read as one; anything else as an ONNX model (its initializers,\n"
      "external data read). Each line: name, dtype, shape; then the count and bytes in all.",
      {{"--save", "OUT.safetensors", "write the tensors (and --strip-prefix's names) to this file"},
       {"--strip-prefix", "P", "drop P from the names that start with it (e.g. a wrapper's 'inner.')"},
       {"--quiet", "", "print only the totals"}}};
  return spec;
}

int cmd_weights(std::span<char* const> args) {
  const CommandSpec& spec = weights_spec();
  ParsedArgs a = parse_args(spec, args);
  if (a.help) {
    std::cout << command_help(spec);
    return 0;
  }
  const std::string path = a.positional.at(0);
  safetensors::Tensors file;
  if (path.size() >= 12 && path.compare(path.size() - 12, 12, ".safetensors") == 0) {
    file = safetensors::load(path);
  } else {
#if KILN_HAVE_ONNX
    file.tensors = onnx::initializers(path);
#else
    fail("kiln weights: ", path, " is not a .safetensors file, and this build has no ONNX frontend to read it");
#endif
  }
  if (a.has("--strip-prefix")) {
    const std::string prefix = a.get("--strip-prefix");
    safetensors::Tensors renamed;
    renamed.metadata = file.metadata;
    for (auto& [name, t] : file.tensors) {
      const std::string to = name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
      KILN_CHECK(!to.empty() && renamed.tensors.emplace(to, std::move(t)).second, "kiln weights: --strip-prefix '",
                 prefix, "' gives the name '", to, "' to two tensors or none");
    }
    file = std::move(renamed);
  }
  int64_t count = 0, bytes = 0;
  for (const auto& [name, t] : file.tensors) {
    count += t.numel();
    bytes += t.numel() * dtype_size(t.dtype);
    if (!a.has("--quiet")) {
      std::cout << name << "  " << dtype_name(t.dtype) << " [";
      for (size_t k = 0; k < t.sizes.size(); ++k) std::cout << (k ? ", " : "") << t.sizes[k];
      std::cout << "]\n";
    }
  }
  std::cout << file.tensors.size() << " tensors, " << count << " values, " << bytes << " bytes\n";
  if (a.has("--save")) {
    safetensors::save(file, a.get("--save"));
    std::cout << "saved " << a.get("--save") << "\n";
  }
  return 0;
}

}  // namespace kiln::cli
