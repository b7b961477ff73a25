#include "command_io.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "hbmscope/error.hpp"
#include "hbmscope/printers.hpp"
#include "../report/json_check.hpp"

namespace hbmscope::cli {

bool to_stdout(const std::optional<std::string>& output) { return !output || *output == "-"; }

void emit(const std::string& text, const std::optional<std::string>& output) {
  if (to_stdout(output)) {
    write_stdout(text);
  } else {
    write_file_atomic(*output, text);
    std::fprintf(stderr, "hbmscope: wrote %s\n", json_check::printable(*output).c_str());
  }
}

void refuse_input_as_output(const std::optional<std::string>& output, const std::vector<std::string>& inputs,
                            const char* option) {
  if (to_stdout(output)) return;
  for (const auto& input : inputs)
    if (same_write_target(*output, input))
      throw Error(std::string(option) + ": '" + *output + "' is also an input of this run ('" + input +
                  "'); write the result to another file");
}

// A comma-separated list option: "a,b" -> {a, b}; empty items refused.
std::vector<std::string> split_list(const std::string& text, const char* option) {
  std::vector<std::string> out;
  for (std::size_t pos = 0; pos <= text.size();) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    std::string item = text.substr(pos, comma - pos);
    if (item.empty()) throw UsageError(std::string(option) + ": '" + text + "' has an empty item");
    out.push_back(std::move(item));
    pos = comma + 1;
  }
  return out;
}

std::string absolute_path(const std::string& path) {
  std::string s = std::filesystem::absolute(path).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

}  // namespace hbmscope::cli
