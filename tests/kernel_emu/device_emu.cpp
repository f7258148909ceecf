// The scheduler of the emulated device (device_emu.h): one fiber per CTA thread, run warp by warp
// in a fixed order, each until it blocks on a barrier or a warp collective; a thread that blocks is
// skipped until the generation counter it waits on moves. A fiber starts on its own stack through
// ucontext and from then on switches with _setjmp/_longjmp, which (unlike swapcontext) save no
// signal mask and so make no system call.
#include "tests/kernel_emu/device_emu.h"

#include <setjmp.h>
#include <ucontext.h>

#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace sprig::emu {
namespace {

constexpr size_t kStackBytes = 256 << 10;
constexpr size_t kMaxDynamicSmem = 227 << 10;  // the opt-in limit of a Hopper CTA

struct Copy {
  uint32_t dst;
  const void* src;
  int bytes;
};

struct Thread {
  uint3 idx{};
  int linear = 0;
  ucontext_t start{};  // the entry on the fiber's stack
  jmp_buf resume;      // where the fiber continues, once started
  std::unique_ptr<char[]> stack;
  bool started = false, exited = false;
  const uint64_t* wait_on = nullptr;  // blocked while *wait_on == wait_value
  uint64_t wait_value = 0;
  const char* waiting_at = "";
  std::vector<Copy> open_group;                  // cp.async issued since the last commit
  std::deque<std::vector<Copy>> pending_groups;  // committed, oldest first
};

struct Warp {
  int size = 32, arrived = 0;
  uint64_t generation = 0;
  const char* what = nullptr;  // the collective of the current generation
  alignas(16) unsigned char in[2][32 * kSlotBytes], out[2][32 * kSlotBytes];
};

struct Cta {
  CtaInfo info{};
  std::vector<unsigned char> smem;
  std::vector<Thread> threads;
  std::vector<Warp> warps;
  int live = 0, barrier_arrived = 0;
  uint64_t barrier_generation = 0;
  jmp_buf scheduler;
  Thread* current = nullptr;
  const std::function<void()>* body = nullptr;
  std::string error;
};

Cta* g_cta = nullptr;  // the CTA being run (kernel_emu runs one launch at a time)

Cta& the_cta() {
  if (g_cta == nullptr) throw std::logic_error("[kernel_emu] device code called outside a launch");
  return *g_cta;
}
Thread& self() { return *the_cta().current; }

std::string where(const Thread& t) {
  const CtaInfo& c = the_cta().info;
  return "block (" + std::to_string(c.block_idx.x) + "," + std::to_string(c.block_idx.y) + "," +
         std::to_string(c.block_idx.z) + ") thread (" + std::to_string(t.idx.x) + "," +
         std::to_string(t.idx.y) + "," + std::to_string(t.idx.z) + ")";
}

// From the running fiber to the scheduler; returns when the scheduler resumes the fiber.
void yield_to_scheduler(Thread& t) {
  if (_setjmp(t.resume) == 0) _longjmp(the_cta().scheduler, 1);
}

// Back to the scheduler until *counter moves past value.
void block_on(const uint64_t* counter, uint64_t value, const char* at) {
  Thread& t = self();
  t.wait_on = counter;
  t.wait_value = value;
  t.waiting_at = at;
  yield_to_scheduler(t);
}

void release_barrier_if_complete(Cta& c) {
  if (c.barrier_arrived > 0 && c.barrier_arrived == c.live) {
    c.barrier_arrived = 0;
    ++c.barrier_generation;
  }
}

void thread_main() {
  Cta& c = the_cta();
  Thread& t = *c.current;
  try {
    (*c.body)();
  } catch (const std::exception& e) {
    if (c.error.empty()) c.error = e.what();
  }
  t.exited = true;
  --c.live;
  release_barrier_if_complete(c);
  _longjmp(c.scheduler, 1);  // never resumed
}

std::string deadlock_report(const Cta& c) {
  std::string s = "deadlock: no thread can run;";
  int shown = 0;
  for (const Thread& t : c.threads)
    if (!t.exited && shown++ < 4) s += " " + where(t) + " waits at " + t.waiting_at + ";";
  for (size_t w = 0; w < c.warps.size(); ++w)
    if (c.warps[w].arrived > 0)
      s += " warp " + std::to_string(w) + ": " + std::to_string(c.warps[w].arrived) + " of " +
           std::to_string(c.warps[w].size) + " lanes at " + c.warps[w].what + ";";
  return s +
         " (a lane exited or skipped a collective its warp reached, or a __syncthreads is "
         "divergent)";
}

// Runs `t` until it blocks or exits; a failure it reported stops the launch.
void resume(Cta& c, Thread& t) {
  t.wait_on = nullptr;
  c.current = &t;
  if (_setjmp(c.scheduler) == 0) {
    if (t.started) _longjmp(t.resume, 1);
    t.started = true;
    setcontext(&t.start);
  }
  if (!c.error.empty()) throw std::runtime_error("[kernel_emu] " + where(t) + ": " + c.error);
}

void run_cta(Cta& c, bool reversed) {
  const int n = static_cast<int>(c.threads.size());
  std::fill(c.smem.begin(), c.smem.end(), 0xff);
  c.live = n;
  c.barrier_arrived = 0;
  for (Warp& w : c.warps) w.arrived = 0, w.what = nullptr;
  for (Thread& t : c.threads) {
    t.started = t.exited = false;
    t.wait_on = nullptr;
    t.open_group.clear();
    t.pending_groups.clear();
    getcontext(&t.start);
    t.start.uc_stack.ss_sp = t.stack.get();
    t.start.uc_stack.ss_size = kStackBytes;
    t.start.uc_link = nullptr;
    makecontext(&t.start, thread_main, 0);
  }
  // Warp by warp: a warp's lanes run until all of them wait at a barrier (or exited), so a warp
  // gets as far ahead of the others as the hardware allows; then the next warp. The order is
  // reversed in odd CTAs.
  const int warps = static_cast<int>(c.warps.size());
  while (c.live > 0) {
    bool ran = false;
    for (int wi = 0; wi < warps; ++wi) {
      const int w = reversed ? warps - 1 - wi : wi, lanes = c.warps[w].size;
      for (bool warp_ran = true; warp_ran;) {
        warp_ran = false;
        for (int li = 0; li < lanes; ++li) {
          Thread& t = c.threads[32 * w + (reversed ? lanes - 1 - li : li)];
          if (t.exited || (t.wait_on != nullptr && *t.wait_on == t.wait_value)) continue;
          resume(c, t);
          warp_ran = ran = true;
        }
      }
    }
    if (!ran) throw std::runtime_error("[kernel_emu] " + deadlock_report(c));
  }
}

}  // namespace

