// State dicts: a model's parameters by name, read from and written to .safetensors files (the
// format Hugging Face models ship; frontends/safetensors), NumPy .npz archives (np.savez) and
// folders of NAME.npy files (frontends/npy): the format follows the path (a folder or a path
// ending in '/', a name ending in .npz, else .safetensors). NumPy has no bfloat16: .npy and .npz
// keep bf16 tensors as f32 (exact), so they load as f32.
// load_state_dict gives each tensor on `device`; save_state_dict writes host copies. take()
// fetches one parameter for a model struct, checking its shape (and dtype) so that a missing or
// mis-shaped tensor is an error naming it, not a wrong result later.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "kiln/tensor.h"

namespace kiln {

using StateDict = std::map<std::string, Tensor>;

// The format `path` names: a folder (or a path ending in '/') of .npy files, a .npz archive,
// else .safetensors (kiln weights chooses by it too).
enum class WeightsFormat { safetensors, npz, npy_folder };
WeightsFormat weights_format(const std::string& path);

StateDict load_state_dict(const std::string& path, Device device = Device::cpu());
// `metadata` goes to a .safetensors file's "__metadata__" (Hugging Face writes {"format": "pt"});
// the other formats have no place for it (an error when it is given).
void save_state_dict(const StateDict& state, const std::string& path,
                     const std::map<std::string, std::string>& metadata = {});

// state[name], which must have `sizes` (and `dtype`, when given): a kiln::Error naming the
// tensor, what it is and what was expected otherwise.
Tensor take(const StateDict& state, const std::string& name, const std::vector<int64_t>& sizes,
            std::optional<DType> dtype = std::nullopt);

}  // namespace kiln
