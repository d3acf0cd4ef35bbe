// The tests' one environment switch. Header-only.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace fp4moe::testing {

// An environment variable set to `value` (nullptr: unset) for its lifetime, then restored to
// what it was: the switches the backends read per call or at prepare (FP4MOE_CPU_*, FP4MOE_GEMM,
// the CUDA A/B switches). Restoring rather than unsetting keeps a switch set for the whole run
// (a device script's A/B of a default) in force for the tests after one that sets it too.
class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~EnvVar() {
    if (old_) setenv(name_.c_str(), old_->c_str(), 1);
    else unsetenv(name_.c_str());
  }
  EnvVar(const EnvVar&) = delete;
  EnvVar& operator=(const EnvVar&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace fp4moe::testing
