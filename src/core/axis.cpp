#include <charconv>
#include <string>

#include "hbmscope/checked.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/sweep.hpp"

namespace hbmscope {

namespace {

[[noreturn]] void bad(std::string_view option, std::string_view text, std::string_view why) {
  throw UsageError("--" + std::string(option) + ": '" + std::string(text) + "' " + std::string(why));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A positive integer with an optional binary suffix K (2^10), M (2^20), G (2^30).
std::uint64_t parse_count(std::string_view item, std::string_view option,
                          std::string_view whole) {
  std::string_view t = trim(item);
  if (t.empty()) bad(option, whole, "has an empty item");
  if (t.front() == '-') {
    // "-0" is zero, not negative.
    const std::string_view digits = t.substr(1);
    if (!digits.empty() && digits.find_first_not_of('0') == std::string_view::npos)
      bad(option, t, "must be positive");
    bad(option, t, "is negative; a positive integer is expected");
  }
  std::uint64_t mult = 1;
  switch (t.back()) {
    case 'k': case 'K': mult = 1ull << 10; t.remove_suffix(1); break;
    case 'm': case 'M': mult = 1ull << 20; t.remove_suffix(1); break;
    case 'g': case 'G': mult = 1ull << 30; t.remove_suffix(1); break;
    default: break;
  }
  std::uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec == std::errc::result_out_of_range) bad(option, item, "is too large for a 64-bit count");
  if (ec != std::errc() || ptr != t.data() + t.size())
    bad(option, trim(item), "is not a positive integer (examples: 4096, 4K, 1M)");
  std::uint64_t r = 0;
  if (__builtin_mul_overflow(v, mult, &r)) bad(option, item, "is too large for a 64-bit count");
  if (r == 0) bad(option, trim(item), "must be positive");
  return r;
}

void append_range(std::vector<std::uint64_t>& out, std::string_view item, std::string_view option,
                  std::string_view whole) {
  const std::size_t c1 = item.find(':');
  const std::size_t c2 = item.find(':', c1 + 1);
  if (c2 == std::string_view::npos || item.find(':', c2 + 1) != std::string_view::npos)
    bad(option, trim(item), "is not a range START:STOP:xFACTOR or START:STOP:+STEP");
  const std::uint64_t start = parse_count(item.substr(0, c1), option, whole);
  const std::uint64_t stop = parse_count(item.substr(c1 + 1, c2 - c1 - 1), option, whole);
  std::string_view step = trim(item.substr(c2 + 1));
  if (start > stop) bad(option, trim(item), "has START greater than STOP");
  const bool geometric = !step.empty() && (step.front() == 'x' || step.front() == '*');
  if (!step.empty() && (geometric || step.front() == '+')) step.remove_prefix(1);
  const std::uint64_t by = parse_count(step, option, whole);
  if (geometric && by < 2) bad(option, trim(item), "needs a factor of at least 2");
  for (std::uint64_t v = start; v <= stop;) {
    if (out.size() >= max_sweep_shapes)  // a well-formed range over the limit: refused, not misused
      throw Error("--" + std::string(option) + ": '" + std::string(whole) + "' has too many values (a sweep has at most " +
                  std::to_string(max_sweep_shapes) + " shapes)");
    out.push_back(v);
    std::uint64_t next = 0;
    const bool overflow = geometric ? __builtin_mul_overflow(v, by, &next)
                                    : __builtin_add_overflow(v, by, &next);
    if (overflow) break;
    v = next;
  }
}

// Calls on_item(item) for each comma-separated item of a list (items as
// given, untrimmed); an empty list is refused.
template <class OnItem>
void for_each_item(std::string_view text, std::string_view option, OnItem&& on_item) {
  if (trim(text).empty()) bad(option, text, "is an empty list");
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    on_item(text.substr(pos, comma - pos));
    pos = comma + 1;
  }
}

}  // namespace

std::vector<std::uint64_t> parse_int_axis(std::string_view text, std::string_view option) {
  std::vector<std::uint64_t> out;
  for_each_item(text, option, [&](std::string_view item) {
    if (item.find(':') != std::string_view::npos)
      append_range(out, item, option, text);
    else
      out.push_back(parse_count(item, option, text));
  });
  return out;
}

std::vector<Dtype> parse_dtype_axis(std::string_view text, std::string_view option) {
  std::vector<Dtype> out;
  for_each_item(text, option, [&](std::string_view item) {
    const auto d = parse_dtype(trim(item));
    if (!d) bad(option, trim(item), "is not a dtype (fp32, fp16, bf16, fp8)");
    out.push_back(*d);
  });
  return out;
}

std::vector<Pass> parse_pass_axis(std::string_view text, std::string_view option) {
  std::vector<Pass> out;
  for_each_item(text, option, [&](std::string_view item) {
    const auto p = parse_pass(trim(item));
    if (!p) bad(option, trim(item), "is not a pass (fwd, bwd, fwdbwd)");
    out.push_back(*p);
  });
  return out;
}

std::vector<std::uint64_t> parse_int_axis_or_none(std::string_view text, std::string_view option) {
  std::vector<std::uint64_t> out;
  for_each_item(text, option, [&](std::string_view item) {
    if (trim(item) == "0" || trim(item) == "none") {
      out.push_back(0);
      return;
    }
    const auto v = parse_int_axis(item, option);
    out.insert(out.end(), v.begin(), v.end());
  });
  return out;
}

std::vector<std::optional<Dtype>> parse_kv_dtype_axis(std::string_view text, std::string_view option) {
  std::vector<std::optional<Dtype>> out;
  for_each_item(text, option, [&](std::string_view item) {
    const auto d = parse_dtype(trim(item));
    if (!d && trim(item) != "same") bad(option, trim(item), "is not a dtype (fp32, fp16, bf16, fp8) or same");
    out.push_back(d);
  });
  return out;
}

std::vector<SeqLen> parse_seq_len_items(std::string_view text, std::string_view option) {
  std::vector<SeqLen> out;
  for_each_item(text, option, [&](std::string_view given) {
    const std::string_view item = trim(given);
    const std::size_t colon = item.find(':');
    if (colon != std::string_view::npos && item.find(':', colon + 1) == std::string_view::npos) {
      // Q:KV: Q new tokens against KV keys (a cached prefix of KV - Q, then themselves).
      const std::uint64_t q = parse_count(item.substr(0, colon), option, text);
      const std::uint64_t kv = parse_count(item.substr(colon + 1), option, text);
      if (q > kv) bad(option, item, "has more new tokens (Q) than keys (KV); Q:KV counts the Q new tokens in KV");
      out.push_back({q, kv});
    } else {
      for (const std::uint64_t l : parse_int_axis(item, option)) out.push_back({l, l});
    }
    if (out.size() > max_context_lengths)
      throw Error("--" + std::string(option) + ": more than " + std::to_string(max_context_lengths) + " sequences");
  });
  return out;
}

}  // namespace hbmscope
