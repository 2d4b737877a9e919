// Loads a HuggingFace tokenizer.json of the byte-level BPE family DeepSeek uses. Anything we do
// not implement exactly is refused with a Status naming the field, never approximated.
#include <atomic>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "recipe/tokenizer/byte_level.h"
#include "recipe/tokenizer/char_class.h"
#include "recipe/tokenizer/tokenizer.h"
#include "recipe/tokenizer/tokenizer_impl.h"
#include "recipe/tokenizer/utf8.h"

namespace di::recipe {
namespace {

using Json = nlohmann::json;
constexpr int64_t kMaxTokenId = 1 << 24;  // sanity bound for ids (tables are sized by max id)

Status bad(const std::string& field, const std::string& what) {
  return invalid_argument("tokenizer.json: " + field + ": " + what);
}
Status unsupported(const std::string& field, const std::string& what) {
  return unimplemented("tokenizer.json: " + field + ": " + what);
}

bool is_null_or_missing(const Json& obj, const char* key) {
  return !obj.contains(key) || obj[key].is_null();
}

std::string type_of(const Json& j) {
  if (j.is_object() && j.contains("type") && j["type"].is_string()) return j["type"];
  return "";
}

Status check_normalizer(const Json& root) {
  if (is_null_or_missing(root, "normalizer")) return {};
  const Json& n = root["normalizer"];
  if (type_of(n) == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array() &&
      n["normalizers"].empty()) {
    return {};
  }
  return unsupported("normalizer", "only null or an empty Sequence is supported, got " + n.dump());
}

Expected<PreTokenizer> load_pretokenizer(const Json& root) {
  if (is_null_or_missing(root, "pre_tokenizer")) {
    return unsupported("pre_tokenizer", "missing; a ByteLevel pre-tokenizer is required");
  }
  const Json& pt = root["pre_tokenizer"];
  std::vector<Json> steps;
  if (type_of(pt) == "Sequence") {
    if (!pt.contains("pretokenizers") || !pt["pretokenizers"].is_array()) {
      return bad("pre_tokenizer.pretokenizers", "expected an array");
    }
    for (const Json& s : pt["pretokenizers"]) steps.push_back(s);
  } else {
    steps.push_back(pt);
  }
  std::vector<SplitRule> rules;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Json& s = steps[i];
    const std::string field = "pre_tokenizer.pretokenizers[" + std::to_string(i) + "]";
    const std::string type = type_of(s);
    const bool last = i + 1 == steps.size();
    if (type == "ByteLevel" && last) {
      if (s.value("add_prefix_space", false) != false) {
        return unsupported(field + ".add_prefix_space", "only false is supported");
      }
      if (s.value("use_regex", true) != false) {
        return unsupported(field + ".use_regex", "only false is supported (GPT-2 regex)");
      }
      return PreTokenizer(std::move(rules));
    }
    if (type != "Split") {
      return unsupported(field + ".type", "'" + type + "' is not supported here (expected " +
                                              "Split steps followed by ByteLevel)");
    }
    if (!s.contains("pattern") || !s["pattern"].is_object() || !s["pattern"].contains("Regex") ||
        !s["pattern"]["Regex"].is_string()) {
      return unsupported(field + ".pattern", "only {\"Regex\": ...} patterns are supported");
    }
    const std::string regex = s["pattern"]["Regex"];
    const auto rule = split_rule_for_regex(regex);
    if (!rule)
      return unsupported(field + ".pattern.Regex", "unknown pattern " + Json(regex).dump());
    if (!s.contains("behavior") || s["behavior"] != "Isolated") {
      return unsupported(field + ".behavior", "only Isolated is supported");
    }
    if (s.value("invert", false) != false) return unsupported(field + ".invert", "must be false");
    rules.push_back(*rule);
  }
  return unsupported("pre_tokenizer", "must end with ByteLevel");
}

Status check_model_options(const Json& m) {
  if (!m.contains("type") || !m["type"].is_string()) return bad("model.type", "missing");
  if (m["type"] != "BPE") {
    return unsupported("model.type", "'" + m["type"].get<std::string>() + "' (only BPE)");
  }
  if (!is_null_or_missing(m, "dropout")) return unsupported("model.dropout", "must be null");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (!is_null_or_missing(m, k) && !(m[k].is_string() && m[k].get<std::string>().empty())) {
      return unsupported(std::string("model.") + k, "must be null");
    }
  }
  if (m.value("byte_fallback", false) != false) {
    return unsupported("model.byte_fallback", "must be false");
  }
  if (!m.contains("vocab") || !m["vocab"].is_object()) return bad("model.vocab", "missing");
  if (!m.contains("merges") || !m["merges"].is_array()) return bad("model.merges", "missing");
  return {};
}

