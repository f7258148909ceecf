// attention/cuda/flash_fwd.cu and flash_bwd.cu run on the emulated device against the dense host
// reference: the tables of tests/parity/attention_cases.h (every mask kind, lengths with ragged
// tails and several tiles, fully masked rows and unseen keys, the atomic and the deterministic
// dQ), long entry lists and ragged tiles, and the shared memory limit raised before any launch.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "attention/cuda/flash_bwd.cu"  // compiled against tests/kernel_emu/device_emu.h
#include "attention/cuda/flash_fwd.cu"
#include "tests/attention/flash_reference.h"
#include "tests/parity/attention_cases.h"

namespace sprig {
namespace {

using flash_test::Inputs;
using flash_test::Kind;
using flash_test::Outputs;
using flash_test::Problem;

Outputs emulated_flash(const Problem& p, const Inputs& host, bool deterministic) {
  const flash_test::PassMaps maps = flash_test::pass_maps(p, Device::cpu());
  const Tensor out = parity::nan_like(host.q), dq = parity::nan_like(host.q),
               dk = parity::nan_like(host.k), dv = parity::nan_like(host.k);
  const Tensor lse = parity::nan_like(Tensor::empty({p.batch, p.q_heads, p.q_len()}));
  cuda::run_flash_forward(host.q, host.k, host.v, maps.forward, p.scale(), out, lse, nullptr);
  cuda::run_flash_backward(host.q, host.k, host.v, out, lse, host.dout, maps.backward, p.scale(),
                           dq, dk, dv, nullptr, deterministic);
  return flash_test::host_outputs(out, lse, dq, dk, dv);
}

SPRIG_EMU_PARITY_TEST(FlashEmu, Causal,
                      parity::flash_cases(Kind::causal, {1, 17, 200}, emulated_flash, false))
SPRIG_EMU_PARITY_TEST(FlashEmu, DocumentsWithAMaskPerBatchRow,
                      parity::flash_cases(Kind::documents, {17, 97}, emulated_flash, false))
SPRIG_EMU_PARITY_TEST(FlashEmu, PrefixTree,
                      parity::flash_cases(Kind::prefix_tree, {17, 97}, emulated_flash, false))
SPRIG_EMU_PARITY_TEST(FlashEmu, DFlash,
                      parity::flash_cases(Kind::dflash, {17, 97}, emulated_flash, false))
SPRIG_EMU_PARITY_TEST(FlashEmu, FullyMaskedRowsAndUnseenKeys,
                      parity::fully_masked_cases(emulated_flash, false))
SPRIG_EMU_PARITY_TEST(FlashEmu, Float16, parity::float16_cases(emulated_flash, false))

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
  std::vector<parity::Case> cases;
  for (int64_t d : {64, 128})
    cases.push_back(parity::attention_case({BatchMask(m), 2, 2, 1, d}, 11 + d, parity::kEmu,
                                           emulated_flash, false));
  parity::check(cases, parity::kEmu);
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
