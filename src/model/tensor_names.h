// Tensor names: the released checkpoint uses the reference's names (`layers.3.attn.wq_a.weight`,
// spec §1.9); Hugging Face exports use transformers' module names (`model.layers.3.self_attn.
// q_a_proj.weight`, as in its DeepSeek-V3/V4 ports). The loader looks a tensor up by its official
// name and then by its Hugging Face alias.
#pragma once

#include <string>

namespace di::model {

// The Hugging Face-style alias of an official tensor name ("" when there is none).
std::string hf_tensor_alias(const std::string& official_name);

}  // namespace di::model
