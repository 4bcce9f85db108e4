// numpy's legacy random stream (np.random.seed / RandomState), enough to reproduce the inputs and
// weights of Google's Python tests: MT19937 seeded as numpy seeds it from one integer (which is
// std::mt19937's seeding), randint for uint8 (32-bit draws split into four bytes, each masked to
// the range's bit width and rejected when above it), and randn (the polar method on 53-bit
// doubles, the second value of each pair kept for the next call).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace tinycoral::testing {

class NumpyRandomState {
 public:
  explicit NumpyRandomState(uint32_t seed) : mt_(seed) {}
  // np.random.randint(low, high, size=n, dtype=np.uint8): values in [low, high).
  std::vector<uint8_t> randint_uint8(int low, int high, size_t n);
  // np.random.randn(n) (any shape, in C order), as doubles.
  std::vector<double> randn(size_t n);
  double next_double();  // np.random.random_sample()

 private:
  double gauss();
  std::mt19937 mt_;
  bool has_gauss_ = false;
  double gauss_ = 0;
};

}  // namespace tinycoral::testing
