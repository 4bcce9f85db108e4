// The loaded library's version (include/tinycoral/version.h).
#include "tinycoral/version.h"

namespace tinycoral {

const char* version() { return TINYCORAL_VERSION_STRING; }

}  // namespace tinycoral
