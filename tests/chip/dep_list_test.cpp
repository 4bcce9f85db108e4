// DepList: the inline part and the overflow behave as one vector, also when a slot is reused for
// the next work (cleared, its overflow storage kept).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "chip/machine.h"

namespace tinycoral::chip {
namespace {

TEST(DepList, BehavesLikeAVector) {
  std::mt19937 rng(3);
  DepList deps;
  std::vector<uint32_t> want;
  for (int op = 0; op < 5000; ++op) {
    const unsigned pick = rng() % 10;
    if (pick < 6) {
      const uint32_t id = rng();
      deps.push_back(id);
      want.push_back(id);
    } else if (pick < 9 && !want.empty()) {
      ASSERT_EQ(deps.back(), want.back());
      deps.pop_back();
      want.pop_back();
    } else if (rng() % 20 == 0) {
      deps.clear();
      want.clear();
    }
    ASSERT_EQ(deps.size(), want.size());
    ASSERT_EQ(deps.empty(), want.empty());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(deps[i], want[i]) << "operation " << op;
  }
}

}  // namespace
}  // namespace tinycoral::chip
