// The parity tables of tests/parity, checked without a device: every case has a name of its own
// and computes its outputs on the CPU (the reference every device is compared with), each output
// named once and defined.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "tests/parity/elementwise_cases.h"
#include "tests/parity/gru_cases.h"
#include "tests/parity/index_cases.h"
#include "tests/parity/loss_cases.h"
#include "tests/parity/matmul_cases.h"
#include "tests/parity/norm_cases.h"
#include "tests/parity/optim_cases.h"
#include "tests/parity/reduce_cases.h"
#include "tests/parity/rope_cases.h"
#include "tests/parity/swiglu_cases.h"

namespace sprig::parity {
namespace {

TEST(ParityTables, EveryCaseComputesItsReferenceOnTheCpu) {
  const std::vector<std::vector<Case>> tables = {
      swiglu_cases(),     rms_norm_cases(),        rope_cases(),          reduce_cases(),
      softmax_cases(),    adamw_cases(),           cross_entropy_cases(), kl_div_cases(false),
      kl_div_cases(true), unary_cases(),           binary_cases(),        binary_scalar_cases(),
      where_cases(),      embedding_cases(),       index_select_cases(),  gather_cases(),
      matmul_cases(),     matmul_backward_cases(), gru_cell_cases(),      gru_autograd_cases()};
  for (const std::vector<Case>& table : tables) {
    ASSERT_FALSE(table.empty());
    std::set<std::string> names;
    for (const Case& c : table) {
      SCOPED_TRACE(c.name);
      EXPECT_TRUE(names.insert(c.name).second) << "a second case of this name";
      EXPECT_NE(c.on & kEveryDevice, 0u) << "a case no device runs";
      std::set<std::string> outputs;
      for (const Output& out : c.run(kCpu)) {
        EXPECT_TRUE(outputs.insert(out.name).second) << "a second output " << out.name;
        EXPECT_TRUE(out.value.defined()) << out.name;
      }
      EXPECT_FALSE(outputs.empty());
    }
  }
}

}  // namespace
}  // namespace sprig::parity
