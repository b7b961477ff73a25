// The backward's main loop by rows: heads that repeat an earlier one
// (docs/l2-backward.md, "Repeated heads"). A head's row-set re-reads lie in
// windows between its first CTA's start and its last read; their distances
// are fixed by the accesses there. Where every head is alike and the CTAs
// that run there are those of an earlier head's surroundings shifted by a
// whole number of heads and a number of steps, the two heads' re-reads have
// the same distances, and the later one takes the earlier one's counts.
#include <algorithm>

#include "l2_backward_rows_loop.hpp"

namespace hbmscope::l2 {

namespace rows {

// Every head has the same CTAs (key blocks, query blocks, columns) and the
// same rows, its CTAs consecutive in launch order.
void Loop::find_dense() {
  const u64 heads = in_.head_keys;
  if (!in_.repeats || in_.head_major || heads < 3 || n_ % heads != 0) return;
  if (in_.parts && in_.kv_stride == 0) return;
  const u64 m = n_ / heads;
  const RowSetBytes& u = *in_.u;
  // (Row by row and CTA by CTA where the grid does not make the heads alike.)
  for (u64 h = 0; h < heads; ++h) {
    if (head_begin_[h] != h * m || head_end_[h] != (h + 1) * m || rows_[h] != rows_[0] || rows_[h] == 0) return;
    for (u64 i = 0; i < rows_[h] && !in_.heads_alike; ++i)
      if (u[head_row0_[h] + i] != u[head_row0_[0] + i]) return;
  }
  for (u64 h = 1; h < heads && !in_.heads_alike; ++h)  // (key blocks from the head's first: parts of a head are alike)
    for (u64 j = 0, x = h * m; j < m; ++j, ++x) {
      const BackwardCta &a = ct_[x], &b = ct_[j];
      if (a.first != b.first || a.end != b.end || a.cols != b.cols ||
          a.k_block - ct_[h * m].k_block != b.k_block - ct_[0].k_block || (*in_.row0)[x] != head_row0_[h])
        return;
    }
  dense_ = true;
  per_head_ = m;
  kv_stride_ = in_.parts ? in_.kv_stride : m;
  from_.assign(heads, none);
  source_.assign(heads, 0);
  head_rb_.assign(heads * rb_.size(), 0);
  head_wb_.assign(heads * rb_.size(), 0);
  obs_lo_.assign(heads, 0);
  obs_hi_.assign(heads, 0);
  head_steps_.assign(heads, 0);
}

u64 Loop::source_of(u64 h) {
  if (!dense_) return none;
  const u64 m = per_head_, h0 = h * m;
  // The steps of the head's re-reads' windows, and the CTAs that may run there.
  // (A CTA that reads rows has an offset and ends there: its ends, not the grid's CTAs.)
  i64 hi = s_[h0];
  for (u64 x = h0; x < h0 + m; ++x)
    if (off_[x] != none_off) hi = std::max(hi, e_[x]);
  const i64 lo = s_[h0];
  const Ids env = running(lo, hi);
  u64 key = 1469598103934665603ull;
  auto mix = [&](u64 v) { key = (key ^ v) * 1099511628211ull; };
  mix(env.lo + m - h0);  // (env.lo may lie below h0)
  mix(env.hi - h0);
  for (u64 x = env.lo; x < env.hi; ++x) mix(static_cast<u64>(s_[x] - lo));
  std::vector<u64>& same = by_env_[key];
  for (std::size_t k = 0; k < same.size() && k < 4; ++k)
    if (repeats(h, same[k], env, lo, hi)) return same[k];
  same.push_back(h);
  return none;
}

bool Loop::repeats(u64 h, u64 g, Ids env, i64 lo, i64 hi) const {
  const u64 m = per_head_, D = (h - g) * m;
  const i64 shift = s_[h * m] - s_[g * m];
  if (env.lo < D) return false;
  // The same CTAs run in the shifted steps (starts and, every head alike, ends
  // shifted); none other. (Searched from the last such answer: the current
  // head's fingers stay where its runs ask.)
  const Ids there = running(lo - shift, hi - shift, shifted_finger_);
  if (there.lo != env.lo - D || there.hi != env.hi - D) return false;
  for (u64 x = env.lo; x < env.hi; ++x)
    if (s_[x] - s_[x - D] != shift) return false;
  // K/V objects read there: the G heads of a pair share a key block's. Two
  // reads of one object (CTAs y and y + kv_stride_, one key block of two
  // heads) farther apart than any window are never both in one; nearer, the
  // pairs must match.
  const u64 a = std::max(env.lo, s_ix_.lower(lo)), b = std::min(env.hi, s_ix_.upper(hi)), w = kv_stride_;
  const Array<std::uint32_t>& kv = *in_.kv_of;
  for (u64 y = a; y + w < b; ++y)
    if (s_[y + w] - s_[y] <= static_cast<i64>(head_steps_[g]) &&
        (kv[y + w] == kv[y]) != (kv[y + w - D] == kv[y - D]))
      return false;
  // D's observer: g's settled reads were reported where they could raise its
  // rows' write-back distance past their start's bucket; h's rows must start
  // in as high a bucket.
  const u64 rh = head_row0_[h], rg = head_row0_[g];
  for (u64 i = 0; i < rows_[h]; ++i) {
    const u64 dh = obs_.indifferent_up_to(rh + i, 1), dg = obs_.indifferent_up_to(rg + i, 1);
    if (dh < dg && t_.bucket_of(dh) < t_.bucket_of(dg)) return false;
  }
  return true;
}

void Loop::repeat_settled(u64 h, u64 g) {
  const u64 B = rb_.size();
  for (u64 b = 0; b < B; ++b) {
    rb_[b] += head_rb_[g * B + b];
    wb_[b] += head_wb_[g * B + b];
  }
  const u64 rh = head_row0_[h], rg = head_row0_[g];
  for (u64 k = obs_lo_[g]; k < obs_hi_[g]; ++k) {
    const Observed o = observed_[k];
    const u64 row = o.row - rg + rh;
    if (o.d > obs_.indifferent_up_to(row, o.count)) observed_.push_back({row, o.d, o.count});
  }
  source_[g] = 1;
  from_[h] = g;
  ++repeated_;
}

void Loop::repeat_open(Tally& t, ReadObserver& obs, std::vector<Replay>& replays) const {
  if (!dense_ || repeated_ == 0) return;
  std::stable_sort(replays.begin(), replays.end(), [](const Replay& a, const Replay& b) { return a.head < b.head; });
  std::vector<u64> at(in_.head_keys + 1, 0);
  for (const Replay& r : replays) ++at[r.head + 1];
  for (u64 h = 1; h <= in_.head_keys; ++h) at[h] += at[h - 1];
  for (u64 h = 0; h < in_.head_keys; ++h) {
    const u64 g = from_[h];
    if (g == none) continue;
    for (u64 k = at[g]; k < at[g + 1]; ++k) {
      const u64 r = head_row0_[h] + replays[k].row, z = (*in_.u)[r];
      t.read(replays[k].d, z);
      t.writebacks(replays[k].d, 0, 1, in_.acc_row * (*in_.n_rows)[r]);
      obs.reads(r, replays[k].d, 0, 1);
    }
  }
}

}  // namespace rows

}  // namespace hbmscope::l2
