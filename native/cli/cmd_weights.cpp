// kiln weights: what a weights file holds (an ONNX model's initializers, a .safetensors file, a
// NumPy .npz archive or a folder of .npy files): one line per tensor (name, dtype, shape) and the
// totals; --save writes them as .safetensors, .npz or a .npy folder, chosen by the path as
// kiln::load_state_dict chooses (PyTorch's exporter names initializers as the module's state
// dict does, so an export's weights load into kiln::nn modules by torch's names;
// --strip-prefix drops a wrapper's prefix).
#include <iostream>

#include "commands.h"
#include "kiln/graph/error.h"
#include "kiln/npy/npz.h"
#include "kiln/safetensors/safetensors.h"
#include "kiln/state_dict.h"

#if KILN_HAVE_ONNX
#include "kiln/onnx/onnx.h"
#endif

namespace kiln::cli {

const CommandSpec& weights_spec() {
  static const CommandSpec spec{
      "weights", "FILE",
      "Lists the tensors of an ONNX model's initializers, a .safetensors or .npz file or a folder of .npy files; --save writes them.",
      "FILE ending in .safetensors or .npz is read as one, a folder as NAME.npy files; anything else\n"
      "as an ONNX model (its initializers, external data read). Each line: name, dtype, shape; then\n"
      "the count and bytes in all.",
      {{"--save", "OUT", "write the tensors (and --strip-prefix's names): OUT.npz, a folder OUT/ of .npy files, else .safetensors"},
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
  const WeightsFormat format = weights_format(path);
  if (format == WeightsFormat::npz) {
    file.tensors = npy::load_npz(path);
  } else if (format == WeightsFormat::npy_folder) {
    file.tensors = npy::load_npy_folder(path);
  } else if (path.ends_with(".safetensors")) {
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
    const std::string out = a.get("--save");
    switch (weights_format(out)) {
      case WeightsFormat::npz: npy::save_npz(file.tensors, out); break;
      case WeightsFormat::npy_folder: npy::save_npy_folder(file.tensors, out); break;
      case WeightsFormat::safetensors: safetensors::save(file, out); break;
    }
    std::cout << "saved " << a.get("--save") << "\n";
  }
  return 0;
}

}  // namespace kiln::cli
