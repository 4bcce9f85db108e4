// The tinycoral C++ API in one include. The library runs TFLite models on a Coral USB Accelerator,
// on its bit-exact simulator (the virtual Edge TPU) or on the CPU, with nothing from Google at run
// time. Errors are thrown as tinycoral::Error. The C API is tinycoral/tinycoral.h.
//
// Headers: device.h (list and open devices), interpreter.h (load a model, set inputs, invoke,
// read outputs), classify.h (image inputs, top classes, labels), version.h. Compiling models and
// generating text will get their own headers here.
#pragma once

#include "tinycoral/classify.h"
#include "tinycoral/device.h"
#include "tinycoral/error.h"
#include "tinycoral/interpreter.h"
#include "tinycoral/version.h"
