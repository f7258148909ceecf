// attention/cuda/flash_fwd.cu and flash_bwd.cu run on the emulated device against the dense host
// reference of tests/attention/flash_reference.h, with FlashAttention's rule: every mask kind
// (causal, packed documents with a different mask per batch row and a sliding window, prefix
// trees, DFlash blocks), head dims 64 and 128, GQA 1:1 and 4:1, lengths with ragged tails and
// several tiles, fully masked rows and unseen keys, the atomic and the deterministic dQ.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "attention/cuda/flash_bwd.cu"  // compiled against tests/kernel_emu/device_emu.h
#include "attention/cuda/flash_fwd.cu"
#include "tests/attention/flash_reference.h"
#include "tests/kernel_emu/emu_test_util.h"

namespace sprig {
namespace {

using flash_test::Inputs;
using flash_test::Kind;
using flash_test::make_mask;
using flash_test::Outputs;
using flash_test::Problem;

Outputs emulated_flash(const Problem& p, const Inputs& host, bool deterministic) {
  const flash_test::PassMaps maps = flash_test::pass_maps(p, Device::cpu());
  const Tensor out = emu::nan_like(host.q), dq = emu::nan_like(host.q), dk = emu::nan_like(host.k),
               dv = emu::nan_like(host.k);
  const Tensor lse = emu::nan_like(Tensor::empty({p.batch, p.q_heads, p.q_len()}));
  cuda::run_flash_forward(host.q, host.k, host.v, maps.forward, p.scale(), out, lse, nullptr);
  cuda::run_flash_backward(host.q, host.k, host.v, out, lse, host.dout, maps.backward, p.scale(),
                           dq, dk, dv, nullptr, deterministic);
  return flash_test::host_outputs(out, lse, dq, dk, dv);
}

void check_kind(Kind kind, std::initializer_list<int64_t> lengths) {
  uint64_t seed = 100;
  for (int64_t t : lengths)
    for (int64_t d : {64, 128})
      for (int64_t group : {1, 4}) {
        const int64_t batch = t <= 97 ? 2 : 1;
        flash_test::check_flash({make_mask(kind, t, batch), batch, group, 1, d}, seed += 10,
                                emulated_flash);
      }
}

TEST(FlashEmu, Causal) { check_kind(Kind::causal, {1, 17, 200}); }

TEST(FlashEmu, DocumentsWithAMaskPerBatchRow) { check_kind(Kind::documents, {17, 97}); }

TEST(FlashEmu, PrefixTree) { check_kind(Kind::prefix_tree, {17, 97}); }

TEST(FlashEmu, DFlash) { check_kind(Kind::dflash, {17, 97}); }

// Rows 0-149 see nothing (query tile 0 has no entries at all), keys 210-299 are seen by nobody.
TEST(FlashEmu, FullyMaskedRowsAndUnseenKeys) {
  const Mask m{300, 300, {Rect{150, 300, 0, 150}, Rect{200, 260, 150, 210, RectKind::causal}}};
  for (int64_t d : {64, 128})
    flash_test::check_flash({BatchMask(m), 1, 2, 1, d}, 7 + d, emulated_flash);
}

TEST(FlashEmu, Float16) {
  flash_test::check_flash({make_mask(Kind::documents, 97, 2), 2, 2, 1, 64, DType::f16}, 3,
                          emulated_flash);
}

// Long entry lists, so the forward refills both of its K/V buffer pairs several times, partial
// entries first (2 or 3 at D 64, 3 or 6 at D 128) and full ones after; a query tile whose list
// holds only full entries; and a last query tile of 2 rows, the only rows of its O tile (staged in
// shared memory) that may be stored: rows past them are rows of batch row 1, which its own CTAs
// have already written (the 2-row tile is last in the LPT order). Rows 0-129 see keys 0-449 and a
// causal band over keys 450-579, rows 130-257 keys 0-255; keys 580-699 are seen by nobody.
TEST(FlashEmu, LongEntryListsAndRaggedTiles) {
  const Mask m{
      258,
      700,
      {Rect{0, 130, 0, 450}, Rect{0, 130, 450, 580, RectKind::causal}, Rect{130, 258, 0, 256}}};
  for (int64_t d : {64, 128})
    flash_test::check_flash({BatchMask(m), 2, 2, 1, d}, 11 + d, emulated_flash);
}

// The first launches of a kernel on a device, from several threads at once: none launches before
// its shared memory limit is raised, and the limit is raised once.
TEST(FlashEmu, SharedMemoryLimitIsRaisedBeforeAnyThreadLaunches) {
  std::atomic<int> limit{0}, raises{0}, launched_early{0};
  const int kernel = 0;  // any address stands for a kernel
  const auto first_launch = [&] {
    cuda::flash::raise_smem_limit_once(&kernel, [&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a slow attribute call
      ++raises;
      limit = 100 << 10;
      return cudaSuccess;
    });
    if (limit < (100 << 10)) ++launched_early;  // this thread's launch would fail now
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back(first_launch);
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(raises, 1);
  EXPECT_EQ(launched_early, 0);
}

}  // namespace
}  // namespace sprig