const CtaInfo& cta() { return the_cta().info; }
const uint3& thread_idx() { return self().idx; }
int linear_thread() { return self().linear; }

void fail(const std::string& what) {
  Cta& c = the_cta();
  if (c.error.empty()) c.error = what;
  self().exited = true;  // abandoned: the launch stops here
  _longjmp(c.scheduler, 1);
}

void run_grid(dim3 grid, dim3 block, size_t smem, const std::function<void()>& body) {
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  if (threads == 0 || threads > 1024)
    throw std::runtime_error("[kernel_emu] a CTA of " + std::to_string(threads) +
                             " threads (1 to 1024)");
  if (smem > kMaxDynamicSmem)
    throw std::runtime_error("[kernel_emu] " + std::to_string(smem) +
                             " bytes of dynamic shared memory (a CTA has at most " +
                             std::to_string(kMaxDynamicSmem) + ")");
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 || grid.z > 65535)
    throw std::runtime_error("[kernel_emu] grid (" + std::to_string(grid.x) + "," +
                             std::to_string(grid.y) + "," + std::to_string(grid.z) + ")");
  if (g_cta != nullptr) throw std::logic_error("[kernel_emu] a launch from device code");
  Cta c;
  c.info.block_dim = block;
  c.info.grid_dim = grid;
  c.smem.resize(smem);
  c.body = &body;
  c.threads.resize(threads);
  for (uint64_t i = 0; i < threads; ++i) {
    Thread& t = c.threads[i];
    t.linear = static_cast<int>(i);
    t.idx = {static_cast<unsigned>(i % block.x), static_cast<unsigned>(i / block.x % block.y),
             static_cast<unsigned>(i / block.x / block.y)};
    t.stack.reset(new char[kStackBytes]);  // not zeroed: pages are touched only as used
  }
  c.warps.resize((threads + 31) / 32);
  for (size_t w = 0; w < c.warps.size(); ++w)
    c.warps[w].size = static_cast<int>(std::min<uint64_t>(32, threads - 32 * w));
  g_cta = &c;
  try {
    uint64_t linear = 0;
    for (unsigned z = 0; z < grid.z; ++z)
      for (unsigned y = 0; y < grid.y; ++y)
        for (unsigned x = 0; x < grid.x; ++x, ++linear) {
          c.info.block_idx = {x, y, z};
          run_cta(c, linear % 2 == 1);
        }
  } catch (...) {
    g_cta = nullptr;
    throw;
  }
  g_cta = nullptr;
}

