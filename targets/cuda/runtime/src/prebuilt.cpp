// Lookup of the images prebuilt with the library (prebuilt.h).
#include "prebuilt.h"

namespace kiln::cuda::detail {

const PrebuiltImage* find_prebuilt(std::string_view source, int arch) {
  const PrebuiltImage* best = nullptr;
  for (const PrebuiltImage& p : prebuilt_images())
    if (p.arch <= arch && p.arch / 10 == arch / 10 && (!best || p.arch > best->arch) && p.source == source) best = &p;
  return best;
}

}  // namespace kiln::cuda::detail
