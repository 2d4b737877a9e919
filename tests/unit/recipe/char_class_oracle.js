// Dumps, for every code point, the character classes HuggingFace tokenizers' regex engine
// (Oniguruma, via npm `tokenizers`) assigns: bit 0 \p{L}, 1 \p{M}, 2 \p{N}, 3 \p{P}, 4 \p{S},
// 5 \s -- the same bit order as recipe/tokenizer/char_class.h. Output: 0x110000 bytes, one per
// code point (surrogates 0). Used to pin our ICU-based tables to what the oracle does.
// usage: node char_class_oracle.js OUT_FILE
'use strict';
const fs = require('fs');
const { Tokenizer } = require('tokenizers');

const classes = ['\\p{L}', '\\p{M}', '\\p{N}', '\\p{P}', '\\p{S}', '\\s'];
const out = new Uint8Array(0x110000);
const kSep = '\u0001';  // Cc, in none of the classes

function tokenizerFor(regex) {
  return Tokenizer.fromString(JSON.stringify({
    version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
    pre_tokenizer: { type: 'Split', pattern: { Regex: regex }, behavior: 'Isolated', invert: false },
    post_processor: null, decoder: null,
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
             end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, vocab: {}, merges: [] },
  }));
}

for (let bit = 0; bit < classes.length; ++bit) {
  const pt = tokenizerFor(classes[bit]).getPreTokenizer();
  for (let base = 0; base < 0x110000; base += 0x10000) {
    const parts = [];
    for (let cp = base; cp < base + 0x10000; ++cp) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      parts.push(String.fromCodePoint(cp));
    }
    const pieces = pt.preTokenizeString(parts.join(kSep));
    for (const [piece] of pieces) {
      if (piece.includes(kSep) && piece !== kSep) continue;
      const cp = piece.codePointAt(0);
      if (piece.length === String.fromCodePoint(cp).length && piece !== kSep) out[cp] |= 1 << bit;
    }
  }
}
// \p{...} never matches U+0001 itself; \s never does either.
fs.writeFileSync(process.argv[2], out);
