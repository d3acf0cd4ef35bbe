// fp4moe::ep in a build without expert parallelism (no CUDA, no nccl.h at configure time,
// or FP4MOE_EP=OFF): every entry that would need NCCL throws Error(unsupported) saying so.
#if !defined(FP4MOE_WITH_EP)

#include "backend.hpp"
#include "fp4moe/ep.hpp"

namespace fp4moe::ep {
namespace {

const char* kWhy =
    "this fp4moe build has no expert parallelism: it needs the CUDA backend and nccl.h at configure time "
    "(CMake option FP4MOE_EP, FP4MOE_NCCL_INCLUDE_DIR)";

[[noreturn]] void unsupported(const char* entry) {
  detail::fail(ErrorKind::unsupported, std::string(entry) + ": " + kWhy);
}

}  // namespace

std::string why_unavailable() { return kWhy; }
std::string nccl_version() { return ""; }
UniqueId unique_id() { unsupported("ep::unique_id"); }

Communicator Communicator::init_rank(const UniqueId&, int, int, int) { unsupported("Communicator::init_rank"); }
std::vector<Communicator> Communicator::init_all(const std::vector<int>&) { unsupported("Communicator::init_all"); }
Communicator::Communicator(Communicator&& o) noexcept = default;
Communicator& Communicator::operator=(Communicator&& o) noexcept = default;
Communicator::~Communicator() = default;

struct EpLayer::Impl {};
EpLayer::EpLayer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EpLayer::EpLayer(EpLayer&&) noexcept = default;
EpLayer& EpLayer::operator=(EpLayer&&) noexcept = default;
EpLayer::~EpLayer() = default;
EpLayer EpLayer::prepare(const EpDesc&, const CheckpointWeights&, ncclComm_t, const PrepareOptions&) {
  unsupported("EpLayer::prepare");
}
// An EpLayer cannot exist in this build, so the members below are never reached.
const EpDesc& EpLayer::desc() const { unsupported("EpLayer::desc"); }
int EpLayer::rank() const { unsupported("EpLayer::rank"); }
int EpLayer::world() const { unsupported("EpLayer::world"); }
int EpLayer::device_id() const { unsupported("EpLayer::device_id"); }
int64_t EpLayer::num_local_experts() const { unsupported("EpLayer::num_local_experts"); }
const Layer& EpLayer::local_layer() const { unsupported("EpLayer::local_layer"); }
void EpLayer::set_capacity(const Capacity&) { unsupported("EpLayer::set_capacity"); }
size_t EpLayer::workspace_size() const { unsupported("EpLayer::workspace_size"); }
Traffic EpLayer::traffic() const { unsupported("EpLayer::traffic"); }
void EpLayer::forward(const EpForwardArgs&) const { unsupported("EpLayer::forward"); }
void EpLayer::check_device_errors(const TensorView&, void*) const { unsupported("EpLayer::check_device_errors"); }

}  // namespace fp4moe::ep

#endif  // !FP4MOE_WITH_EP
