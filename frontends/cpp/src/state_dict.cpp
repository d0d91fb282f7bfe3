// State dicts to and from .safetensors files, .npz archives and folders of .npy files
// (frontends/safetensors and frontends/npy do the formats).
#include "kiln/state_dict.h"

#include <filesystem>

#include "kiln/graph/error.h"
#include "kiln/npy/npz.h"
#include "kiln/safetensors/safetensors.h"

namespace kiln {

namespace {
std::string sizes_text(const std::vector<int64_t>& sizes) {
  std::string s = "[";
  for (size_t k = 0; k < sizes.size(); ++k) s += (k ? ", " : "") + std::to_string(sizes[k]);
  return s + "]";
}
}  // namespace

WeightsFormat weights_format(const std::string& path) {
  std::error_code ec;
  if (path.ends_with("/") || std::filesystem::is_directory(path, ec)) return WeightsFormat::npy_folder;
  if (path.ends_with(".npz")) return WeightsFormat::npz;
  return WeightsFormat::safetensors;
}

StateDict load_state_dict(const std::string& path, Device device) {
  std::map<std::string, TensorData> tensors;
  switch (weights_format(path)) {
    case WeightsFormat::npy_folder: tensors = npy::load_npy_folder(path); break;
    case WeightsFormat::npz: tensors = npy::load_npz(path); break;
    case WeightsFormat::safetensors: tensors = std::move(safetensors::load(path).tensors); break;
  }
  StateDict out;
  for (auto& [name, data] : tensors) {
    Tensor t = Tensor::from_data(std::move(data));
    out.emplace(name, device.type == DeviceType::cpu ? t : t.to(device));
  }
  return out;
}

void save_state_dict(const StateDict& state, const std::string& path,
                     const std::map<std::string, std::string>& metadata) {
  safetensors::Tensors file;
  file.metadata = metadata;
  for (const auto& [name, t] : state) {
    KILN_CHECK(t.defined(), "save_state_dict: tensor '", name, "' is undefined");
    KILN_CHECK(!t.is_traced(), "save_state_dict: tensor '", name,
               "' is being traced (inside a compiled function); save concrete tensors");
    file.tensors.emplace(name, t.to(Device::cpu()).data());
  }
  const WeightsFormat format = weights_format(path);
  KILN_CHECK(format == WeightsFormat::safetensors || metadata.empty(), "save_state_dict: '", path,
             "': metadata is kept only in .safetensors files");
  switch (format) {
    case WeightsFormat::npy_folder: npy::save_npy_folder(file.tensors, path); break;
    case WeightsFormat::npz: npy::save_npz(file.tensors, path); break;
    case WeightsFormat::safetensors: safetensors::save(file, path); break;
  }
}

Tensor take(const StateDict& state, const std::string& name, const std::vector<int64_t>& sizes,
            std::optional<DType> dtype) {
  auto it = state.find(name);
  if (it == state.end()) {
    std::string held;
    size_t shown = 0;
    for (const auto& entry : state) {
      if (shown++ == 8) {
        held += ", ...";
        break;
      }
      held += (held.empty() ? "" : ", ") + entry.first;
    }
    fail("state dict: no tensor '", name, "' among the ", state.size(), " held (", held.empty() ? "none" : held, ")");
  }
  const Tensor& t = it->second;
  std::vector<int64_t> got;
  for (int64_t d = 0; d < t.rank(); ++d) got.push_back(t.size(d));
  KILN_CHECK(got == sizes, "state dict: tensor '", name, "' has shape ", sizes_text(got), ", expected ",
             sizes_text(sizes));
  KILN_CHECK(!dtype || t.dtype() == *dtype, "state dict: tensor '", name, "' is ", dtype_name(t.dtype()),
             ", expected ", dtype_name(*dtype));
  return t;
}

}  // namespace kiln
