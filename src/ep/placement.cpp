// Placement of experts over ranks and the names of the EP enums (ep.hpp): plain host code,
// built with or without NCCL.
#include "ep/placement.hpp"

#include <string>
#include <vector>

#include "backend.hpp"
#include "fp4moe/ep.hpp"

namespace fp4moe::ep {

using detail::fail_arg;

void check_world(const char* entry, int64_t E, int world, int rank) {
  if (world < 1) fail_arg(std::string(entry) + ": world: got " + std::to_string(world) + ", need >= 1");
  if (rank < 0 || rank >= world)
    fail_arg(std::string(entry) + ": rank: got " + std::to_string(rank) + ", need [0, " + std::to_string(world) + ")");
  if (E < world)
    fail_arg(std::string(entry) + ": num_experts: got " + std::to_string(E) + ", need >= world (" +
             std::to_string(world) + ") so that every rank holds an expert");
}

int64_t num_local_experts(int64_t E, int world, int rank) {
  check_world("num_local_experts", E, world, rank);
  return Placement{E, world}.count(rank);
}
int64_t first_expert(int64_t E, int world, int rank) {
  check_world("first_expert", E, world, rank);
  return Placement{E, world}.first(rank);
}
int owner_rank(int64_t E, int world, int64_t expert) {
  check_world("owner_rank", E, world, 0);
  if (expert < 0 || expert >= E)
    fail_arg("owner_rank: expert: got " + std::to_string(expert) + ", need [0, " + std::to_string(E) + ")");
  return Placement{E, world}.owner(expert);
}
std::vector<int32_t> expert_map(int64_t E, int world, int rank) {
  check_world("expert_map", E, world, rank);
  const Placement pl{E, world};
  std::vector<int32_t> map(size_t(E), -1);
  for (int64_t e = 0; e < pl.count(rank); ++e) map[size_t(pl.first(rank) + e)] = int32_t(e);
  return map;
}

const char* to_string(Mode m) { return m == Mode::all_to_all ? "all_to_all" : "all_reduce"; }
const char* to_string(WireDType d) {
  switch (d) {
    case WireDType::bf16: return "bf16";
    case WireDType::nvfp4: return "nvfp4";
    case WireDType::f32: return "f32";
  }
  return "?";
}

}  // namespace fp4moe::ep