Status load_added(const Json& root, std::vector<AddedToken>& added) {
  if (is_null_or_missing(root, "added_tokens")) return {};
  if (!root["added_tokens"].is_array()) return bad("added_tokens", "expected an array");
  size_t i = 0;
  for (const Json& a : root["added_tokens"]) {
    const std::string field = "added_tokens[" + std::to_string(i++) + "]";
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer()) {
      return bad(field + ".id", "missing or not an integer");
    }
    if (!a.contains("content") || !a["content"].is_string() ||
        a["content"].get<std::string>().empty()) {
      return bad(field + ".content", "missing or empty");
    }
    const int64_t id = a["id"];
    if (id < 0 || id >= kMaxTokenId) return bad(field + ".id", "out of range");
    AddedToken t;
    t.id = static_cast<int32_t>(id);
    t.content = a["content"];
    const auto flag = [&](const char* k, bool def) {
      return a.contains(k) && a[k].is_boolean() ? a[k].get<bool>() : def;
    };
    t.special = flag("special", false);
    t.normalized = flag("normalized", !t.special);
    t.lstrip = flag("lstrip", false);
    t.rstrip = flag("rstrip", false);
    t.single_word = flag("single_word", false);
    added.push_back(std::move(t));
  }
  return {};
}

// Fills the per-id tables from the vocab strings (byte-level) and added token contents.
void build_id_tables(Tokenizer::Impl& impl,
                     const std::vector<std::string>& vocab_by_id,
                     const std::vector<AddedToken>& added,
                     size_t num_ids) {
  std::vector<std::string> bytes(num_ids);
  impl.token_known.assign(num_ids, 0);
  impl.token_special.assign(num_ids, 0);
  for (size_t id = 0; id < vocab_by_id.size(); ++id) {
    if (vocab_by_id[id].empty()) continue;
    impl.token_known[id] = 1;
    bytes[id] = byte_level_decode_token(vocab_by_id[id]).value_or(vocab_by_id[id]);
  }
  for (const AddedToken& t : added) {
    const auto id = static_cast<size_t>(t.id);
    impl.token_known[id] = 1;
    impl.token_special[id] = t.special ? 1 : 0;
    bytes[id] = byte_level_decode_token(t.content).value_or(t.content);
    impl.token_to_id[t.content] = t.id;
  }
  impl.token_offset.assign(num_ids + 1, 0);
  for (size_t id = 0; id < num_ids; ++id) {
    impl.token_offset[id] = static_cast<uint32_t>(impl.token_data.size());
    impl.token_data += bytes[id];
  }
  impl.token_offset[num_ids] = static_cast<uint32_t>(impl.token_data.size());
}

Status load_merges(const Json& merges, Tokenizer::Impl& impl) {
  int32_t rank = 0;
  for (const Json& mj : merges) {
    const std::string field = "model.merges[" + std::to_string(rank) + "]";
    std::string a, b;
    if (mj.is_string()) {
      const std::string s = mj;
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        return bad(field, "expected \"a b\", got " + mj.dump());
      }
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (mj.is_array() && mj.size() == 2 && mj[0].is_string() && mj[1].is_string()) {
      a = mj[0];
      b = mj[1];
    } else {
      return bad(field, "expected \"a b\" or [\"a\", \"b\"], got " + mj.dump());
    }
    const auto ia = impl.token_to_id.find(a);
    const auto ib = impl.token_to_id.find(b);
    const auto im = impl.token_to_id.find(a + b);
    if (ia == impl.token_to_id.end() || ib == impl.token_to_id.end()) {
      return bad(field, "token of " + mj.dump() + " is not in model.vocab");
    }
    if (im == impl.token_to_id.end())
      return bad(field, "merge result of " + mj.dump() + " is not in model.vocab");
    const std::optional<std::string> b_bytes = byte_level_decode_token(b);
    const bool b_starts_char =
        !b_bytes || b_bytes->empty() || (static_cast<uint8_t>((*b_bytes)[0]) & 0xC0) != 0x80;
    impl.bpe.add_merge(ia->second, ib->second, rank, im->second, b_starts_char);
    if (rank == std::numeric_limits<int32_t>::max() - 1) return bad("model.merges", "too many");
    ++rank;
  }
  return {};
}

