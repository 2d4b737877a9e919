// Tokenizer: encode (added tokens -> pre-tokenizer -> cached BPE) and decode.
#include "recipe/tokenizer/tokenizer.h"

#include "recipe/tokenizer/tokenizer_impl.h"
#include "recipe/tokenizer/utf8.h"
#include "recipe/tokenizer/word_cache.h"

namespace di::recipe {
namespace {

void encode_plain(const Tokenizer::Impl& impl,
                  std::string_view text,
                  std::vector<Piece>& pieces,
                  std::vector<int32_t>& out) {
  pieces.clear();
  impl.pretokenizer.split(text, pieces);
  WordCache& cache = WordCache::for_thread(impl.uid);
  for (const Piece& pc : pieces) {
    const std::string_view piece = text.substr(pc.begin, pc.end - pc.begin);
    if (impl.ignore_merges) {
      auto it = impl.bytes_to_id.find(std::string(piece));
      if (it != impl.bytes_to_id.end()) {
        out.push_back(it->second);
        continue;
      }
    }
    if (piece.size() > WordCache::kMaxKeyBytes) {
      impl.bpe.encode_piece(piece, out);
      continue;
    }
    const uint64_t h = WordCache::hash_bytes(piece);
    std::span<const int32_t> hit;
    if (cache.find(piece, h, &hit)) {
      if (hit.size() == 1) {
        out.push_back(hit[0]);  // the common case; avoids a memmove call
      } else {
        out.insert(out.end(), hit.begin(), hit.end());
      }
      continue;
    }
    const size_t first = out.size();
    impl.bpe.encode_piece(piece, out);
    cache.insert(piece, h, std::span<const int32_t>(out.data() + first, out.size() - first));
  }
}

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, SpecialTokens allow) const {
  const Impl& impl = *impl_;
  std::string repaired;
  if (!is_valid_utf8(text)) {
    repaired = utf8_lossy(text);
    text = repaired;
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  std::vector<Piece> pieces;
  if (allow == SpecialTokens::kNone || impl.added.empty()) {
    encode_plain(impl, text, pieces, out);
    return out;
  }
  std::vector<Segment> segments;
  impl.added.split(text, segments);
  for (const Segment& s : segments) {
    if (s.id >= 0) {
      out.push_back(s.id);
    } else {
      encode_plain(impl, text.substr(s.begin, s.end - s.begin), pieces, out);
    }
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  for (const int32_t id : ids) {
    if (skip_special && is_special(id)) continue;
    bytes.append(token_bytes(id));
  }
  if (is_valid_utf8(bytes)) return bytes;
  return utf8_lossy(bytes);
}

int32_t Tokenizer::vocab_size() const {
  return static_cast<int32_t>(impl_->token_known.size());
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  const Impl& impl = *impl_;
  if (id < 0 || static_cast<size_t>(id) >= impl.token_known.size()) return {};
  const auto i = static_cast<size_t>(id);
  return std::string_view(impl.token_data)
      .substr(impl.token_offset[i], impl.token_offset[i + 1] - impl.token_offset[i]);
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  auto it = impl_->token_to_id.find(std::string(token));
  if (it == impl_->token_to_id.end()) return std::nullopt;
  return it->second;
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->token_special.size() &&
         impl_->token_special[static_cast<size_t>(id)] != 0;
}

}  // namespace di::recipe
