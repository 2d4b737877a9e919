// See tokenizer_json.h.
#include "model/engram/tokenizer_json.h"

#include <cstdint>
#include <exception>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_set>

#include "model/engram/byte_level.h"

namespace di::engram {
namespace {

using nlohmann::json;

enum class DecoderKind { kNone, kByteLevel };

Expected<DecoderKind> decoder_kind(const json& root) {
  const auto it = root.find("decoder");
  if (it == root.end() || it->is_null()) return DecoderKind::kNone;
  if (!it->is_object() || !it->contains("type") || !(*it)["type"].is_string()) {
    return invalid_argument("tokenizer.json: malformed \"decoder\"");
  }
  const std::string type = (*it)["type"].get<std::string>();
  if (type == "ByteLevel") return DecoderKind::kByteLevel;
  return unimplemented("tokenizer.json: decoder type \"" + type +
                       "\" is not supported (only ByteLevel or none)");
}

Expected<int64_t> read_id(const json& value, const std::string& what) {
  if (!value.is_number_integer())
    return invalid_argument("tokenizer.json: " + what + " id is not an integer");
  const int64_t id = value.get<int64_t>();
  if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
    return out_of_range("tokenizer.json: " + what + " id " + std::to_string(id) + " out of range");
  }
  return id;
}

struct IdToken {
  int64_t id;
  std::string token;
};

Expected<TokenTexts> parse(std::string_view text) {
  const json root = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return invalid_argument("tokenizer.json: not a JSON object");
  }
  const auto model = root.find("model");
  if (model == root.end() || !model->is_object())
    return invalid_argument("tokenizer.json: no \"model\"");
  const auto type = model->find("type");
  if (type == model->end() || !type->is_string()) {
    return invalid_argument("tokenizer.json: model has no \"type\"");
  }
  const std::string model_type = type->get<std::string>();
  if (model_type != "WordLevel" && model_type != "BPE") {
    return unimplemented("tokenizer.json: model type \"" + model_type +
                         "\" is not supported (only WordLevel and BPE)");
  }
  DI_ASSIGN_OR_RETURN(const DecoderKind decoder, decoder_kind(root));

  const auto vocab = model->find("vocab");
  if (vocab == model->end() || !vocab->is_object()) {
    return invalid_argument("tokenizer.json: model has no \"vocab\" object");
  }
  std::vector<IdToken> model_tokens;
  model_tokens.reserve(vocab->size());
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    DI_ASSIGN_OR_RETURN(const int64_t id, read_id(it.value(), "vocab"));
    model_tokens.push_back({id, it.key()});
  }
  std::vector<IdToken> added_tokens;
  const auto added = root.find("added_tokens");
  if (added != root.end() && !added->is_null()) {
    if (!added->is_array())
      return invalid_argument("tokenizer.json: \"added_tokens\" is not an array");
    for (const json& entry : *added) {
      if (!entry.is_object() || !entry.contains("id") || !entry.contains("content") ||
          !entry["content"].is_string()) {
        return invalid_argument("tokenizer.json: malformed added token");
      }
      DI_ASSIGN_OR_RETURN(const int64_t id, read_id(entry["id"], "added token"));
      added_tokens.push_back({id, entry["content"].get<std::string>()});
    }
  }

  // len(tokenizer) is the size of get_vocab(with_added_tokens=True), a map keyed by
  // token string.
  std::unordered_set<std::string> distinct;
  for (const IdToken& t : model_tokens) distinct.insert(t.token);
  for (const IdToken& t : added_tokens) distinct.insert(t.token);
  const std::size_t n = distinct.size();

  TokenTexts texts;
  texts.raw.assign(n, std::string());
  std::vector<bool> from_added(n, false);
  for (const IdToken& t : model_tokens) {
    if (static_cast<std::size_t>(t.id) < n) texts.raw[static_cast<std::size_t>(t.id)] = t.token;
  }
  for (const IdToken& t : added_tokens) {  // id_to_token looks at added tokens first
    if (static_cast<std::size_t>(t.id) < n) texts.raw[static_cast<std::size_t>(t.id)] = t.token;
  }
  // One-token decode: with no decoder the library joins the token strings with " ",
  // which for a single token is the token itself; ByteLevel maps bytes back (and
  // applies to added tokens too, which pass through unchanged unless made of alphabet
  // characters that stand for other bytes).
  texts.decoded.reserve(n);
  for (const std::string& raw : texts.raw) {
    texts.decoded.push_back(
        decoder == DecoderKind::kByteLevel && !raw.empty() ? byte_level_decode_token(raw) : raw);
  }
  return texts;
}

}  // namespace

Expected<TokenTexts> load_token_texts(std::string_view tokenizer_json) {
  // nlohmann reports type errors by throwing; keep them on this side of the API.
  try {
    return parse(tokenizer_json);
  } catch (const std::exception& e) {
    return invalid_argument(std::string("tokenizer.json: ") + e.what());
  }
}

Expected<TokenTexts> load_token_texts_from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open tokenizer file " + path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return data_loss("cannot read tokenizer file " + path);
  Expected<TokenTexts> texts = load_token_texts(buffer.str());
  if (!texts) return texts.status().with_context(path);
  return texts;
}

}  // namespace di::engram
