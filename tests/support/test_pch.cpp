// Compiles the tests' precompiled header (tests/CMakeLists.txt, tinycoral_test_pch) that every
// layer's test executable reuses; it has no tests of its own (GoogleTest's main runs none).
