// Corpus generators. Word lists are short samples written for this test.
#include "parity_corpus.h"

#include "recipe/tokenizer/utf8.h"

namespace di::recipe::testing {
namespace {

using Words = std::vector<std::string>;

const Words kEnglish = {
    "the",      "of",        "and",       "to",         "in",      "is",       "that",
    "for",      "it",        "as",        "was",        "with",    "be",       "by",
    "on",       "not",       "he",        "I",          "this",    "are",      "or",
    "his",      "from",      "at",        "which",      "but",     "have",     "an",
    "had",      "they",      "you",       "were",       "their",   "one",      "all",
    "we",       "can",       "her",       "has",        "there",   "been",     "if",
    "more",     "when",      "will",      "would",      "who",     "so",       "no",
    "model",    "inference", "tokenizer", "throughput", "latency", "DeepSeek", "GPU",
    "memory",   "Attention", "isn't",     "don't",      "we'll",   "o'clock",  "re-entrant",
    "e.g.",     "U.S.",      "naïve",     "café",       "résumé",  "Zürich",   "coöperate",
    "jalapeño", "façade",    "über",      "HTTP/2",     "UTF-8",   "C++20",    "x86_64"};
const Words kChinese = {"我们", "的",   "模型",   "推理", "引擎",   "是",   "一个", "高效", "并且",
                        "可以", "处理", "长文本", "中文", "分词器", "测试", "数据", "在",   "上",
                        "运行", "速度", "非常",   "快",   "龍",     "龜",   "鬱",   "𠀀",   "𪚥",
                        "蘋果", "電腦", "亞洲",   "〇",   "々",     "〆",   "乂"};
const Words kJapanese = {"これは", "テスト",     "です",   "日本語",   "の",       "文章",
                         "を",     "トークン化", "します", "カタカナ", "ひらがな", "漢字",
                         "ー",     "ヴ",         "ゟ",     "ヿ",       "ｶﾀｶﾅ",     "㍿"};
const Words kKorean = {"안녕하세요", "한국어", "문장", "토큰", "테스트", "입니다", "ㄱㄴㄷ"};
const Words kArabic = {"مرحبا", "بالعالم",    "هذا", "اختبار", "للنص", "العربي",
                       "كِتَابٌ",  "٠١٢٣٤٥٦٧٨٩", "،",   "؟",      "ـ"};
const Words kHindi = {"नमस्ते", "दुनिया", "यह", "एक", "परीक्षण", "है", "हिन्दी", "०१२३", "।", "क्षत्रिय"};
const Words kThai = {"สวัสดี", "ชาวโลก", "นี่คือ", "การทดสอบ", "ภาษาไทย", "๑๒๓", "กำ", "ไม่"};
const Words kOther = {"Привет", "мир", "Ελληνικά", "γλώσσα", "שלום",  "עולם",    "Tiếng",
                      "Việt",   "ở",   "đâu",      "Ωμέγα",  "ǅemal", "ﬁnance",  "Ⅻ",
                      "½",      "²³",  "℃",        "№",      "ⓐ",     "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "ꙮ"};
const Words kEmoji = {"😀",
                      "👍🏽",
                      "👨‍👩‍👧‍👦",
                      "🏳️‍🌈",
                      "🇯🇵",
                      "🇺🇸",
                      "❤️",
                      "#️⃣",
                      "1️⃣",
                      "🧑🏿‍💻",
                      "🫠",
                      "☕",
                      "✔︎",
                      "⚡",
                      "🏴󠁧󠁢󠁳󠁣󠁴󠁿",
                      "©",
                      "™",
                      "↔️"};
const Words kPunct = {".",  ",",  "!",  "?",  ";",  ":",  "...", "—", "–",  "-",  "(",  ")",
                      "\"", "'",  "«",  "»",  "“",  "”",  "‘",   "’", "。", "，", "、", "！",
                      "？", "：", "「", "」", "【", "】", "・",  "/", "\\", "@",  "#",  "$",
                      "%",  "^",  "&",  "*",  "_",  "+",  "=",   "<", ">",  "|",  "~",  "`",
                      "[",  "]",  "{",  "}",  "¿",  "¡",  "§",   "¶", "•",  "€",  "£",  "¥"};
const Words kSpaces = {" ",      "  ",       "   ",        "\t",     "\t\t",   "\n",     "\n\n",
                       "\r\n",   "\r",       " \n",        "\n ",    "\u00a0", "\u2003", "\u3000",
                       "\u0085", "\u2028",   "\u2029",     "\v",     "\f",     "\u200b", "\ufeff",
                       " \t \n", "\r\n\r\n", "    \n    ", "\u1680", "\u202f", "\u205f"};
const Words kSpecialish = {"<｜User｜>",
                           "<｜Assistant｜>",
                           "<｜begin▁of▁sentence｜>",
                           "<｜end▁of▁sentence｜>",
                           "<|EOT|>",
                           "<｜tool▁calls▁begin｜>",
                           "<｜tool▁sep｜>",
                           "<｜Use",
                           "<｜User",
                           "｜>",
                           "<｜<｜User｜>｜>",
                           "<｜place▁holder▁no▁17｜>",
                           "<｜fim▁hole｜>",
                           "</think>",
                           "<think>",
                           "<｜System｜>",
                           "｜DSML｜",
                           "<|User|>",
                           "<｜▁pad▁｜>"};
const Words kCode = {
    "int main(int argc, char** argv) {\n  return 0;\n}\n",
    "def f(x):\n    return [i ** 2 for i in range(x) if i % 3 == 0]\n",
    "const xs = await Promise.all(urls.map((u) => fetch(u)));\n",
    "fn parse(s: &str) -> Result<Vec<u8>, Error> { s.bytes().map(Ok).collect() }\n",
    "for (auto& [k, v] : map_) { if (v->ok()) total += v->size(); }\n",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;\n",
    "if [ -f \"$HOME/.bashrc\" ]; then\n\tsource ~/.bashrc\nfi\n",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n",
    "#include <vector>\n#define DI_CHECK(x) do { if (!(x)) abort(); } while (0)\n",
    "x+=1;y-=2;z*=3;w/=4;a<<=b;c>>=d;e&&=f;g||=h;i?\?=j;\n",
    "// comment with URL https://example.com/a?b=c&d=e#f\n/* block */\n",
    "    @property\n    def name(self) -> str:\n        return self._name\n",
    "<div class=\"x\"><a href='/p?q=1'>link</a></div>\n",
    "matrix[i][j] = (a[i][k] * b[k][j]) % MOD;\t// O(n^3)\n"};

void append_words(Rng& rng, std::string& out, const Words& words, size_t n, bool spaced) {
  for (size_t i = 0; i < n; ++i) {
    if (spaced && !out.empty() && rng.below(8) != 0) out += ' ';
    out += rng.pick(words);
    if (rng.below(7) == 0) out += rng.pick(kPunct);
  }
}

std::string random_number(Rng& rng) {
  std::string s;
  const size_t len = 1 + rng.below(rng.below(4) == 0 ? 40 : 12);
  if (rng.below(5) == 0) s += '-';
  for (size_t i = 0; i < len; ++i) s += static_cast<char>('0' + rng.below(10));
  switch (rng.below(6)) {
    case 0:
      s += "." + std::to_string(rng.below(100000));
      break;
    case 1:
      s += "e-" + std::to_string(rng.below(300));
      break;
    case 2:
      s = "1,234,567." + s;
      break;
    default:
      break;
  }
  return s;
}

std::string random_json(Rng& rng, int depth) {
  const uint64_t k = depth > 3 ? rng.below(4) : rng.below(7);
  switch (k) {
    case 0:
      return random_number(rng);
    case 1:
      return rng.below(2) ? "true" : "null";
    case 2: {
      std::string s = "\"";
      append_words(rng, s, rng.below(2) ? kEnglish : kChinese, 1 + rng.below(4), true);
      if (rng.below(4) == 0) s += "\\n\\t\\\"\\u00e9";
      return s + "\"";
    }
    case 3:
      return "\"" + rng.pick(kEmoji) + "\"";
    case 4:
    case 5: {
      std::string s = "{";
      const size_t n = rng.below(5);
      for (size_t i = 0; i < n; ++i) {
        if (i) s += rng.below(2) ? ", " : ",\n  ";
        s += "\"" + rng.pick(kEnglish) + "_" + std::to_string(i) +
             "\": " + random_json(rng, depth + 1);
      }
      return s + "}";
    }
    default: {
      std::string s = "[";
      const size_t n = rng.below(5);
      for (size_t i = 0; i < n; ++i) s += (i ? "," : "") + random_json(rng, depth + 1);
      return s + "]";
    }
  }
}

// One random "interesting" code point for fuzz strings.
char32_t random_char(Rng& rng) {
  static const std::vector<std::pair<char32_t, char32_t>> ranges = {
      {0x20, 0x7E},       {0x00, 0x1F},       {0x80, 0xFF},       {0x300, 0x36F},
      {0x370, 0x3FF},     {0x400, 0x4FF},     {0x590, 0x6FF},     {0x900, 0x97F},
      {0xE00, 0xE7F},     {0x1100, 0x11FF},   {0x2000, 0x206F},   {0x20A0, 0x20CF},
      {0x2100, 0x27FF},   {0x3000, 0x30FF},   {0x4E00, 0x9FFF},   {0xAC00, 0xD7A3},
      {0xFE00, 0xFE0F},   {0xFF00, 0xFFEF},   {0x1F300, 0x1FAFF}, {0x20000, 0x2A6DF},
      {0xE0000, 0xE007F}, {0x1D400, 0x1D7FF}, {0x10000, 0x1018F}, {0xFFF0, 0xFFFD}};
  const auto& r = rng.pick(ranges);
  return r.first + static_cast<char32_t>(rng.below(r.second - r.first + 1));
}

void add_prose(Rng& rng, std::vector<CorpusItem>& c) {
  const std::vector<const Words*> langs = {&kEnglish, &kChinese, &kJapanese, &kKorean, &kArabic,
                                           &kHindi,   &kThai,    &kOther,    &kEmoji};
  for (int i = 0; i < 6000; ++i) {
    std::string s;
    const size_t parts = 1 + rng.below(6);
    for (size_t p = 0; p < parts; ++p) {
      const Words& w = *langs[rng.below(langs.size())];
      append_words(rng, s, w, 1 + rng.below(12), &w != &kChinese && &w != &kJapanese);
      if (rng.below(3) == 0) s += rng.pick(kSpaces);
      if (rng.below(6) == 0) s += random_number(rng);
    }
    c.push_back({"prose", s});
  }
}

void add_code_json_numbers(Rng& rng, std::vector<CorpusItem>& c) {
  for (int i = 0; i < 2500; ++i) {
    std::string s;
    for (size_t n = 1 + rng.below(4); n > 0; --n) {
      std::string snippet = rng.pick(kCode);
      if (rng.below(3) == 0) snippet = "\t" + snippet;
      s += snippet;
    }
    c.push_back({"code", s});
  }
  for (int i = 0; i < 2500; ++i) c.push_back({"json", random_json(rng, 0)});
  for (int len = 1; len <= 64; ++len) {
    std::string d;
    for (int k = 0; k < len; ++k) d += static_cast<char>('0' + (k * 7 + len) % 10);
    c.push_back({"numbers", d});
    c.push_back({"numbers", "x" + d + "y"});
    c.push_back({"numbers", " " + d + ".5"});
    c.push_back({"numbers", "v" + d + "\u0663\u0664\uff11\uff12\u0967"});
  }
  for (int i = 0; i < 1500; ++i) {
    std::string s;
    for (size_t n = 1 + rng.below(6); n > 0; --n) s += random_number(rng) + rng.pick(kPunct);
    c.push_back({"numbers", s});
  }
}

void add_whitespace_emoji_special(Rng& rng, std::vector<CorpusItem>& c) {
  for (int i = 0; i < 3000; ++i) {
    std::string s;
    for (size_t n = 1 + rng.below(8); n > 0; --n) {
      s += rng.pick(kSpaces);
      if (rng.below(2)) s += rng.pick(rng.below(2) ? kEnglish : kPunct);
      if (rng.below(4) == 0) s += rng.pick(kEmoji);
    }
    c.push_back({"whitespace", s});
  }
  for (int i = 0; i < 1500; ++i) {
    std::string s;
    append_words(rng, s, kEmoji, 1 + rng.below(8), rng.below(2) != 0);
    c.push_back({"emoji", s});
  }
  for (int i = 0; i < 2000; ++i) {
    std::string s;
    for (size_t n = 1 + rng.below(5); n > 0; --n) {
      s += rng.pick(kSpecialish);
      if (rng.below(2)) s += rng.pick(kSpaces);
      if (rng.below(2)) append_words(rng, s, kEnglish, 1 + rng.below(3), true);
    }
    c.push_back({"special", s});
  }
  for (int i = 0; i < 4000; ++i) {
    std::string s;
    for (size_t n = 1 + rng.below(40); n > 0; --n) append_utf8(s, random_char(rng));
    c.push_back({"fuzz", s});
  }
  // Long pieces: whitespace, letters and digits beyond the cache and small-merge limits.
  for (int i = 0; i < 40; ++i) {
    const size_t n = 40 + rng.below(400);
    c.push_back({"long", std::string(n, ' ') + "x" + std::string(n, '\n') + std::string(n, 'a') +
                             " " + std::string(n, '7') + std::string(n / 2, '\t') + "end"});
    std::string w;
    for (size_t k = 0; k < n; ++k) w += rng.pick(kEnglish);
    c.push_back({"long", w});
  }
}

void add_invalid_utf8(Rng& rng, std::vector<CorpusItem>& c) {
  const std::vector<std::string> bad = {
      "\xff",     "\xc0\xaf",         "\xe2\x82",    "\xed\xa0\x80", "\xf0\x9f\x98",
      "\x80\x80", "\xf4\x90\x80\x80", "\xc3",        "\xe0\x80\xaf", "\xf8\x88\x80\x80\x80",
      "\xfe\xfe", "\xf0\x9f",         "\xef\xbf\xbf"};
  for (int i = 0; i < 1500; ++i) {
    std::string s;
    for (size_t n = 1 + rng.below(6); n > 0; --n) {
      if (rng.below(2)) s += rng.pick(bad);
      if (rng.below(2)) s += rng.pick(rng.below(2) ? kEnglish : kChinese);
      if (rng.below(3) == 0) s += static_cast<char>(rng.below(256));
      if (rng.below(4) == 0) s += rng.pick(kSpaces);
    }
    c.push_back({"invalid_utf8", s});
  }
}

// Every code point in a few contexts (all of planes 0-1, samples above).
void add_all_code_points(std::vector<CorpusItem>& c) {
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    if (cp >= 0x20000 && (cp % 16) != 0 && !(cp >= 0xE0000 && cp <= 0xE01EF)) continue;
    std::string ch;
    append_utf8(ch, cp);
    c.push_back({"code_point", "a" + ch + "b " + ch + ch + "1" + ch + " \n" + ch + "!" + ch +
                                   "x\t" + ch + " " + ch});
  }
}

}  // namespace

std::vector<CorpusItem> make_parity_corpus(uint64_t seed) {
  Rng rng(seed);
  std::vector<CorpusItem> c;
  add_prose(rng, c);
  add_code_json_numbers(rng, c);
  add_whitespace_emoji_special(rng, c);
  add_invalid_utf8(rng, c);
  add_all_code_points(c);
  return c;
}

std::string make_english_prose(uint64_t seed, size_t bytes) {
  Rng rng(seed);
  std::string s;
  while (s.size() < bytes) {
    append_words(rng, s, kEnglish, 8 + rng.below(16), true);
    s += rng.below(4) == 0 ? ".\n\n" : ". ";
    if (rng.below(10) == 0) s += random_number(rng) + " ";
  }
  return s;
}

std::string make_cjk_prose(uint64_t seed, size_t bytes) {
  Rng rng(seed);
  std::string s;
  while (s.size() < bytes) {
    append_words(rng, s, rng.below(4) == 0 ? kJapanese : kChinese, 6 + rng.below(20), false);
    s += rng.below(4) == 0 ? "。\n" : "，";
  }
  return s;
}

std::string make_code(uint64_t seed, size_t bytes) {
  Rng rng(seed);
  std::string s;
  while (s.size() < bytes) {
    std::string snippet = rng.pick(kCode);
    for (size_t d = rng.below(3); d > 0; --d) snippet = "    " + snippet;
    s += snippet;
    if (rng.below(5) == 0) s += random_json(rng, 0) + "\n";
  }
  return s;
}

}  // namespace di::recipe::testing
