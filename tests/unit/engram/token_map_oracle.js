// Test oracle for the Engram compressed token map: builds the map with HuggingFace's
// own tokenizers library (node binding), so the C++ port is checked against the real
// decode + normalizer behaviour rather than against our reading of it.
//
// usage: node token_map_oracle.js TOKENIZER_JSON [--keys]
// prints {"num_classes": N, "lookup": [...]} (plus "keys" with --keys, for debugging).
'use strict';
const path = require('path');
const fs = require('fs');

// Resolve `tokenizers` from the repository's node_modules even when run from elsewhere.
const repoRoot = path.resolve(__dirname, '..', '..', '..');
const tk = require(require.resolve('tokenizers', {paths: [repoRoot]}));

const SENTINEL = '\uE000';

// The reference's normalizer Sequence, built from a tokenizer.json fragment so that
// the Replace steps use the library's own (Oniguruma) regex engine; the node binding's
// replace() helper only takes literal patterns.
function buildNormalizer() {
  const spec = {
    version: '1.0', truncation: null, padding: null, added_tokens: [],
    normalizer: {
      type: 'Sequence',
      normalizers: [
        {type: 'NFKC'},
        {type: 'NFD'},
        {type: 'StripAccents'},
        {type: 'Lowercase'},
        {type: 'Replace', pattern: {Regex: '[ \\t\\r\\n]+'}, content: ' '},
        {type: 'Replace', pattern: {Regex: '^ $'}, content: SENTINEL},
        {type: 'Strip', strip_left: true, strip_right: true},
        {type: 'Replace', pattern: {String: SENTINEL}, content: ' '},
      ],
    },
    pre_tokenizer: null, post_processor: null, decoder: null,
    model: {type: 'WordLevel', vocab: {'[UNK]': 0}, unk_token: '[UNK]'},
  };
  return tk.Tokenizer.fromString(JSON.stringify(spec)).getNormalizer();
}

async function main() {
  const file = process.argv[2];
  const wantKeys = process.argv.includes('--keys');
  if (!file || !fs.existsSync(file)) {
    process.stderr.write('usage: node token_map_oracle.js TOKENIZER_JSON [--keys]\n');
    process.exit(2);
  }
  const tokenizer = tk.Tokenizer.fromFile(file);
  const normalizer = buildNormalizer();
  const n = tokenizer.getVocabSize(true);  // len(tokenizer): ids incl. added tokens
  const lookup = new Array(n);
  const keys = [];
  const classOf = new Map();
  const batch = 4096;
  for (let start = 0; start < n; start += batch) {
    const ids = [];
    for (let id = start; id < Math.min(n, start + batch); ++id) ids.push([id]);
    const texts = await tokenizer.decodeBatch(ids, false);
    for (let k = 0; k < texts.length; ++k) {
      const id = start + k;
      const text = texts[k];
      let key;
      if (text.includes('\uFFFD')) {
        key = tokenizer.idToToken(id);
      } else {
        const normalized = normalizer.normalizeString(text);
        key = normalized.length > 0 ? normalized : text;
      }
      if (!classOf.has(key)) classOf.set(key, classOf.size);
      lookup[id] = classOf.get(key);
      if (wantKeys) keys.push(key);
    }
  }
  const out = {num_classes: classOf.size, lookup};
  if (wantKeys) out.keys = keys;
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack || e) + '\n');
  process.exit(1);
});