Expected<std::shared_ptr<Tokenizer::Impl>> load(const Json& root) {
  if (!root.is_object()) return bad("(root)", "expected a JSON object");
  for (const char* k : {"truncation", "padding"}) {
    if (!is_null_or_missing(root, k)) return unsupported(k, "must be null");
  }
  if (!root.contains("model") || !root["model"].is_object()) return bad("model", "missing");
  const Json& m = root["model"];
  DI_RETURN_IF_ERROR(check_model_options(m));
  DI_RETURN_IF_ERROR(check_normalizer(root));
  if (type_of(root.value("decoder", Json())) != "ByteLevel") {
    return unsupported("decoder", "only ByteLevel is supported");
  }
  auto impl = std::make_shared<Tokenizer::Impl>();
  DI_ASSIGN_OR_RETURN(impl->pretokenizer, load_pretokenizer(root));
  impl->ignore_merges = m.value("ignore_merges", false);

  std::vector<std::string> vocab_by_id;
  for (const auto& [token, idj] : m["vocab"].items()) {
    if (!idj.is_number_integer()) return bad("model.vocab[" + Json(token).dump() + "]", "not int");
    const int64_t id = idj;
    if (id < 0 || id >= kMaxTokenId || token.empty() || !is_valid_utf8(token)) {
      return bad("model.vocab[" + Json(token).dump() + "]", "bad id or token");
    }
    if (vocab_by_id.size() <= static_cast<size_t>(id)) vocab_by_id.resize(id + 1);
    vocab_by_id[id] = token;
    impl->token_to_id[token] = static_cast<int32_t>(id);
  }
  DI_RETURN_IF_ERROR(load_merges(m["merges"], *impl));

  std::vector<AddedToken> added;
  DI_RETURN_IF_ERROR(load_added(root, added));
  size_t num_ids = vocab_by_id.size();
  for (const AddedToken& t : added) num_ids = std::max(num_ids, static_cast<size_t>(t.id) + 1);
  build_id_tables(*impl, vocab_by_id, added, num_ids);
  if (impl->token_data.size() > std::numeric_limits<uint32_t>::max()) {
    return bad("model.vocab", "too large");
  }
  bool all_bytes = true;
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    append_utf8(ch, byte_to_char(static_cast<uint8_t>(b)));
    const auto it = impl->token_to_id.find(ch);
    // Byte tokens come from the model vocab (an added token of the same spelling does not count).
    const bool in_vocab = it != impl->token_to_id.end() &&
                          static_cast<size_t>(it->second) < vocab_by_id.size() &&
                          vocab_by_id[it->second] == ch;
    if (in_vocab) {
      impl->bpe.set_byte_token(static_cast<uint8_t>(b), it->second);
    } else {
      all_bytes = false;
    }
  }
  if (!all_bytes && !is_null_or_missing(m, "unk_token")) {
    return unsupported("model.unk_token", "an unk token with an incomplete byte alphabet");
  }
  if (impl->ignore_merges) {
    for (size_t id = 0; id < vocab_by_id.size(); ++id) {
      if (!vocab_by_id[id].empty()) {
        impl->bytes_to_id[std::string(impl->token_data.substr(
            impl->token_offset[id], impl->token_offset[id + 1] - impl->token_offset[id]))] =
            static_cast<int32_t>(id);
      }
    }
  }
  impl->bpe.finalize();
  impl->added = AddedTokenMatcher(added);
  (void)CharClassTable::instance();  // build the shared tables now, not in the first encode
  static std::atomic<uint64_t> next_uid{1};
  impl->uid = next_uid.fetch_add(1);
  return impl;
}

}  // namespace

Expected<Tokenizer> Tokenizer::from_json(std::string_view json_text) {
  try {
    Json root = Json::parse(json_text.begin(), json_text.end());
    auto impl = load(root);
    if (!impl) return impl.status();
    return Tokenizer(std::shared_ptr<const Impl>(std::move(impl).value()));
  } catch (const Json::exception& e) {
    return invalid_argument(std::string("tokenizer.json: invalid JSON or field type: ") + e.what());
  } catch (const std::bad_alloc&) {
    return resource_exhausted("tokenizer.json: out of memory");
  } catch (const std::exception& e) {
    return invalid_argument(std::string("tokenizer.json: ") + e.what());
  }
}

Expected<Tokenizer> Tokenizer::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open tokenizer file '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return data_loss("cannot read tokenizer file '" + path + "'");
  auto tok = from_json(ss.str());
  if (!tok) return tok.status().with_context(path);
  return tok;
}

}  // namespace di::recipe
