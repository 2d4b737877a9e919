// Tokenizer throughput: our encode (one thread) vs the HF tokenizers oracle (npm, one thread) on
// deterministic English prose, CJK prose and code. Plain main (no Google Benchmark) so the oracle
// can be timed in the same run. Times are CPU seconds (both sides), not wall time. usage:
// tokenizer_bench [MB per input, default 4]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "recipe/tokenizer/tokenizer.h"
#include "unit/recipe/node_oracle.h"
#include "unit/recipe/parity_corpus.h"

namespace {

using di::recipe::SpecialTokens;
using di::recipe::Tokenizer;
namespace t = di::recipe::testing;

// Splits like the oracle script: 64 KiB chunks, never inside a UTF-8 character.
std::vector<std::string_view> chunks_of(const std::string& s) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < s.size();) {
    size_t e = std::min(s.size(), i + 65536);
    while (e < s.size() && (static_cast<uint8_t>(s[e]) & 0xC0) == 0x80) ++e;
    out.push_back(std::string_view(s).substr(i, e - i));
    i = e;
  }
  return out;
}

// CPU time of this thread: the machine is shared, so wall time would measure the neighbours.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double time_ours(const Tokenizer& tok,
                 const std::vector<std::string_view>& chunks,
                 size_t* num_ids) {
  const double t0 = thread_cpu_seconds();
  size_t n = 0;
  for (const auto c : chunks) n += tok.encode(c, SpecialTokens::kNone).size();
  *num_ids = n;
  return thread_cpu_seconds() - t0;
}

double time_oracle(const std::string& text) {
  const std::string in = t::temp_path("di_bench_in");
  const std::string out = t::temp_path("di_bench_out");
  std::ofstream(in, std::ios::binary) << text;
  const std::string cmd = "node '" + t::oracle_script_path() + "' '" + t::v3_tokenizer_path() +
                          "' bench '" + in + "' '" + out + "'";
  const int rc = std::system(cmd.c_str());
  double secs = -1;
  if (rc == 0) std::ifstream(out) >> secs;
  std::remove(in.c_str());
  std::remove(out.c_str());
  return secs;
}

}  // namespace

int main(int argc, char** argv) {
  const double mb = argc > 1 ? std::atof(argv[1]) : 4.0;
  const auto bytes = static_cast<size_t>(mb * 1e6);
  const di::Status avail = t::check_oracle_available();
  if (!avail.ok()) {
    std::fprintf(stderr, "%s\n", avail.to_string().c_str());
    return 2;
  }
  auto tok = Tokenizer::from_file(t::v3_tokenizer_path());
  if (!tok) {
    std::fprintf(stderr, "%s\n", tok.status().to_string().c_str());
    return 2;
  }
  const std::pair<const char*, std::string> inputs[] = {
      {"english", t::make_english_prose(1, bytes)},
      {"cjk", t::make_cjk_prose(2, bytes)},
      {"code", t::make_code(3, bytes)},
  };
  std::printf(
      "| input | MB | ours cold MB/s | ours warm MB/s | HF oracle MB/s | ratio (warm/HF) |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  for (const auto& [name, text] : inputs) {
    const auto chunks = chunks_of(text);
    size_t n = 0;
    const double cold = time_ours(*tok, chunks, &n);
    double warm = 1e9;
    for (int r = 0; r < 3; ++r) warm = std::min(warm, time_ours(*tok, chunks, &n));
    const double oracle = time_oracle(text);
    const double mbs = text.size() / 1e6;
    std::printf("| %s | %.1f | %.1f | %.1f | %.2f | %.0fx |\n", name, mbs, mbs / cold, mbs / warm,
                oracle > 0 ? mbs / oracle : 0.0, oracle > 0 ? oracle / warm : 0.0);
    std::fflush(stdout);
  }
  return 0;
}
