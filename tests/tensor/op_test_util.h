// Helpers for the op tests of this folder: the check that a call throws std::invalid_argument with
// a given message, and the copy to the GPU of parity tests.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>

#include "tensor/tensor.h"

namespace sprig::testing {

inline Tensor to_cuda(const Tensor& t) { return t.to(Device::cuda()); }

// Success when f throws std::invalid_argument whose message contains `text`.
inline ::testing::AssertionResult throws_invalid(const std::function<void()>& f,
                                                 const std::string& text) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()).find(text) != std::string::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << "message \"" << e.what() << "\" lacks \"" << text << "\"";
  }
  return ::testing::AssertionFailure()
         << "no std::invalid_argument thrown (wanted \"" << text << "\")";
}

}  // namespace sprig::testing
