// The error-contract helper shared by the API and selection tests. Header-only.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "fp4moe/fp4moe.hpp"

namespace fp4moe::testing {

// Runs f, which must throw fp4moe::Error of `kind`; returns its message ("" and a test
// failure when nothing is thrown).
template <class F>
std::string error_of(F&& f, ErrorKind kind) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(int(e.kind()), int(kind)) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no fp4moe::Error thrown";
  return "";
}

}  // namespace fp4moe::testing
