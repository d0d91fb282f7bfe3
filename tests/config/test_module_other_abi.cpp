// A module from "another Kiln" for test_modules.cpp: its kiln_module_abi() is not the loader's.
extern "C" __attribute__((visibility("default"))) const char* kiln_module_abi() { return "kiln modules 0, another compiler"; }
extern "C" __attribute__((visibility("default"))) int kiln_test_entry() { return 7; }
