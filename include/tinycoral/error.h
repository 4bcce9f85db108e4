// The one exception type of tinycoral. Every error a caller can cause (a malformed model, a wrong
// input size, a device that is absent or stops answering) is an Error whose message names the
// thing and what is wrong with it, in one line. The C API turns it into an error code.
#pragma once

#include <stdexcept>

#include "tinycoral/export.h"

namespace tinycoral {

class TINYCORAL_API Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tinycoral
