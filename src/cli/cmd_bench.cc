// deepinfer bench offline ... (cmd_bench_offline.cc), bench serve ... (cmd_bench_serve.cc),
// bench kernels ... (bench/cuda/kernels_bench.cc, CUDA builds only), or
// deepinfer bench step --model DIR [--prompt-len P] [--decode-steps D] [--batch B] [--threads N]
// [--context N]: times the forward on the chosen backend (--backend cpu|cuda): one prefill step
// over B prompts of P tokens (after N positions of synthetic state), then D decode steps of B
// tokens. Prints tokens/s for both phases, the decode step against its byte floor and, on cuda,
// both phases against their FLOP floors (model/forward_flops.h over cuBLASLt's peaks).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>
#include <random>

#include "backend/select.h"
#ifdef DI_HAVE_CUDA
#include "cuda/cublaslt_gemm.h"
#include "cuda/kernels_bench.h"
#endif
#include "cli/backend_flags.h"
#include "cli/bench_context.h"
#include "cli/commands.h"
#include "cli/parse_flags.h"
#include "engine/sampler.h"
#include "kernels/ref/sample_math.h"
#include "model/checkpoint_layout.h"
#include "model/forward_flops.h"
#include "model/model.h"

namespace di::cli {

namespace {

// "temperature=0.8,top_p=0.95,top_k=50": bench step --sample's parameters, checked as a
// request's are (engine::validate_sampling). The message says what is wrong.
Status parse_sample_spec(const std::string& spec, kernels::sample::RowParams& out) {
  const Status usage = invalid_argument(
      "--sample takes key=value pairs (temperature, top_p, top_k, min_p, repetition_penalty, "
      "presence_penalty, frequency_penalty), got '" +
      spec + "'");
  engine::SamplingParams p;
  size_t at = 0;
  while (at < spec.size()) {
    size_t end = spec.find(',', at);
    if (end == std::string::npos) end = spec.size();
    const std::string item = spec.substr(at, end - at);
    at = end + 1;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return usage;
    const std::string key = item.substr(0, eq);
    char* rest = nullptr;
    const float v = std::strtof(item.c_str() + eq + 1, &rest);
    if (rest == item.c_str() + eq + 1 || *rest != '\0') return usage;
    if (key == "temperature") {
      p.temperature = v;
    } else if (key == "top_p") {
      p.top_p = v;
    } else if (key == "top_k") {
      if (v != std::floor(v) || std::fabs(v) > 1e9f) return usage;
      p.top_k = static_cast<int>(v);
    } else if (key == "min_p") {
      p.min_p = v;
    } else if (key == "repetition_penalty") {
      p.repetition_penalty = v;
    } else if (key == "presence_penalty") {
      p.presence_penalty = v;
    } else if (key == "frequency_penalty") {
      p.frequency_penalty = v;
    } else {
      return usage;
    }
  }
  DI_RETURN_IF_ERROR(engine::validate_sampling(p).with_context("--sample"));
  out.temperature = p.temperature;
  out.top_p = p.top_p;
  out.top_k = p.top_k;
  out.min_p = p.min_p;
  out.repetition_penalty = p.repetition_penalty;
  out.presence_penalty = p.presence_penalty;
  out.frequency_penalty = p.frequency_penalty;
  return Status();
}

// Best of three 256 MiB memcpy passes, counting bytes read plus bytes written.
// Copy bandwidth of the backend's own memory (host RAM for the CPU backend, HBM for CUDA): the
// best of three 256 MiB copies between two backend buffers, bytes read plus written; the
// one-float download after each copy waits for it.
double measure_copy_bandwidth(const backend::Ops& ops) {
  const int64_t n = int64_t{64} << 20;  // floats
  backend::Buffer a(ops, 1, n), b(ops, 1, n);
  if (!a.data() || !b.data()) return 0;
  ops.fill(a.data(), 1.0f, n);
  float probe = 0;
  double best = 0;
  for (int i = 0; i < 4; ++i) {
    ops.download(a.data(), &probe, 1);  // drain earlier work before the clock starts
    auto t0 = std::chrono::steady_clock::now();
    ops.copy(a.data(), b.data(), n);
    ops.download(b.data() + n - 1, &probe, 1);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i > 0) best = std::max(best, 2.0 * 4.0 * static_cast<double>(n) / s);
  }
  return best + static_cast<double>(probe) * 0.0;
}

// The tensor-core peaks a FLOP floor divides by, measured now: cuBLASLt's FP8 (per-tensor scale)
// and BF16 rates at 8192^3 on the cuda backend. The cpu backend has no such probe: its steps get
// no FLOP floor (both 0).
struct TensorPeaks {
  double fp8 = 0, bf16 = 0;  // FLOP/s
};
TensorPeaks measure_tensor_peaks(const backend::Ops& ops) {
  TensorPeaks p;
#ifdef DI_HAVE_CUDA
  if (std::string(ops.name()) != "cuda") return p;
  constexpr int64_t kN = 8192;
  const double flops = 2.0 * kN * kN * kN;
  auto fp8 = bench::time_cublaslt_gemm(bench::LtType::kFP8, kN, kN, kN, 10);
  auto bf16 = bench::time_cublaslt_gemm(bench::LtType::kBF16, kN, kN, kN, 10);
  if (fp8 && bf16) p = {flops / (*fp8 * 1e-3), flops / (*bf16 * 1e-3)};
#else
  (void)ops;
#endif
  return p;
}

// Weight bytes one decode step of `batch` sequences must read: every backbone tensor except the
// embedding (one row), the routed experts the batch is expected to touch (uniform routing: each
// expert is missed by all rows with probability (1 - k/E)^batch), the head, and what seeding the
// DSpark windows reads (main_proj and each draft layer's wkv).
double decode_weight_bytes(const model::ModelConfig& c, int batch) {
  const double touched =
      1.0 - std::pow(1.0 - static_cast<double>(c.n_activated_experts) / c.n_routed_experts, batch);
  double bytes = 0;
  for (const auto& t : model::checkpoint_tensor_specs(c)) {
    if (!model::read_by_target_step(t)) continue;
    const double b = static_cast<double>(model::stored_bytes(t));
    if (t.name.find(".experts.") != std::string::npos) {
      bytes += b * touched;
      continue;
    }
    bytes += b;
  }
  return bytes;
}

// Per step (`what`: decode or prefill): each op's calls, device time and host (enqueue) time, and
// the totals next to the measured step time; the gap is where the device waited for the host.
void print_op_profile(const char* what,
                      const std::vector<backend::OpTime>& profile,
                      int steps,
                      double seconds) {
  std::printf("ops per %s step (device and host time of each op, us):\n", what);
  std::printf("  %-18s %8s %10s %10s\n", "op", "calls", "device", "host");
  double device = 0, host = 0;
  for (const auto& t : profile) {
    std::printf("  %-18s %8.1f %10.1f %10.1f\n", t.op.c_str(), static_cast<double>(t.calls) / steps,
                1e3 * t.device_ms / steps, 1e3 * t.host_ms / steps);
    device += t.device_ms;
    host += t.host_ms;
  }
  std::printf("  %-18s %8s %10.1f %10.1f   (step %.1f us)\n", "total", "", 1e3 * device / steps,
              1e3 * host / steps, 1e6 * seconds / steps);
}

}  // namespace

