// numpy's legacy random stream (tests/support/numpy_random.h) against values numpy 1.24 printed:
// np.random.seed(0); randn(3), and the stream of Google's learn-utils Python test (seed 12345,
// randint(0, 255, [1, 224, 224, 3], uint8), randn(1024, 10).astype(float32), randn(10)).
#include "support/numpy_random.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "common/error.h"

namespace tinycoral::testing {
namespace {

TEST(NumpyRandomState, RandnMatchesNumpySeedZero) {
  NumpyRandomState rs(0);
  const auto v = rs.randn(3);
  EXPECT_DOUBLE_EQ(v[0], 1.764052345967664);
  EXPECT_DOUBLE_EQ(v[1], 0.4001572083672233);
  EXPECT_DOUBLE_EQ(v[2], 0.9787379841057392);
}

TEST(NumpyRandomState, GooglesLearnUtilsStreamMatchesNumpy) {
  NumpyRandomState rs(12345);
  const auto x = rs.randint_uint8(0, 255, 224 * 224 * 3);
  EXPECT_EQ(std::vector<uint8_t>(x.begin(), x.begin() + 8),
            (std::vector<uint8_t>{226, 81, 251, 237, 229, 45, 225, 227}));
  EXPECT_EQ(std::vector<uint8_t>(x.end() - 4, x.end()), (std::vector<uint8_t>{204, 169, 157, 201}));
  EXPECT_EQ(std::accumulate(x.begin(), x.end(), int64_t{0}), 19113193);
  EXPECT_EQ(std::count(x.begin(), x.end(), 254), 629);  // high is exclusive: no 255
  EXPECT_EQ(std::count(x.begin(), x.end(), 255), 0);

  const auto w = rs.randn(1024 * 10);
  EXPECT_EQ(static_cast<float>(w[0]), 1.5174120664596558f);
  EXPECT_EQ(static_cast<float>(w[1]), 0.9395866394042969f);
  EXPECT_EQ(static_cast<float>(w[2]), -1.2340131998062134f);
  EXPECT_EQ(static_cast<float>(w[1023 * 10 + 9]), 1.4967873096466064f);
  double sum = 0;
  for (double v : w) sum += static_cast<float>(v);
  EXPECT_NEAR(sum, 62.519307112704155, 1e-9);
  const auto b = rs.randn(10);
  const float want[10] = {-1.6325615644454956f, -1.6837702989578247f,  1.034264087677002f,
                          0.1522551029920578f,  -0.18315285444259644f, 0.01403192337602377f,
                          0.06759297102689743f, 0.9610884785652161f,   0.5175047516822815f,
                          0.9603947997093201f};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(static_cast<float>(b[i]), want[i]) << i;
}

TEST(NumpyRandomState, OtherRangesMatchNumpy) {
  // np.random.seed(7); randint(0, 256, 8, uint8): the raw bytes, nothing rejected.
  NumpyRandomState a(7);
  EXPECT_EQ(a.randint_uint8(0, 256, 8),
            (std::vector<uint8_t>{175, 240, 136, 19, 196, 228, 50, 58}));
  // np.random.seed(7); randint(3, 10, 8, uint8): offsets masked to 3 bits, 7 rejected.
  NumpyRandomState b(7);
  EXPECT_EQ(b.randint_uint8(3, 10, 8), (std::vector<uint8_t>{3, 3, 6, 7, 7, 5, 5, 4}));
  EXPECT_THROW(b.randint_uint8(5, 5, 1), Error);
  EXPECT_THROW(b.randint_uint8(0, 257, 1), Error);
}

}  // namespace
}  // namespace tinycoral::testing
