// Heads that repeat an earlier one (docs/l2-chains.md, "Repeated heads"):
// a read's distance depends on the starts, last steps, next readers and tile
// sizes of the CTAs that run between it and its predecessor, all relative to
// the reader, and on which of them read the same pair's blocks. In a dense
// batch in query-block-major order every head's CTAs are alike, and once no
// head older than the previous one runs, a head's CTA reaches back to the
// previous head's last CTA's start at most and meets CTAs of the two heads
// alone (until the head's last CTA starts). So where the two heads' starts
// are those of an earlier head and its predecessor, shifted, a CTA's
// distances are those of its place in the earlier head: all of them where
// the two pair relations are alike (one pair or two), its re-reads' where
// the previous head's last CTA's blocks are not read again in between. The
// schedule settles into a period of a few tens of heads.
#include <unordered_map>

#include "l2_flash_chains.hpp"

namespace hbmscope::l2::chains {

HeadRepeats find_repeats(const ChainGrid& c) {
  HeadRepeats r;
  if (c.hm || !c.dense || c.n == 0) return r;
  u64 per = 1;
  while (per < c.n && c.head_of(per) == c.head_of(0)) ++per;
  const u64 heads = c.n / per;
  if (per < 2 || heads < 3 || heads * per != c.n) return r;
  // Each head's starts after its first as a hash of the steps between them.
  std::vector<u64> hash(heads);
  for (u64 h = 0; h < heads; ++h) {
    u64 x = 1469598103934665603ull;
    for (u64 k = h * per + 1; k < (h + 1) * per; ++k) x = (x ^ static_cast<u64>(c.s[k] - c.s[k - 1])) * 1099511628211ull;
    hash[h] = x;
  }
  r.from.assign(heads, ChainGrid::none32);
  r.lo.assign(heads, 1);
  r.upto.assign(heads, 1);
  r.full.assign(heads, 0);
  r.source.assign(heads, 0);
  r.source_full.assign(heads, 0);
  // Keys -> the first head with them: the steps of two heads, and that with
  // whether the two share a kv pair.
  std::unordered_map<u64, std::uint32_t> by_steps, by_pairs;
  i64 older = never;  // the last step of the heads before h - 1
  auto same = [&](u64 h, u64 g) {  // heads h - 1 and h started as g - 1 and g did
    const u64 d = (h - g) * per;
    for (u64 k = (h - 1) * per + 1; k < (h + 1) * per; ++k)
      if (c.s[k] - c.s[k - 1] != c.s[k - d] - c.s[k - d - 1]) return false;
    return true;
  };
  auto one_pair = [&](u64 h) { return c.pair_of(h * per - 1) == c.pair_of(h * per); };
  for (u64 h = 1; h < heads; ++h) {
    // (Along a head, starts and key blocks do not decrease: nor do last
    // steps, so a head's largest is its last CTA's.)
    if (h >= 2) older = std::max(older, c.f((h - 1) * per - 1));
    // CTAs whose reads end before the head's last CTA starts (a prefix).
    const u64 h0 = h * per, last = h0 + per - 1, L = h0 - 1;
    const u64 q = first_not(1, per - 1, [&](u64 x) { return c.s[h0 + x] + static_cast<i64>(c.e[h0 + x]) - 1 < c.s[last]; });
    r.upto[h] = static_cast<std::uint32_t>(q);
    // No older head's CTA runs from the previous head's last CTA's start on
    // (minus one step: a regular CTA's next access counts to a read one step
    // after it); a head's first reads reach back to that start.
    if (older >= c.s[L] - 1 || q == 1) continue;
    const u64 key = (hash[h - 1] * 31 + hash[h]) * 1099511628211ull ^ static_cast<u64>(c.s[h0] - c.s[L]);
    const auto [pairs_at, new_pairs] = by_pairs.try_emplace(key << 1 ^ (one_pair(h) ? 1 : 0), static_cast<std::uint32_t>(h));
    const auto [steps_at, new_steps] = by_steps.try_emplace(key, static_cast<std::uint32_t>(h));
    if (!new_pairs) {
      const u64 g = pairs_at->second;
      if (one_pair(g) == one_pair(h) && r.upto[g] == r.upto[h] && same(h, g)) {
        r.from[h] = static_cast<std::uint32_t>(g);
        r.full[h] = 1;
        r.source[g] = r.source_full[g] = 1;
        continue;
      }
    }
    if (new_steps) continue;
    const u64 g = steps_at->second;
    if (r.upto[g] != r.upto[h] || !same(h, g)) continue;
    // Pairs told apart: where the previous head shares the pair, a re-read
    // counts L's blocks read in its window unless the head reads them again
    // by then. They are not, for a re-reader whose window starts at step s
    // (its predecessor's start) and has g steps, where the first CTA r of
    // the head to read block y = s - s_L starts at s_L + g - 1 + [r ≤ i] or
    // later (the first of L's blocks in the window; later ones are read
    // later). A run of such places up to upto.
    u64 lo = r.upto[h];
    while (lo > 1) {
      const u64 i = h0 + lo - 1;
      const i64 ylo = c.s[i - 1] - c.s[L], gap = c.s[i] - c.s[i - 1];
      const i64 yhi = std::min<i64>(static_cast<i64>(c.e[L]) - 1, c.s[i] + static_cast<i64>(c.e[i - 1]) - 1 - c.s[L]);
      if (ylo <= yhi) {
        const u64 reader = h0 + c.first_reader[static_cast<u64>(ylo)];
        if (c.s[reader] - (reader <= i ? 1 : 0) < c.s[L] + gap - 1) break;
      }
      --lo;
    }
    if (lo == r.upto[h]) continue;
    r.from[h] = static_cast<std::uint32_t>(g);
    r.lo[h] = static_cast<std::uint32_t>(lo);
    r.source[g] = 1;
  }
  // Whole heads: where the next heads (h + 1 and g + 1) started alike too,
  // with their pair relations alike, and the heads after them start only
  // after the head's last read (and a step), a CTA of h meets CTAs of h - 1,
  // h and h + 1 alone to its last read, as its place in g does: its
  // re-reads repeat g's up to the head's last CTA.
  r.rupto = r.upto;
  std::vector<i64> last_read(heads, never);
  for (u64 h = 0; h < heads; ++h) last_read[h] = c.f((h + 1) * per - 1);
  auto alone = [&](u64 h) { return h + 2 >= heads || c.s[(h + 2) * per] > last_read[h] + 1; };
  for (u64 h = 1; h + 1 < heads; ++h) {
    const u64 g = r.from[h];
    if (g == ChainGrid::none32 || r.full[h] == 0 || one_pair(h + 1) != one_pair(g + 1) || !alone(h) || !alone(g) ||
        !same(h + 1, g + 1))
      continue;
    r.rupto[h] = static_cast<std::uint32_t>(per);
  }
  r.source_end.assign(heads, 0);
  for (u64 h = 0; h < heads; ++h)
    if (r.from[h] != ChainGrid::none32) r.source_end[r.from[h]] = std::max(r.source_end[r.from[h]], r.rupto[h]);
  r.kept.assign(heads, ChainGrid::none32);
  for (u64 h = 0, n = 0; h < heads; ++h)
    if (r.source_full[h] != 0) r.kept[h] = static_cast<std::uint32_t>(n++);
  r.source_rank.assign(heads, ChainGrid::none32);
  for (u64 h = 0; h < heads; ++h)
    if (r.source[h] != 0) r.source_rank[h] = static_cast<std::uint32_t>(r.sources++);
  r.first_at.assign(per + 1, 0);
  for (u64 q = 0; q < per; ++q) r.first_at[q + 1] = r.first_at[q] + c.e[q] - (q == 0 ? 0 : c.e[q - 1]);
  r.per_head = per;
  r.head = Divider(per);
  return r;
}

}  // namespace hbmscope::l2::chains
