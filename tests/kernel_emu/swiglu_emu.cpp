// tensor/cuda/swiglu.cu run on the emulated device against the CPU twin: the table of
// tests/parity/swiglu_cases.h.
#include <gtest/gtest.h>

#include "tensor/cuda/swiglu.cu"  // compiled against tests/kernel_emu/device_emu.h
#include "tests/parity/swiglu_cases.h"

namespace sprig {
namespace {

SPRIG_EMU_PARITY_TEST(SwigluEmu, ForwardAndBackwardMatchTheCpuTwin, parity::swiglu_cases())

}  // namespace
}  // namespace sprig