int run_bench_command(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "offline") {
    return run_bench_offline_command(argc - 1, argv + 1);
  }
  if (argc > 1 && std::string(argv[1]) == "serve") {
    return run_bench_serve_command(argc - 1, argv + 1);
  }
  if (argc > 1 && std::string(argv[1]) == "kernels") {
#ifdef DI_HAVE_CUDA
    return di::bench::run_kernels_bench(argc - 1, argv + 1);
#else
    std::cerr << "deepinfer bench kernels: this build has no CUDA backend (configure with "
                 "-DDEEPINFER_CUDA=ON; scripts/setup.sh does when nvcc is installed)\n";
    return 2;
#endif
  }
  CLI::App app{"Benchmark the forward pass", "bench"};
  std::string dir, what = "step";
  int prompt_len = 128, decode_steps = 16, batch = 1;
  unsigned threads = 0;
  app.add_option("WHAT", what, "what to time (step)")->check(CLI::IsMember({"step"}));
  app.add_option("--model", dir, "checkpoint folder")->required();
  app.add_option("--prompt-len", prompt_len, "prompt tokens per sequence")
      ->check(CLI::PositiveNumber);
  app.add_option("--decode-steps", decode_steps, "decode steps")->check(CLI::NonNegativeNumber);
  app.add_option("--batch", batch, "sequences per step")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "CPU threads (default: all cores)");
  int64_t replay_tail = 0;
  app.add_option(
         "--replay-tail", replay_tail,
         "SWA bounded replay: late layers prefill only the last N prompt tokens (0: exact); "
         "also reports the last-row logit difference against an exact prefill")
      ->check(CLI::NonNegativeNumber);
  bool argmax_only = false;
  app.add_flag("--argmax", argmax_only,
               "greedy sampling on the backend: only each row's argmax is copied to the host (the "
               "engine does this for greedy requests without logits processors)");
  bool pipeline = false;
  app.add_flag("--pipeline", pipeline,
               "decode steps feed each step's tokens back on the backend (pending tokens): step "
               "k + 1 is issued before step k's tokens are downloaded (with --argmax or --sample)");
  std::string sample_spec;
  app.add_option("--sample", sample_spec,
                 "sampling on the backend with these parameters, e.g. "
                 "temperature=0.8,top_p=0.95,top_k=50[,min_p=M,repetition_penalty=R]: only each "
                 "row's token is copied to the host (the engine does this for every request "
                 "without logprobs)");
  int64_t context = 0;
  app.add_option("--context", context,
                 "positions of synthetic state each sequence holds before the prompt (random "
                 "rows in the real formats; a multiple of every compress ratio)")
      ->check(CLI::NonNegativeNumber);
  backend::BackendOptions backend_opts;
  add_backend_flags(app, backend_opts);
  app.add_flag("--profile-ops", backend_opts.profile_ops,
               "time every op of the decode steps (cuda backend) and print them per step");
  app.add_flag("--idle-clock", backend_opts.time_idle,
               "time the device's idle gap after each host wait (cuda backend; two events per "
               "wait, which cost the step a little)");
  DI_PARSE_FLAGS(app, argc, argv);
  kernels::sample::RowParams sample_params;
  if (!sample_spec.empty()) {
    const Status ps = parse_sample_spec(sample_spec, sample_params);
    if (!ps.ok()) {
      std::cerr << "deepinfer bench: " << ps.message() << "\n";
      return 2;
    }
    argmax_only = true;  // the same path: only the rows' tokens come back
  }
  if (pipeline && !argmax_only) {
    std::cerr << "deepinfer bench: --pipeline needs --argmax or --sample (the tokens it feeds "
                 "back are chosen on the backend)\n";
    return 2;
  }
  if (argmax_only && replay_tail > 0) {
    std::cerr << "deepinfer bench: --argmax cannot be combined with --replay-tail (the replay "
                 "comparison needs the logits)\n";
    return 2;
  }
  ThreadPool pool(threads);
  auto ops_or = backend::make_backend(pool, backend_opts);
  if (!ops_or) {
    std::cerr << "deepinfer bench: " << ops_or.status().to_string() << "\n";
    return 2;
  }
  const backend::Ops& ops = **ops_or;
  auto model = model::Model::load(dir, ops);
  if (!model) {
    std::cerr << "deepinfer bench: " << model.status().to_string() << "\n";
    return 2;
  }
  const auto& c = (*model)->config();
  auto state = model::StatePool::create(
      c, {batch, static_cast<int64_t>(batch) * (context + prompt_len + decode_steps + 8), 64},
      (*model)->ops());
  if (!state) {
    std::cerr << "deepinfer bench: " << state.status().to_string() << "\n";
    return 2;
  }
  std::vector<model::SequenceState> seqs;
  {
    // A prefill of the measured length first (one token when the prompt is one token), on a
    // sequence released after it: a device backend uploads (and caches) the weights and grows its
    // scratch buffers on first use, which is not the measured prefill's time.
    model::SequenceState warm = state->create_sequence().value();
    model::ForwardContext ctx;
    ctx.pool = &*state;
    ctx.chunks.push_back(
        {&warm, std::vector<int32_t>(static_cast<size_t>(std::max(prompt_len, 1)), 1), 0});
    std::vector<float> logits;
    Status w = (*model)->forward(ctx, {0}, logits);
    if (w.ok()) w = ops.status();
    state->release_sequence(warm);
    if (!w.ok()) {
      std::cerr << "deepinfer bench: warm-up forward: " << w.to_string() << "\n";
      return 2;
    }
    (void)ops.take_op_profile();  // not the prefill's ops
  }
  for (int b = 0; b < batch; ++b) seqs.push_back(state->create_sequence().value());
  double context_s = 0;
  if (context > 0) {
    const auto t0 = std::chrono::steady_clock::now();
    Status f = fill_synthetic_context((*model)->ops(), c, *state, seqs, context, 7);
    if (!f.ok()) {
      std::cerr << "deepinfer bench: --context: " << f.to_string() << "\n";
      return 2;
    }
    context_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> tok(3, c.vocab_size - 1);
  // Wall time, and the process's CPU time: on a shared machine the CPU time is what this run cost.
  auto cpu_now = [] { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; };
  double prefill_cpu = 0, decode_cpu = 0;
  std::vector<float> last_logits;
  // A pipelined step's tokens: waited for, then each sequence's pending token recorded.
  auto collect_tokens = [&](model::LogitsSelection& done) -> Status {
    DI_RETURN_IF_ERROR((*model)->wait_tokens(done));
    for (int b = 0; b < batch; ++b) {
      DI_RETURN_IF_ERROR((*model)->commit_token(seqs[static_cast<size_t>(b)],
                                                done.argmax[static_cast<size_t>(b)]));
    }
    return Status();
  };
  // Pipelined decode: the previous step's selection, whose tokens the next step reads.
  model::LogitsSelection selections[2];
  model::LogitsSelection* feed = nullptr;
  int parity = 0;
  auto step = [&](int tokens_per_seq, double* seconds, double* cpu) -> Status {
    model::ForwardContext ctx;
    ctx.pool = &*state;
    std::vector<int64_t> rows;
    for (int b = 0; b < batch; ++b) {
      std::vector<int32_t> t(static_cast<size_t>(tokens_per_seq));
      for (auto& x : t) x = tok(rng);
      const int64_t start = seqs[static_cast<size_t>(b)].num_tokens;
      const int64_t replay_from =
          replay_tail > 0 ? std::max<int64_t>(0, start + tokens_per_seq - replay_tail) : 0;
      ctx.chunks.push_back({&seqs[static_cast<size_t>(b)], t, replay_from});
      if (feed) {
        ctx.chunks.back().pending =
            reinterpret_cast<const int32_t*>(feed->device_tokens.data()) + b;
      }
      rows.push_back(static_cast<int64_t>(b + 1) * tokens_per_seq - 1);
    }
    // The logits land in one vector kept across steps (as the engine keeps its own): a fresh
    // 132 MB vector per step at batch 256 costs more in page faults than the copy itself.
    auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_now();
    model::LogitsSelection local;
    model::LogitsSelection& selection =
        pipeline && tokens_per_seq == 1 ? selections[parity] : local;
    selection = model::LogitsSelection();
    selection.defer = pipeline && tokens_per_seq == 1;
    selection.full.assign(rows.size(), argmax_only ? 0 : 1);
    if (!sample_spec.empty()) {
      // Each row its own generator key (as requests at their positions would have).
      selection.full.assign(rows.size(), model::kLogitsSample);
      selection.params.assign(rows.size(), sample_params);
      for (size_t r = 0; r < rows.size(); ++r) {
        selection.params[r].key =
            kernels::sample::row_key(1, r, static_cast<uint64_t>(seqs[r].num_tokens));
      }
    }
    Status s = (*model)->forward(ctx, rows, last_logits, argmax_only ? &selection : nullptr);
    if (s.ok()) s = ops.status();
    if (s.ok() && selection.defer) {
      // The previous step's tokens, waited for while this step runs, then recorded.
      if (feed) s = collect_tokens(*feed);
      feed = &selection;
      parity ^= 1;
    }
    *seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    *cpu += cpu_now() - c0;
    return s;
  };
  double prefill_s = 0, decode_s = 0;
  Status s = step(prompt_len, &prefill_s, &prefill_cpu);
  std::vector<float> replay_logits;
  if (replay_tail > 0) replay_logits = last_logits;
  const uint64_t syncs_before_decode = ops.host_syncs();
  const double waits_before_decode = ops.host_wait_seconds();
  const double idle_before_decode = ops.device_idle_seconds();
  const backend::Ops::SegmentStats segments_before = ops.segment_stats();
  // The prefill's ops are reported only when no decode step follows.
  const std::vector<backend::OpTime> prefill_profile = ops.take_op_profile();
  for (int i = 0; s.ok() && i < decode_steps; ++i) s = step(1, &decode_s, &decode_cpu);
  if (s.ok() && feed) {
    // The last step's tokens feed no step: waited for, not recorded.
    const auto t0 = std::chrono::steady_clock::now();
    s = (*model)->wait_tokens(*feed);
    decode_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    feed = nullptr;
  }
  const uint64_t decode_syncs = ops.host_syncs() - syncs_before_decode;
  const double decode_wait_s = ops.host_wait_seconds() - waits_before_decode;
  const double decode_idle_s = ops.device_idle_seconds() - idle_before_decode;
  backend::Ops::SegmentStats segments = ops.segment_stats();
  segments.replayed -= segments_before.replayed;
  segments.captured -= segments_before.captured;
  segments.eager -= segments_before.eager;
  const std::vector<backend::OpTime> profile = ops.take_op_profile();
  if (!s.ok()) {
    std::cerr << "deepinfer bench: " << s.to_string() << "\n";
    return 2;
  }
  std::printf("model %s: %d layers + %d DSpark, hidden %d, %d experts; %s backend, %u threads\n",
              dir.c_str(), c.n_layers, c.n_mtp_layers, c.dim, c.n_routed_experts, ops.name(),
              pool.num_threads());
  std::printf("state pool: %.2f MiB (FP8 window rings, FP4 compressed KV, fp32 index keys)\n",
              static_cast<double>(state->bytes()) / (1 << 20));
  if (context > 0) {
    std::printf("context: %lld synthetic positions per sequence (state written in %.2f s)\n",
                static_cast<long long>(context), context_s);
  }
  std::printf("prefill: batch %d x %d tokens in %.3f s = %.1f tokens/s (%.2f CPU-s)\n", batch,
              prompt_len, prefill_s, batch * prompt_len / prefill_s, prefill_cpu);
  const TensorPeaks peaks = measure_tensor_peaks(ops);
  const model::ForwardFlops prefill_work = model::prefill_flops(c, batch, prompt_len, context);
  if (peaks.fp8 > 0) {
    std::printf("compute: cuBLASLt 8192^3 peaks FP8 %.0f TFLOP/s, BF16 %.0f TFLOP/s\n",
                peaks.fp8 / 1e12, peaks.bf16 / 1e12);
    const double floor_s = prefill_work.seconds(peaks.fp8, peaks.bf16);
    std::printf(
        "prefill FLOP floor: %.1f GFLOP at FP8 + %.1f GFLOP at BF16 = %.3f ms; FLOP floor / "
        "prefill time %.3f\n",
        prefill_work.fp8 / 1e9, prefill_work.bf16 / 1e9, 1e3 * floor_s, floor_s / prefill_s);
  }
  if (replay_tail > 0) {
    // The same prompts again, exact, on fresh sequences: the cost of the approximation.
    for (auto& sq : seqs) state->release_sequence(sq);
    seqs.clear();
    for (int b = 0; b < batch; ++b) seqs.push_back(state->create_sequence().value());
    rng.seed(1);
    const int64_t keep_tail = replay_tail;
    replay_tail = 0;
    double exact_s = 0, exact_cpu = 0;
    Status e = step(prompt_len, &exact_s, &exact_cpu);
    replay_tail = keep_tail;
    if (!e.ok()) {
      std::cerr << "deepinfer bench: " << e.to_string() << "\n";
      return 2;
    }
    double max_abs = 0, sum = 0;
    for (size_t i = 0; i < last_logits.size(); ++i) {
      const double d = std::fabs(static_cast<double>(last_logits[i]) - replay_logits[i]);
      max_abs = std::max(max_abs, d);
      sum += d;
    }
    std::printf(
        "bounded replay (tail %lld): prefill %.3f s vs exact %.3f s = %.2fx; last-row logits "
        "vs exact: max abs %.4f, mean abs %.5f\n",
        static_cast<long long>(keep_tail), prefill_s, exact_s, exact_s / prefill_s, max_abs,
        sum / static_cast<double>(std::max<size_t>(1, last_logits.size())));
  }
  const double bw = measure_copy_bandwidth(ops);
  const double weight_bytes = decode_weight_bytes(c, batch);
  const double kv_bytes =
      batch * decode_kv_bytes(c, context + prompt_len + decode_steps / 2);  // mid-run context
  const double bytes = weight_bytes + kv_bytes;
  std::printf(
      "memory: copy bandwidth %.1f GB/s; a decode step of %d sequences reads >= %.1f MB of "
      "weights + %.1f MB of KV state and index keys, floor %.3f ms\n",
      bw / 1e9, batch, weight_bytes / 1e6, kv_bytes / 1e6, 1e3 * bytes / bw);
  if (decode_steps > 0) {
    std::printf(
        "decode:  batch %d x %d steps in %.3f s = %.2f tokens/s (%.1f ms/step, %.2f CPU-s, %.1f "
        "host waits/step; byte floor / step time %.3f)\n",
        batch, decode_steps, decode_s, batch * decode_steps / decode_s,
        1e3 * decode_s / decode_steps, decode_cpu, static_cast<double>(decode_syncs) / decode_steps,
        bw > 0 ? (bytes / bw) / (decode_s / decode_steps) : 0.0);
    if (peaks.fp8 > 0) {
      // The same mid-run context as the byte floor's.
      const model::ForwardFlops work =
          model::decode_step_flops(c, batch, context + prompt_len + decode_steps / 2);
      const double flop_s = work.seconds(peaks.fp8, peaks.bf16), byte_s = bw > 0 ? bytes / bw : 0;
      const double step_s = decode_s / decode_steps;
      std::printf(
          "decode FLOP floor: %.2f GFLOP at FP8 + %.2f GFLOP at BF16 per step = %.3f ms; floor = "
          "max(byte %.3f, FLOP %.3f) ms, floor / step time %.3f (%s-bound)\n",
          work.fp8 / 1e9, work.bf16 / 1e9, 1e3 * flop_s, 1e3 * byte_s, 1e3 * flop_s,
          std::max(byte_s, flop_s) / step_s, flop_s > byte_s ? "FLOP" : "byte");
    }
    // Wall time minus the waits is the host's own work per step: when it is most of the step, the
    // device idles between ops (what CUDA graphs remove). A host backend never waits.
    if (decode_syncs > 0) {
      std::printf("decode host: %.3f ms/step issuing ops, %.3f ms/step waiting for the device\n",
                  1e3 * (decode_s - decode_wait_s) / decode_steps,
                  1e3 * decode_wait_s / decode_steps);
      // From the end of the work each wait waited for to the next work issued: the download,
      // the host's bookkeeping between steps and its issue up to the first launch.
      if (decode_idle_s > 0) {
        std::printf("decode device idle after host waits: %.1f us/step (%.1f %% of the step)\n",
                    1e6 * decode_idle_s / decode_steps, 100 * decode_idle_s / decode_s);
      }
    }
    if (segments.replayed + segments.captured > 0) {
      std::printf("decode segments (CUDA graphs): %lld replayed, %lld captured, %lld eager\n",
                  static_cast<long long>(segments.replayed),
                  static_cast<long long>(segments.captured),
                  static_cast<long long>(segments.eager));
    }
  }
  if (backend_opts.profile_ops && decode_steps > 0) {
    if (profile.empty()) {
      std::printf("ops per decode step: the %s backend does not profile its ops\n", ops.name());
    } else {
      print_op_profile("decode", profile, decode_steps, decode_s);
    }
  }
  if (backend_opts.profile_ops && decode_steps == 0 && !prefill_profile.empty()) {
    print_op_profile("prefill", prefill_profile, 1, prefill_s);
  }
  return 0;
}

}  // namespace di::cli
