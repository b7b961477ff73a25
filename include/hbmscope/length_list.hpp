#pragma once
// Lists of lengths given on the command line or in a file: `--context-lengths
// 512,4K,128K` or `--context-lengths @lengths.txt`, `--seq-lens 1K,2K:8K` or
// `--seq-lens @lens.txt`. Reading the file is the only I/O; the text parsers
// are pure (tests/fuzz/fuzz_length_list.cpp drives them).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hbmscope/seq_list.hpp"

namespace hbmscope {

// The most bytes a list file may hold.
inline constexpr std::size_t max_length_file_bytes = std::size_t{64} << 20;

// The lengths in the text of a list file: positive integers with the axes'
// syntax (4K, ranges START:STOP:+S) separated by commas, spaces, tabs or
// newlines; '#' starts a comment to the end of the line. Error (naming the
// option, origin and line; any byte of the file escaped) on a bad item, an
// empty list, or more than max_context_lengths lengths.
std::vector<std::uint64_t> parse_length_list(std::string_view content, std::string_view origin,
                                             std::string_view option);
// The same for ragged prefill sequences (`--seq-lens`): items L or Q:KV
// (parse_seq_len_items), at most max_context_lengths sequences.
std::vector<SeqLen> parse_seq_len_list(std::string_view content, std::string_view origin, std::string_view option);

// An option's value: the list itself, or "@FILE" for a list file (read here,
// at most max_length_file_bytes). `option` is the name without dashes
// ("context-lengths"). UsageError for a malformed inline list; Error for a
// file that cannot be read or holds a bad list.
std::vector<std::uint64_t> read_length_list(std::string_view text, std::string_view option);
std::vector<SeqLen> read_seq_len_list(std::string_view text, std::string_view option);

}  // namespace hbmscope
