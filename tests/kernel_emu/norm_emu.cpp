// tensor/cuda/norm.cu run on the emulated device against the CPU twin: the table of
// tests/parity/norm_cases.h.
#include <gtest/gtest.h>

#include "tensor/cuda/norm.cu"  // compiled against tests/kernel_emu/device_emu.h
#include "tests/parity/norm_cases.h"

namespace sprig {
namespace {

SPRIG_EMU_PARITY_TEST(RmsNormEmu, ForwardAndBackwardMatchTheCpuTwin, parity::rms_norm_cases())

}  // namespace
}  // namespace sprig
