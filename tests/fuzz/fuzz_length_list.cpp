// libFuzzer: the list files of `--context-lengths @FILE` and `--seq-lens @FILE`
// (length_list.hpp, the one list-file parser), given the whole input as the
// file's text and, when it is short, as the inline option value. A refusal names the file and line: the message is
// whole (a NUL byte in it would cut it short on its way to stderr).
#include <cstring>

#include "fuzz_common.hpp"
#include "hbmscope/length_list.hpp"
#include "hbmscope/sweep.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hbmscope;
  const std::string_view t = fuzz::text(data, size);
  try {
    const auto v = parse_length_list(t, "fuzz.txt", "context-lengths");
    if (v.empty() || v.size() > max_context_lengths) __builtin_trap();
    for (const auto x : v)
      if (x == 0) __builtin_trap();
  } catch (const Error& e) {
    fuzz::check_message(e);
    // Every refusal of a file names it: what() was not cut before the name.
    if (!std::strstr(e.what(), "fuzz.txt")) __builtin_trap();
  }
  try {
    const auto v = parse_seq_len_list(t, "fuzz.txt", "seq-lens");
    if (v.empty() || v.size() > max_context_lengths) __builtin_trap();
    for (const auto& x : v)
      if (x.q == 0 || x.q > x.kv) __builtin_trap();
  } catch (const Error& e) {
    fuzz::check_message(e);
    if (!std::strstr(e.what(), "fuzz.txt")) __builtin_trap();
  }
  if (size <= 4096 && (t.empty() || t[0] != '@')) {
    fuzz::refusal_ok([&] { (void)read_length_list(t, "context-lengths"); });
    fuzz::refusal_ok([&] { (void)read_seq_len_list(t, "seq-lens"); });
  }
  return 0;
}
