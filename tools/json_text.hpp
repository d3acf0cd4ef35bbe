// The CLI's result files (bench --json, ep-bench --json) as text: what nlohmann's dump(2) writes,
// but with each array of scalars on one line. The per-replay samples took a line each, half of
// a file's bytes; the files are kept in the repository.
#pragma once

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

namespace fp4moe::cli {

inline void append_json_text(std::string& out, const nlohmann::json& j, int depth) {
  if (!j.is_structured() || j.empty()) {
    out += j.dump();
    return;
  }
  const bool scalars = j.is_array() && std::none_of(j.begin(), j.end(), [](const nlohmann::json& x) {
                         return x.is_structured();
                       });
  bool first = true;
  if (scalars) {
    out += '[';
    for (const nlohmann::json& x : j) {
      if (!first) out += ", ";
      first = false;
      out += x.dump();
    }
    out += ']';
    return;
  }
  out += j.is_object() ? "{\n" : "[\n";
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!first) out += ",\n";
    first = false;
    out.append(size_t(2 * (depth + 1)), ' ');
    if (j.is_object()) out += nlohmann::json(it.key()).dump() + ": ";
    append_json_text(out, *it, depth + 1);
  }
  out += '\n';
  out.append(size_t(2 * depth), ' ');
  out += j.is_object() ? '}' : ']';
}

// The whole document, with a final newline.
inline std::string json_text(const nlohmann::json& j) {
  std::string out;
  append_json_text(out, j, 0);
  return out + "\n";
}

}  // namespace fp4moe::cli
