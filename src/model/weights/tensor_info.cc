#include "model/weights/tensor_info.h"

namespace di::weights {

int64_t TensorInfo::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace di::weights
