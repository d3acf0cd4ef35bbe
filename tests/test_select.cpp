// The selection ladder (src/select), backends() and build_info().
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "backend.hpp"
#include "env_test_util.hpp"
#include "error_test_util.hpp"

namespace fp4moe {
namespace {

using testing::EnvVar;

LayerDesc desc() {
  LayerDesc d;
  d.hidden = 64;
  d.intermediate = 32;
  d.num_experts = 4;
  d.top_k = 2;
  return d;
}

bool cuda_available() {
  for (const BackendInfo& b : backends())
    if (b.name == "cuda") return b.available;
  return false;
}

using testing::error_of;

bool has(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

TEST(SelectForced, UnknownNameIsInvalidAndListsKnownNames) {
  EnvVar env("FP4MOE_BACKEND", nullptr);
  const std::string m = error_of([] { select_backend(desc(), "tpu"); }, ErrorKind::invalid_argument);
  EXPECT_TRUE(has(m, "'tpu'")) << m;
  EXPECT_TRUE(has(m, "reference")) << m;
  EXPECT_TRUE(has(m, "cuda")) << m;
  EXPECT_TRUE(has(m, "auto")) << m;
}

TEST(SelectForced, UnavailableBackendFailsListingWhatIsAvailable) {
  EnvVar env("FP4MOE_BACKEND", nullptr);
  if (cuda_available()) GTEST_SKIP() << "cuda can run here";
  const std::string m = error_of([] { select_backend(desc(), "cuda"); }, ErrorKind::unsupported);
  EXPECT_TRUE(has(m, "backend 'cuda' cannot run here: ")) << m;
  EXPECT_TRUE(has(m, "available here: cpu, reference")) << m;
}

TEST(SelectForced, NamedBackendIsHonouredWithItsSource) {
  EnvVar env("FP4MOE_BACKEND", nullptr);
  const Selection s = select_backend(desc(), "reference");
  EXPECT_EQ(s.backend, "reference");
  EXPECT_TRUE(has(s.reason, "requested")) << s.reason;
}

TEST(SelectForced, InvalidDescriptorIsRejectedFirst) {
  LayerDesc d = desc();
  d.hidden = 8;
  const std::string m = error_of([&] { select_backend(d, "reference"); }, ErrorKind::invalid_argument);
  EXPECT_TRUE(has(m, "desc.hidden")) << m;
}

TEST(SelectEnv, BackendVariableOverridesAuto) {
  EnvVar env("FP4MOE_BACKEND", "reference");
  const Selection s = select_backend(desc(), "auto");
  EXPECT_EQ(s.backend, "reference");
  EXPECT_TRUE(has(s.reason, "FP4MOE_BACKEND")) << s.reason;
}

TEST(SelectEnv, UnknownNameInVariableIsNamedInTheError) {
  EnvVar env("FP4MOE_BACKEND", "bogus");
  const std::string m = error_of([] { select_backend(desc(), "auto"); }, ErrorKind::invalid_argument);
  EXPECT_TRUE(has(m, "FP4MOE_BACKEND")) << m;
  EXPECT_TRUE(has(m, "'bogus'")) << m;
}

TEST(SelectEnv, UnavailableBackendInVariableIsAnErrorNotAFallback) {
  if (cuda_available()) GTEST_SKIP() << "cuda can run here";
  EnvVar env("FP4MOE_BACKEND", "cuda");
  const std::string m = error_of([] { select_backend(desc(), "auto"); }, ErrorKind::unsupported);
  EXPECT_TRUE(has(m, "FP4MOE_BACKEND")) << m;
  EXPECT_TRUE(has(m, "available here: cpu, reference")) << m;
}

TEST(SelectEnv, NamedRequestIsNotOverriddenByVariable) {
  EnvVar env("FP4MOE_BACKEND", "bogus");
  EXPECT_EQ(select_backend(desc(), "reference").backend, "reference");
}

TEST(SelectAuto, PicksCpuWithoutAGpuAndSaysWhyCudaWasSkipped) {
  EnvVar env("FP4MOE_BACKEND", nullptr);
  if (cuda_available()) GTEST_SKIP() << "cuda can run here";
  const Selection s = select_backend(desc());
  EXPECT_EQ(s.backend, "cpu");
  EXPECT_TRUE(has(s.reason, "cuda skipped: ")) << s.reason;
}

TEST(SelectAuto, FirstAvailableRegistryEntryWins) {
  EnvVar env("FP4MOE_BACKEND", nullptr);
  std::string first;
  for (const detail::BackendEntry& e : detail::registry())
    if (e.why_not_here().empty() && e.why_not_for(desc()).empty()) {
      first = e.name;
      break;
    }
  EXPECT_EQ(select_backend(desc()).backend, first);
}

TEST(SelectLog, LogPrintsEachSelectionOncePerShape) {
  EnvVar env("FP4MOE_BACKEND", nullptr);
  EnvVar log("FP4MOE_LOG", "1");
  LayerDesc d = desc();
  d.hidden = 16 * int64_t(37 + std::random_device{}() % 1000);  // a shape no other test selects for
  ::testing::internal::CaptureStderr();
  const Selection s = select_backend(d, "reference");
  select_backend(d, "reference");
  const std::string err = ::testing::internal::GetCapturedStderr();
  size_t lines = 0;
  for (size_t at = err.find("fp4moe: select"); at != std::string::npos; at = err.find("fp4moe: select", at + 1)) ++lines;
  EXPECT_EQ(lines, 1u) << err;
  EXPECT_TRUE(has(err, ("H=" + std::to_string(d.hidden)).c_str())) << err;
  EXPECT_TRUE(has(err, s.reason.c_str())) << err;
}

TEST(SelectLog, SilentWithoutTheVariable) {
  EnvVar env("FP4MOE_BACKEND", nullptr);
  EnvVar log("FP4MOE_LOG", nullptr);
  LayerDesc d = desc();
  d.hidden = 16 * int64_t(2000 + std::random_device{}() % 1000);
  ::testing::internal::CaptureStderr();
  select_backend(d, "reference");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(SelectBackends, ListsEveryRegistryEntryAndCuda) {
  const std::vector<BackendInfo> list = backends();
  for (const detail::BackendEntry& e : detail::registry()) {
    bool found = false;
    for (const BackendInfo& b : list) found |= b.name == e.name;
    EXPECT_TRUE(found) << e.name;
  }
  bool reference = false, cpu = false, cuda = false;
  for (const BackendInfo& b : list) {
    EXPECT_FALSE(b.reason.empty()) << b.name;
    if (b.name == "reference") reference = b.available && b.device == DeviceType::cpu;
    if (b.name == "cpu") cpu = b.available && b.device == DeviceType::cpu;
    if (b.name == "cuda") cuda = b.device == DeviceType::cuda;
  }
  EXPECT_TRUE(reference);
  EXPECT_TRUE(cpu);
  EXPECT_TRUE(cuda);
  EXPECT_EQ(detail::registry().back().name, std::string("reference"));  // the last rung always runs
}

TEST(SelectBuildInfo, ReportsVersionArchsAndDevicesConsistently) {
  const BuildInfo b = build_info();
  EXPECT_EQ(b.version, version());
  EXPECT_FALSE(b.version.empty());
  EXPECT_EQ(size_t(b.cuda_device_count), b.cuda_devices.size());
#if defined(FP4MOE_WITH_CUDA)
  EXPECT_FALSE(b.cuda_archs.empty());
  for (const std::string& a : b.cuda_archs) EXPECT_TRUE(a.rfind("sm_", 0) == 0 || a.rfind("compute_", 0) == 0) << a;
#else
  EXPECT_TRUE(b.cuda_archs.empty());
  EXPECT_EQ(b.cuda_device_count, 0);
#endif
}

}  // namespace
}  // namespace fp4moe
