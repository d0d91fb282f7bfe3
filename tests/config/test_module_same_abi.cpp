// A well-formed module for test_modules.cpp: this build's ABI and one entry point.
#include "kiln/config/modules.h"

KILN_MODULE_ABI_FUNCTION

extern "C" __attribute__((visibility("default"))) int kiln_test_entry() { return 42; }
