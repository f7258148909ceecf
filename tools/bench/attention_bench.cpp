// `sprig bench attention`: forward and backward time of sprig's attention (attention/attention.h)
// for each mask kind of issue 4, with the throughput counted over allowed (query, key) pairs
// only: forward FLOPs 4 * D * allowed * H * B, backward 2.5x the forward (the FlashAttention
// convention, docs/kernels.md §7). On CUDA each case runs on sprig's kernels and, where cuDNN
// expresses the mask, on the cuDNN backend too (--backend). Every case is built from a mask spec of
// attention/mask_io.h, printed in the --json rows so that tools/bench/attention_*vs_torch.py
// rebuild the very same mask.
//
// Shapes: CUDA (bf16) runs issue 4's targets: causal T=4k and 16k with B*T = 16k, packed
// documents of 16k tokens (lengths drawn in 128..4k), a prefix tree N=8, P=2048, C=512, DFlash
// S=3072 with 512 anchors and bs=16; 16 heads, D=128. CPU (f32) runs a scaled-down set that takes
// seconds: T=1024, 4 heads, D=64.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "attention/attention.h"
#include "attention/backend.h"
#include "attention/cpu_attention.h"
#include "attention/cuda/device_tile_map.h"
#include "attention/cudnn/sdpa.h"
#include "attention/mask_io.h"
#include "tensor/cuda/kernels.h"
#include "tensor/random.h"
#include "tools/bench/memory_check.h"
#include "tools/bench/reference.h"
#include "tools/commands.h"
#include "tools/options.h"

