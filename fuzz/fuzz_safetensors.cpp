// libFuzzer target over the safetensors reader, the checkpoint directory and (when built
// with src/checkpoint/loaders.cpp) load_moe_layer. See fuzz_input.hpp for the input format
// and README.md for how to build and run it.
#include <cstdlib>
#include <string>

#include "fuzz_input.hpp"

namespace {
// One scratch directory per fuzzing process, reused by every input.
const std::string& scratch() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/fp4moe_fuzz_XXXXXX";
    const char* d = mkdtemp(tmpl);
    if (!d) std::abort();
    return std::string(d);
  }();
  return dir;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fp4moe_fuzz::run(data, size, scratch());
  return 0;
}
