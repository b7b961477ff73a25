#pragma once
// Output targets and list options that the commands share.
#include <optional>
#include <string>
#include <vector>

namespace hbmscope::cli {

// "--output -", like no --output, means standard output.
bool to_stdout(const std::optional<std::string>& output);

// Writes text to stdout, or to --output atomically with "hbmscope: wrote FILE" on stderr.
void emit(const std::string& text, const std::optional<std::string>& output);

// --output (or --plot) naming a file this run reads would destroy the input
// (or, replaced atomically, leave the run's own input changed under it): it is
// refused before anything is read.
void refuse_input_as_output(const std::optional<std::string>& output, const std::vector<std::string>& inputs,
                            const char* option);

// path made absolute and normal, without a trailing '/' ("runs/./a/" -> "/home/me/runs/a").
std::string absolute_path(const std::string& path);

// A comma-separated list option: "a,b" -> {a, b}; empty items refused (UsageError).
std::vector<std::string> split_list(const std::string& text, const char* option);

}  // namespace hbmscope::cli