void sync_threads() {
  Cta& c = the_cta();
  const uint64_t generation = c.barrier_generation;
  ++c.barrier_arrived;
  release_barrier_if_complete(c);
  if (c.barrier_generation == generation)
    block_on(&c.barrier_generation, generation, "__syncthreads");
}

Arrival arrive(const char* what, unsigned mask, const void* input, size_t bytes) {
  Thread& t = self();
  Warp& w = the_cta().warps[t.linear / 32];
  if (mask != (w.size == 32 ? 0xffffffffu : (1u << w.size) - 1))
    fail(std::string(what) + " with a partial warp mask");
  if (w.arrived == 0)
    w.what = what;
  else if (std::strcmp(w.what, what) != 0)
    fail(std::string("lanes of one warp at different collectives: ") + what + " and " + w.what);
  const int lane = t.linear % 32, phase = static_cast<int>(w.generation % 2);
  std::memcpy(w.in[phase] + lane * kSlotBytes, input, bytes);
  return {w.in[phase], w.out[phase], ++w.arrived == w.size, lane, w.generation};
}

void depart(const Arrival& a) {
  Warp& w = the_cta().warps[self().linear / 32];
  if (a.last) {
    w.arrived = 0;
    ++w.generation;
  } else {
    block_on(&w.generation, a.generation, w.what);
  }
}

unsigned char* shared_bytes(uint32_t addr, size_t bytes, size_t align, const char* what) {
  Cta& c = the_cta();
  if (addr % align != 0)
    fail(std::string(what) + ": shared address " + std::to_string(addr) + " is not " +
         std::to_string(align) + "-byte aligned");
  if (uint64_t(addr) + bytes > c.smem.size())
    fail(std::string(what) + ": shared bytes [" + std::to_string(addr) + ", " +
         std::to_string(addr + bytes) + ") beyond the " + std::to_string(c.smem.size()) +
         " of the launch");
  return c.smem.data() + addr;
}

unsigned char* dynamic_smem() { return the_cta().smem.data(); }

uint32_t shared_address(const void* generic) {
  Cta& c = the_cta();
  const auto* p = static_cast<const unsigned char*>(generic);
  if (p < c.smem.data() || p > c.smem.data() + c.smem.size())
    fail("__cvta_generic_to_shared of a pointer outside the dynamic shared memory");
  return static_cast<uint32_t>(p - c.smem.data());
}

void cp_async(uint32_t dst, const void* src, int src_bytes) {
  shared_bytes(dst, 16, 16, "cp.async");
  if (src_bytes > 0 && reinterpret_cast<uintptr_t>(src) % 16 != 0)
    fail("cp.async: global source not 16-byte aligned");
  self().open_group.push_back({dst, src, src_bytes});
}

void cp_async_commit() {
  Thread& t = self();
  t.pending_groups.push_back(std::move(t.open_group));
  t.open_group.clear();
}

void cp_async_wait(int pending) {
  Thread& t = self();
  while (static_cast<int>(t.pending_groups.size()) > pending) {
    for (const Copy& copy : t.pending_groups.front()) {
      unsigned char* dst = the_cta().smem.data() + copy.dst;
      std::memcpy(dst, copy.src, copy.bytes);
      std::memset(dst + copy.bytes, 0, 16 - copy.bytes);
    }
    t.pending_groups.pop_front();
  }
}

}  // namespace sprig::emu
