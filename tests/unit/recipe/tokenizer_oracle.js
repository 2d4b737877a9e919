// Test oracle: the native HuggingFace tokenizers library (npm `tokenizers`, Rust code) run on
// the same inputs as our C++ tokenizer. Used by tokenizer_parity_test.cc and tokenizer_bench.cc.
//
// usage: node tokenizer_oracle.js TOKENIZER_JSON MODE IN_FILE OUT_FILE
//   encode        IN: one JSON value per line, a string or {"b64": "..."} (raw bytes, decoded
//                 leniently as UTF-8: invalid sequences become U+FFFD). OUT: JSON id arrays.
//   encode_plain  like encode, but added tokens are not matched (the tokenizer is rebuilt with
//                 an empty added_tokens list), i.e. our SpecialTokens::kNone.
//   decode        IN: JSON id arrays. OUT: JSON strings (decode(ids, false)).
//   decode_skip   like decode with skip_special_tokens = true.
//   bench         IN: raw UTF-8 text; encodes it in 64 KiB chunks one at a time, prints
//                 "cpu_seconds bytes" to OUT.
'use strict';
const fs = require('fs');
const { Tokenizer } = require('tokenizers');

async function main() {
  const [tokPath, mode, inPath, outPath] = process.argv.slice(2);
  if (!outPath) throw new Error('usage: tokenizer_oracle.js TOKENIZER_JSON MODE IN OUT');
  let tok;
  if (mode === 'encode_plain') {
    const j = JSON.parse(fs.readFileSync(tokPath, 'utf8'));
    j.added_tokens = [];
    tok = Tokenizer.fromString(JSON.stringify(j));
  } else {
    tok = Tokenizer.fromFile(tokPath);
  }
  if (mode === 'bench') {
    const buf = fs.readFileSync(inPath);
    const chunks = [];
    for (let i = 0; i < buf.length;) {
      let e = Math.min(buf.length, i + 65536);
      while (e < buf.length && (buf[e] & 0xc0) === 0x80) e++;  // keep characters whole
      chunks.push(buf.subarray(i, e).toString('utf8'));
      i = e;
    }
    // CPU time (user + system) of the process: the machine may be shared.
    const t0 = process.cpuUsage();
    for (const c of chunks) await tok.encode(c, null, { addSpecialTokens: false });
    const d = process.cpuUsage(t0);
    const secs = (d.user + d.system) / 1e6;
    fs.writeFileSync(outPath, `${secs} ${buf.length}\n`);
    return;
  }
  const lines = fs.readFileSync(inPath, 'utf8').split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  const out = [];
  const kBatch = 2000;
  for (let i = 0; i < lines.length; i += kBatch) {
    const vals = lines.slice(i, i + kBatch).map((l) => JSON.parse(l));
    if (mode === 'encode' || mode === 'encode_plain') {
      const texts = vals.map((v) =>
        typeof v === 'string' ? v : Buffer.from(v.b64, 'base64').toString('utf8'));
      const encs = await tok.encodeBatch(texts, { addSpecialTokens: false });
      for (const e of encs) out.push(JSON.stringify(Array.from(e.getIds())));
    } else if (mode === 'decode' || mode === 'decode_skip') {
      const strs = await tok.decodeBatch(vals, mode === 'decode_skip');
      for (const s of strs) out.push(JSON.stringify(s));
    } else {
      throw new Error('unknown mode ' + mode);
    }
  }
  fs.writeFileSync(outPath, out.join('\n') + (out.length ? '\n' : ''));
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + '\n');
  process.exit(1);
});