namespace sprig::tools {

namespace {

using json = nlohmann::json;

struct AttentionOptions {
  std::string device = "auto", mask = "all", backend = "both";
  int64_t seq = 0, heads = 0, kv_heads = 0, head_dim = 0, batch = 0;  // 0: the device's default
  int reps = 0;
  bool json = false;
};

// One case: a mask spec and the batch rows that share it.
struct Case {
  std::string name;
  json spec;
  int64_t batch;
};

// Packed documents of `tokens` tokens: lengths drawn uniformly in [tokens/128, tokens/4] (128..4k
// at 16k tokens, seed 0) while they fit; the remainder joins the last document (docs/semantics.md
// §4.5).
json documents_spec(int64_t tokens) {
  Generator gen(0);
  const int64_t lo = std::max<int64_t>(tokens / 128, 1), hi = std::max(tokens / 4, lo);
  std::vector<int64_t> lens;
  int64_t used = 0;
  for (int64_t len = gen.next_int(lo, hi + 1); used + len <= tokens;
       len = gen.next_int(lo, hi + 1)) {
    lens.push_back(len);
    used += len;
  }
  if (lens.empty()) lens.push_back(tokens);
  return {{"kind", "documents"}, {"seq_lens", lens}, {"length", tokens}};
}

// One prompt of P tokens shared by N completions of C tokens (the folded layout of
// docs/semantics.md §1).
json prefix_tree_spec(int64_t n, int64_t p, int64_t c) {
  std::vector<int64_t> node_lengths{p};
  std::vector<std::vector<int64_t>> paths;
  for (int64_t j = 1; j <= n; ++j) {
    node_lengths.push_back(c);
    paths.push_back({0, j});
  }
  return {{"kind", "prefix_tree"}, {"node_lengths", node_lengths}, {"sample_paths", paths}};
}

// DFlash over a context of S tokens: `anchors` distinct sorted anchors drawn in [0, S - bs]
// (seed 0), all blocks kept, non-causal blocks.
json dflash_spec(int64_t ctx_len, int64_t anchors, int64_t block_size) {
  Generator gen(0);
  const int64_t positions = std::max<int64_t>(ctx_len - block_size, 0) + 1;
  if (anchors > positions)
    throw std::invalid_argument("[bench] " + std::to_string(anchors) + " DFlash anchors need " +
                                "ctx_len - block_size >= " + std::to_string(anchors - 1));
  std::set<int64_t> drawn;
  while (static_cast<int64_t>(drawn.size()) < anchors) drawn.insert(gen.next_int(0, positions));
  return {{"kind", "dflash"},
          {"ctx_len", ctx_len},
          {"block_size", block_size},
          {"anchors", std::vector<int64_t>(drawn.begin(), drawn.end())},
          {"keep", std::vector<bool>(static_cast<size_t>(anchors), true)},
          {"causal", false}};
}

// The cases of --mask on `device`. --seq sets the length of the causal and documents masks; the
// causal rows fill B*T = 16k tokens on CUDA unless --batch is given.
std::vector<Case> make_cases(const AttentionOptions& o, bool cuda) {
  const std::vector<int64_t> causal_lengths =
      o.seq > 0 ? std::vector<int64_t>{o.seq}
                : (cuda ? std::vector<int64_t>{4096, 16384} : std::vector<int64_t>{1024});
  const int64_t doc_tokens = o.seq > 0 ? o.seq : (cuda ? 16384 : 1024);
  const auto rows = [&](int64_t fill) { return o.batch > 0 ? o.batch : fill; };
  const bool all = o.mask == "all";
  std::vector<Case> cases;
  if (all || o.mask == "causal")
    for (int64_t t : causal_lengths)
      cases.push_back({"causal",
                       {{"kind", "causal"}, {"length", t}},
                       rows(cuda ? std::max<int64_t>(16384 / t, 1) : 1)});
  if (all || o.mask == "documents")
    cases.push_back({"documents", documents_spec(doc_tokens), rows(1)});
  if (all || o.mask == "prefix_tree")
    cases.push_back({"prefix_tree",
                     cuda ? prefix_tree_spec(8, 2048, 512) : prefix_tree_spec(8, 256, 64),
                     rows(1)});
  if (all || o.mask == "dflash")
    cases.push_back(
        {"dflash", cuda ? dflash_spec(3072, 512, 16) : dflash_spec(768, 64, 16), rows(1)});
  return cases;
}

// The backends a case runs on: sprig's kernels (always on the CPU), and on CUDA the cuDNN backend
// where this build and the loaded library run the case's mask.
std::vector<AttentionBackend> case_backends(const AttentionOptions& o, const Case& c, bool cuda) {
  std::vector<AttentionBackend> out;
  if (!cuda || o.backend != "cudnn") out.push_back(AttentionBackend::sprig);
  if (cuda && o.backend != "sprig") {
    const BatchMask mask(parse_mask_spec(c.spec.dump()));
    if (cudnn_route(AttentionBackend::automatic, mask, c.batch, o.head_dim,
                    cuda::cudnn::runtime_version()))
      out.push_back(AttentionBackend::cudnn);
  }
  return out;
}

// Refuses a case whose tensors cannot fit: q, dout, the output and its gradient, and the timed
// forward's output (5 x B x Tq x H x D), k, v and their gradients (4 x B x Tk x KV x D), two f32
// log-sum-exps (B x H x Tq), and the 64 x 64 tiles the mask's rectangles cover (about half of a
// causal one's), each an entry of three int32 in the tile map's query and key lists.
void check_case_fits(const Case& c, const AttentionOptions& o, Device device, DType dtype) {
  const Mask mask = parse_mask_spec(c.spec.dump());
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  double tiles = 0;
  for (const Rect& r : mask.rects)
    tiles += (r.kind == RectKind::causal ? 0.5 : 1.0) * std::ceil(d(r.q1 - r.q0) / 64) *
             std::ceil(d(r.k1 - r.k0) / 64);
  const double q = d(c.batch) * d(mask.q_len) * d(o.heads) * d(o.head_dim),
               k = d(c.batch) * d(mask.k_len) * d(o.kv_heads) * d(o.head_dim);
  const double bytes = static_cast<double>(dtype_size(dtype)) * (5 * q + 4 * k) +
                       8 * d(c.batch) * d(o.heads) * d(mask.q_len) + 24 * tiles;
  bench::check_fits("bench attention",
                    "the " + c.name + " case (B x Tq x Tk = " + std::to_string(c.batch) + " x " +
                        std::to_string(mask.q_len) + " x " + std::to_string(mask.k_len) +
                        ", --heads " + std::to_string(o.heads) + " --kv-heads " +
                        std::to_string(o.kv_heads) + " --head-dim " + std::to_string(o.head_dim) +
                        ")",
                    bytes, device);
}

struct Result {
  int64_t q_len, k_len, allowed;
  double tile_efficiency, fwd_s, bwd_s, fwd_flops;
};

// Allowed / visited elements of the tiles the forward kernel of `device` visits.
double forward_tile_efficiency(const AttentionMask& mask, Device device, int64_t head_dim) {
  if (!device.is_cuda())
    return mask.tile_map(cpu::kAttentionBlockM, cpu::kAttentionBlockN).efficiency();
  const cuda::TileShape s = cuda::flash_tile_shape(cuda::FlashPass::forward, head_dim);
  return mask.tile_map(s.block_m, s.block_n).efficiency();
}

Result run_case(const Case& c, const AttentionOptions& o, Device device, DType dtype,
                Generator& gen) {
  const AttentionMask mask{BatchMask(parse_mask_spec(c.spec.dump()))};
  const int64_t tq = mask.mask().q_len(), tk = mask.mask().k_len();
  const Tensor q = normal({c.batch, tq, o.heads, o.head_dim}, 0, 1, dtype, device, gen);
  const Tensor k = normal({c.batch, tk, o.kv_heads, o.head_dim}, 0, 1, dtype, device, gen);
  const Tensor v = normal({c.batch, tk, o.kv_heads, o.head_dim}, 0, 1, dtype, device, gen);
  const Tensor dout = normal(q.shape(), 0, 1, dtype, device, gen);
  const double scale = 1.0 / std::sqrt(static_cast<double>(o.head_dim));
  const int warmup = device.is_cuda() ? 3 : 1;

  const double fwd = bench::median_seconds(device, warmup, o.reps,
                                           [&] { attention_forward(q, k, v, mask, scale); });
  const AttentionOutput f = attention_forward(q, k, v, mask, scale);
  const double bwd = bench::median_seconds(device, warmup, o.reps, [&] {
    attention_backward(q, k, v, f.out, f.lse, dout, mask, scale);
  });
  const int64_t allowed = mask.intervals().allowed_elements();
  const double flops = 4.0 * static_cast<double>(o.head_dim) * static_cast<double>(allowed) *
                       static_cast<double>(o.heads * c.batch);
  return {tq, tk, allowed, forward_tile_efficiency(mask, device, o.head_dim), fwd, bwd, flops};
}

void run_bench_attention(AttentionOptions o) {
  const Device device = resolve_device(o.device);
  const bool cuda = device.is_cuda();
  if (!cuda && o.backend == "cudnn")
    throw CLI::ValidationError("--backend cudnn applies to CUDA devices; on " + device.str() +
                               " only sprig's kernels run");
  if (o.seq > 0 && (o.mask == "prefix_tree" || o.mask == "dflash"))
    throw CLI::ValidationError("--seq " + std::to_string(o.seq) +
                               " applies to the causal and documents masks, not --mask " + o.mask);
  const DType dtype = cuda ? DType::bf16 : DType::f32;
  // Options left out (0) take the device's defaults; given ones are positive (kPositive).
  if (o.heads == 0) o.heads = cuda ? 16 : 4;
  if (o.kv_heads == 0) o.kv_heads = o.heads;
  if (o.head_dim == 0) o.head_dim = cuda ? 128 : 64;
  if (o.reps == 0) o.reps = cuda ? 20 : 5;
  const std::vector<Case> cases = make_cases(o, cuda);
  for (const Case& c : cases) check_case_fits(c, o, device, dtype);
  // FLOP/s units: TFLOP/s on CUDA, GFLOP/s on CPU (the JSON rows always carry TFLOP/s).
  const double unit = cuda ? 1e12 : 1e9;
  if (!o.json)
    std::printf(
        "bench attention on %s, %s, %lld/%lld heads, D=%lld, median of %d runs; FLOP/s count "
        "allowed elements only (bwd = 2.5x fwd FLOPs), in %s\n%-12s %-7s %-24s %12s %8s %10s %10s "
        "%9s %9s %9s\n",
        device.str().c_str(), dtype_name(dtype), static_cast<long long>(o.heads),
        static_cast<long long>(o.kv_heads), static_cast<long long>(o.head_dim), o.reps,
        cuda ? "TFLOP/s" : "GFLOP/s", "mask", "backend", "B x Tq x Tk", "allowed", "tile eff",
        "fwd ms", "bwd ms", "fwd", "bwd", "fwd+bwd");
  Generator gen(1);
  for (const Case& c : cases)
    for (AttentionBackend backend : case_backends(o, c, cuda)) {
      set_attention_backend(backend);
      const Result r = run_case(c, o, device, dtype, gen);
      const char* backend_name = attention_backend_name(backend);
      const double fwd_rate = r.fwd_flops / r.fwd_s, bwd_rate = 2.5 * r.fwd_flops / r.bwd_s;
      const double total_rate = 3.5 * r.fwd_flops / (r.fwd_s + r.bwd_s);
      if (o.json) {
        std::cout << json{{"mask", c.name},
                          {"backend", backend_name},
                          {"device", device.str()},
                          {"dtype", dtype_name(dtype)},
                          {"batch", c.batch},
                          {"q_len", r.q_len},
                          {"k_len", r.k_len},
                          {"heads", o.heads},
                          {"kv_heads", o.kv_heads},
                          {"head_dim", o.head_dim},
                          {"allowed", r.allowed},
                          {"tile_efficiency", r.tile_efficiency},
                          {"fwd_ms", r.fwd_s * 1e3},
                          {"bwd_ms", r.bwd_s * 1e3},
                          {"fwd_tflops", fwd_rate / 1e12},
                          {"bwd_tflops", bwd_rate / 1e12},
                          {"fwd_bwd_tflops", total_rate / 1e12},
                          {"spec", c.spec}}
                         .dump()
                  << std::endl;
        continue;
      }
      const std::string shape = std::to_string(c.batch) + " x " + std::to_string(r.q_len) + " x " +
                                std::to_string(r.k_len);
      std::printf("%-12s %-7s %-24s %12lld %8.3f %10.3f %10.3f %9.1f %9.1f %9.1f\n", c.name.c_str(),
                  backend_name, shape.c_str(), static_cast<long long>(r.allowed), r.tile_efficiency,
                  r.fwd_s * 1e3, r.bwd_s * 1e3, fwd_rate / unit, bwd_rate / unit,
                  total_rate / unit);
    }
  set_attention_backend(AttentionBackend::automatic);
}

}  // namespace

void add_bench_attention_command(CLI::App& bench) {
  auto o = std::make_shared<AttentionOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "attention", "Attention forward/backward per mask kind, TFLOP/s over allowed elements");
  add_device_option(cmd, o->device);
  cmd->add_option("--backend", o->backend,
                  "CUDA kernels to time: sprig, cudnn (the masks cuDNN expresses) or both; the CPU "
                  "runs sprig's (and refuses cudnn)")
      ->check(CLI::IsMember({"sprig", "cudnn", "both"}))
      ->capture_default_str();
  cmd->add_option("--mask", o->mask, "causal, documents, prefix_tree, dflash or all")
      ->check(CLI::IsMember({"causal", "documents", "prefix_tree", "dflash", "all"}))
      ->capture_default_str();
  add_int_option(cmd, "--seq", o->seq,
                 "tokens of the causal and documents masks (default: 1024 on CPU; 4096 and "
                 "16384 causal, 16384 documents on CUDA)")
      ->check(kPositive);
  add_int_option(cmd, "--heads", o->heads, "query heads (default: 4 CPU, 16 CUDA)")
      ->check(kPositive);
  add_int_option(cmd, "--kv-heads", o->kv_heads, "key/value heads (default: --heads)")
      ->check(kPositive);
  add_int_option(cmd, "--head-dim", o->head_dim, "head dim D (default: 64 CPU, 128 CUDA)")
      ->check(kPositive);
  add_int_option(cmd, "--batch", o->batch,
                 "batch rows per mask (default: 1; causal on CUDA fills B*T = 16384)")
      ->check(kPositive);
  add_int_option(cmd, "--reps", o->reps, "timed runs after warm-up (default: 5 CPU, 20 CUDA)")
      ->check(kPositive);
  cmd->add_flag("--json", o->json, "one JSON object per mask (with its spec) instead of a table");
  cmd->callback([o] { run_bench_attention(*o); });
}

}  // namespace sprig::tools
