// The Python interpreter of the torch-labelled tests (*_torch_test.cpp): one with torch and
// HolisticTraceAnalysis, which `make test` installs into a virtual environment under
// $PARTRAIN_CACHE and hands over as PARTRAIN_TORCH_PYTHON (docs/testing.md). Where it is not
// set or not there, those tests report SKIPPED with one line saying how to get it.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace partrain::testing {

// PARTRAIN_TORCH_PYTHON; when it is unset, the interpreter of a venv made by hand at
// ${PARTRAIN_CACHE:-~/.cache/partrain}/torch-venv if there is one; else empty.
inline std::string torch_python() {
  const char* python = std::getenv("PARTRAIN_TORCH_PYTHON");
  if (python != nullptr && *python != '\0') return python;
  const char* cache = std::getenv("PARTRAIN_CACHE");
  const char* home = std::getenv("HOME");
  const std::string dir = cache != nullptr && *cache != '\0'
                              ? std::string(cache)
                              : std::string(home != nullptr ? home : "") + "/.cache/partrain";
  const std::string fallback = dir + "/torch-venv/bin/python";
  return ::access(fallback.c_str(), X_OK) == 0 ? fallback : std::string();
}

// Why the torch tests cannot run here, empty when there is an interpreter.
inline std::string torch_python_missing() {
  const char* given = std::getenv("PARTRAIN_TORCH_PYTHON");
  const std::string python = torch_python();
  if (python.empty()) {
    return "PARTRAIN_TORCH_PYTHON is unset: `make test` installs torch and HTA into a venv under "
           "$PARTRAIN_CACHE unless PARTRAIN_SKIP_TORCH=1 or PyPI is unreachable (docs/testing.md)";
  }
  if (given != nullptr && *given != '\0' && ::access(python.c_str(), X_OK) != 0) {
    return "PARTRAIN_TORCH_PYTHON=" + python +
           " is not an executable interpreter: rerun `make test` to install it (docs/testing.md)";
  }
  return "";
}

}  // namespace partrain::testing

// The first line of a torch-labelled test: skips it, in one line, without the interpreter.
#define PARTRAIN_REQUIRE_TORCH()                                                            \
  if (std::string why = ::partrain::testing::torch_python_missing(); !why.empty()) {       \
    GTEST_SKIP() << why;                                                                    \
  }
