// What lies outside the masked backward's main loop, from each object's first
// and last access in it (docs/l2-backward.md, "The backward through the
// segment engine"): the preprocessing; the row sets' first reads, measured
// from it; D's depth at its death; the dQ conversion; the GQA reduction.
// Each is one sweep over the accesses in trace order. Where each head's rows
// are first (last) read in row order, as whenever a head's CTAs start in
// key-block order and read its rows to the last, the rows' order is a merge
// of the heads' and the sums over rows read earlier (later) are sums over
// heads; elsewhere the rows are sorted and summed in a tree over rows.
#include "l2_backward_outside.hpp"

#include <algorithm>

#include "hbmscope/error.hpp"
#include "l2_backward_sweeps.hpp"

namespace hbmscope::l2 {

using namespace sweeps;

namespace {

template <class Key>
Array<u64> outside(const BackwardKeys& in, Tally& t, u64& periodic) {
  constexpr Key preprocessing = 0;
  const BackwardGrid& g = *in.grid;
  const FlashGrid& fg = g.forward();
  const Array<BackwardCta>& ct = *in.ct;
  const Array<u64>& start = *in.start;
  const FirstRows& row0 = *in.row0;
  const Array<std::uint32_t>& kv_of = *in.kv_of;
  const RowSetBytes& u = *in.u;
  const Array<std::uint32_t>& n_rows = *in.n_rows;
  const bool gqa = in.gqa, qo = in.qo;
  const std::vector<u64>& head_row0 = *in.head_row0;
  const u64 ctas = ct.size(), R = u.size(), P = in.kv_objects, heads = head_row0.size() - 1, G = fg.group();
  using RowId = std::uint32_t;  // (rows as ids in their orders)
  if (R >= (u64{1} << 32)) throw Error("internal: the backward's sweeps take fewer than 2^32 rows");
  // A row's bytes of each kind. (The per-row helpers hold their arrays' data
  // and sizes by value: the sweeps' calls between would otherwise make each
  // array's data be loaded again a row.)
  const std::uint32_t* const nr = n_rows.data();
  auto bytes_of = [nr](u64 per_row) { return [per_row, nr](u64 r) { return per_row * nr[r]; }; };
  const auto ql = bytes_of(g.ql_row()), dO = bytes_of(g.do_row()), dd = bytes_of(4), acc = bytes_of(g.acc_row());
  const auto o = bytes_of(g.o_row()), u_of = bytes_of(u.per_row);  // (u_of: u[r])
  const u64 pre_row = g.do_row() + (qo ? g.o_row() : 0) + 4 + g.acc_row();  // what the preprocessing leaves in L2, a row
  const auto pre = bytes_of(pre_row);
  const Array<u64>& rows_below = *u.rows_below;  // (R + 1)
  const u64* const rb = rows_below.data();
  const u64 all_rows = rows_below[R];

  // Each row's head key.
  Array<std::uint32_t> head_of(R);
  for (u64 h = 0; h < heads; ++h)
    for (u64 r = head_row0[h]; r < head_row0[h + 1]; ++r) head_of[r] = static_cast<std::uint32_t>(h);

  // Each row's first and last reader: row i of a head is read by the head's
  // CTAs j whose query blocks [first(j), end(j)) hold it, a range of j that
  // moves up with i, at step start(j) - first(j) + i; the earliest (latest)
  // is a sliding minimum (maximum) of (start(j) - first(j), CTA).
  const BackwardCta* const cp = ct.data();
  auto offset = [st = start.data(), cp](u64 id) { return static_cast<i64>(st[id]) - static_cast<i64>(cp[id].first); };
  Array<std::uint32_t> first_by(R), last_by(R);  // (none: a query block no key sees; each row written below)
  // Per row, where the main loop never reads it, 0 (its D's start); the
  // others' are written by the first reads' sweep below.
  Array<u64> row_start(R);
  const CtasByHead by_head = ctas_by_head(ct, heads, in.heads_alike && !in.head_major);
  const BackwardPeriod period = backward_period(in, by_head);
  {
    u64 most = 0;
    for (u64 k = 0; k < heads; ++k) most = std::max(most, by_head.at[k + 1] - by_head.at[k]);
    std::vector<u64> lo(most), hi(most);  // CTAs of the window: increasing (v, id) from the front; decreasing
    for (u64 k = 0; k < heads; ++k) {
      const u64 j0 = by_head.at[k], m = by_head.at[k + 1] - j0;
      auto js = [&](u64 n) { return by_head.id(j0 + n); };
      const u64 r0 = m == 0 ? head_row0[k + 1] : row0[js(0)], nq = head_row0[k + 1] - r0;
      for (u64 r = head_row0[k]; r < r0; ++r) {  // (a head no CTA reads)
        first_by[r] = last_by[r] = no_reader;
        row_start[r] = 0;
      }
      if (m == 0) continue;
      if (period.found() && k >= period.from) {  // (the readers of the head as many before, shifted)
        const u64 g0 = head_row0[k - period.heads];
        for (u64 i = 0; i < nq; ++i) {
          const std::uint32_t f = first_by[g0 + i], l = last_by[g0 + i];
          first_by[r0 + i] = f == no_reader ? f : static_cast<std::uint32_t>(f + period.ctas);
          last_by[r0 + i] = l == no_reader ? l : static_cast<std::uint32_t>(l + period.ctas);
          if (f == no_reader) row_start[r0 + i] = 0;
        }
        continue;
      }
      // Where every CTA that reads rows reads to the head's last (causal, no
      // window), readers only join: the earliest and latest are running
      // extremes (on a tie, the earlier CTA reads first).
      bool to_end = true;
      for (u64 n = 0; n < m && to_end; ++n) to_end = ct[js(n)].end <= ct[js(n)].first || ct[js(n)].end >= nq;
      if (to_end) {
        std::uint32_t earliest = no_reader, latest = no_reader;
        i64 earliest_off = 0, latest_off = 0;
        u64 next = 0;
        std::uint32_t *const fb = first_by.data() + r0, *const lb_ = last_by.data() + r0;  // (as the helpers above)
        u64* const rs = row_start.data() + r0;
        for (u64 i = 0; i < nq; ++i) {
          for (; next < m && cp[js(next)].first <= i; ++next) {
            const u64 id = js(next);
            const BackwardCta& c = cp[id];
            if (c.end <= c.first) continue;
            const i64 a = offset(id);
            if (earliest == no_reader || a < earliest_off) earliest = static_cast<std::uint32_t>(id), earliest_off = a;
            if (latest == no_reader || a >= latest_off) latest = static_cast<std::uint32_t>(id), latest_off = a;
          }
          fb[i] = earliest;
          lb_[i] = latest;
          if (earliest == no_reader) rs[i] = 0;
        }
        continue;
      }
      u64 lf = 0, lb = 0, hf = 0, hb = 0;  // [front, back) of each
      u64 next = 0;
      for (u64 i = 0; i < nq; ++i) {
        for (; next < m && ct[js(next)].first <= i; ++next) {
          const u64 id = js(next);
          if (ct[id].end <= ct[id].first) continue;
          while (lb > lf && offset(lo[lb - 1]) > offset(id)) --lb;  // (on a tie the earlier CTA reads first)
          lo[lb++] = id;
          while (hb > hf && offset(hi[hb - 1]) <= offset(id)) --hb;
          hi[hb++] = id;
        }
        while (lb > lf && ct[lo[lf]].end <= i) ++lf;
        while (hb > hf && ct[hi[hf]].end <= i) ++hf;
        first_by[r0 + i] = lb == lf ? no_reader : static_cast<std::uint32_t>(lo[lf]);
        last_by[r0 + i] = lb == lf ? no_reader : static_cast<std::uint32_t>(hi[hf]);
        if (lb == lf) row_start[r0 + i] = 0;
      }
    }
  }
  auto row_key = [offset, cp, hr0 = row0.head_row0->data()](u64 r, std::uint32_t x) {
    return x == no_reader ? preprocessing
                          : key_of<Key>(static_cast<u64>(offset(x) + static_cast<i64>(r - hr0[cp[x].head_key])), x, row_sub);
  };
  auto first_read = [row_key, fb = first_by.data()](u64 r) { return row_key(r, fb[r]); };  // (until first_by is freed)
  auto last_read = [row_key, lb = last_by.data()](u64 r) { return row_key(r, lb[r]); };
  // K/V objects' first and last reads, the dK, dV writes.
  Array<Key> kv_first(P, ~Key{0}), kv_last(P, 0);  // (one an object: millions without GQA)
  Array<u64> kv_bytes(P, 0);
  for (u64 id = 0; id < ctas; ++id) {  // (keys grow with the CTA: starts do not fall in launch order)
    const Key k = key_of<Key>(start[id], id, kv_sub);
    const u64 obj = kv_of[id];
    if (kv_first[obj] == ~Key{0}) {
      kv_first[obj] = k;
      kv_bytes[obj] = g.kv_col() * ct[id].cols;  // (an object's readers: its key block's columns)
    }
    kv_last[obj] = k;
  }

  // The K/V objects by first read, or by last read latest first. Starts do
  // not fall in launch order, so an object's first (last) read is its first
  // (last) CTA's, and the objects come in the order of those CTAs: one pass,
  // no sort. (Objects no CTA reads, none in a grid, last.)
  auto kv_by_read = [&](bool latest_first) {
    Array<std::uint32_t> ix(P);
    u64 n = 0;
    for (u64 j = 0; j < ctas; ++j) {
      const u64 id = latest_first ? ctas - 1 - j : j;
      const u64 k = kv_of[id];
      if ((latest_first ? kv_last[k] : kv_first[k]) == key_of<Key>(start[id], id, kv_sub)) ix[n++] = static_cast<std::uint32_t>(k);
    }
    for (u64 j = 0; j < P; ++j) {
      const u64 k = latest_first ? P - 1 - j : j;
      if (kv_first[k] == ~Key{0}) ix[n++] = static_cast<std::uint32_t>(k);
    }
    if (n != P) throw Error("internal: the backward's K/V objects' reads out of launch order");
    return ix;
  };

  // The preprocessing: dO and O read, D and the accumulator allocated dirty.
  t.reads(infinite, 0, 1, g.do_row() * all_rows);
  t.reads(infinite, 0, 1, g.o_row() * all_rows);

  // The dK, dV writes in trace order (the schedule's order by last step),
  // with their bytes and, with GQA, their places in the reduction's order:
  // K/V object times G plus the head in its group (below 2^32: a place a CTA).
  // (Keys from the schedule's ends and order, not kept; the CTAs by end lie
  // near launch order.)
  const Array<std::uint32_t>& by_end = *in.by_end;
  const Array<u64>& ends = *in.ends;
  auto dk_key = [e = ends.data(), id = by_end.data()](u64 i) { return key_of<Key>(e[i], id[i], dk_sub); };  // (of the i-th write)
  Array<std::uint32_t> dk_place(gqa ? ctas : 0);
  if (gqa) {
    std::vector<std::uint32_t> in_group(in.in_group ? 0 : fg.shape().heads);
    for (u64 h = 0; h < in_group.size(); ++h) in_group[h] = static_cast<std::uint32_t>(h % G);
    for (u64 i = 0; i < ctas; ++i) {
      const u64 id = by_end[i];
      dk_place[i] = static_cast<std::uint32_t>(u64{kv_of[id]} * G + (in.in_group ? (*in.in_group)[id] : in_group[ct[id].head]));
    }
  }
  // A place's object and head in its group (a shift where G is a power of two).
  const bool g_pow2 = (G & (G - 1)) == 0;
  const unsigned g_shift = g_pow2 ? static_cast<unsigned>(__builtin_ctzll(G)) : 0;
  auto object_of = [&](u64 place) { return g_pow2 ? place >> g_shift : place / G; };
  auto head_in_group = [&](u64 place) { return g_pow2 ? place & (G - 1) : place % G; };
  auto dk_at = [&](u64 i) -> u64 {  // (as many bytes as the object's K/V where they take L2 space)
    if (gqa) return kv_bytes[object_of(dk_place[i])];
    return qo ? kv_bytes[kv_of[by_end[i]]] : 0;
  };
  ByBucket sums(t);

  // First reads: after the preprocessing's later rows, what the main loop
  // read before (a row set the preprocessing had not reached adds only its Q).
  // Sums over rows first read before, by row (by head where each head's rows
  // are first read in row order: those of the row's head all come before it).
  // (A row's distance begins with the preprocessing's bytes of the rows
  // after it: from the rows' prefix sums.)
  auto pre_after = [pre_row, all_rows, rb](u64 r) { return pre_row * (all_rows - rb[r + 1]); };
  u64* const rs = row_start.data();
  const std::uint32_t* const ho = head_of.data();
  {
    // With a period the rows fall in three stretches of keys: the sweep's up
    // to the last first read of head h1 (the first whose first reads and its
    // source's follow every access of the CTAs before the period); from
    // there, up to one period after the first access of the last heads'
    // sources, a row takes its source's distance (p.heads heads before),
    // plus a constant (the accesses between the two are one period's, every
    // one an image of one before), plus the K/V first read between; after
    // it, the sweep again, its sums over the rows before taken a head at a
    // time (docs/l2-backward.md, "The outside by periods").
    const u64 h1 = period.found() ? periodic_from<Key>(in, period) : heads;
    Key stop = ~Key{0}, resume = ~Key{0};
    if (h1 + 1 < heads) {
      const u64 m = period.per_head;
      resume = key_of<Key>(start[(heads - period.heads) * m] + period.steps, heads * m, row_sub);
      stop = 0;
      for (u64 r = head_row0[0]; r < head_row0[h1 + 1]; ++r) stop = std::max(stop, first_read(r));
      if (stop >= resume) stop = resume = ~Key{0};
    }
    Array<RowId> rows;
    const bool by_heads = merge_heads(head_row0, first_read, rows, stop);
    if (!by_heads) {
      rows = order_by<RowId>(R, first_read);
      stop = resume = ~Key{0};
    }
    auto place = [by_heads, ho](u64 r) -> u64 { return by_heads ? ho[r] : r; };
    const Array<std::uint32_t> kvs = kv_by_read(false);
    PrefixSums<> q_seen(by_heads ? heads : R), u_seen(by_heads ? heads : R);
    u64 q_total = 0, kv_sum = 0, dk_sum = 0;
    std::size_t a = 0, b = 0;
    u64 q_first = 0;
    auto tally = [&](u64 r, u64 d) {
      q_first = checked_add(q_first, ql(r), "L2 simulation bytes");  // (tallied at once, below)
      if (qo) {
        sums.read_writeback(d, dd(r) + acc(r), acc(r));
        sums.read(d + o(r), dO(r));
      } else {
        sums.read_writeback(d, dd(r) + acc(r) + dO(r), acc(r));
      }
    };
    auto sweep = [&] {
      for (const u64 r : rows) {
        const Key key = first_read(r);
        if (key == preprocessing) continue;
        for (; a < kvs.size() && kv_first[kvs[a]] < key; ++a) kv_sum += kv_bytes[kvs[a]];
        for (; b < ctas && dk_key(b) < key; ++b) dk_sum += dk_at(b);
        const u64 x = place(r);
        const u64 d = u_of(r) + pre_after(r) + (q_total - q_seen.below(x + 1)) + u_seen.below(x + 1) + kv_sum + dk_sum;
        rs[r] = d;
        q_seen.add(x, ql(r));
        u_seen.add(x, u_of(r));
        q_total += ql(r);
        tally(r, d);
      }
    };
    sweep();
    if (stop != ~Key{0}) {
      // A periodic head's keys: those of a head of the first period (from
      // p.from - p.heads) a whole number of periods later.
      const u64 nq = head_row0[1] - head_row0[0], back = period.heads, h0 = period.from - back;
      std::vector<Key> first_keys(back * nq);
      for (u64 j = 0; j < back; ++j)
        for (u64 i = 0; i < nq; ++i) first_keys[j * nq + i] = first_read(head_row0[h0 + j] + i);
      const Key shift = period_shift<Key>(period);
      // K/V first read before a key: a prefix of the objects by first read,
      // found from a hint (a head's rows move it forward).
      Array<Key> kv_keys(P);
      Array<u64> kv_prefix(P + 1);
      kv_prefix[0] = 0;
      for (u64 k = 0; k < P; ++k) {
        kv_keys[k] = kv_first[kvs[k]];
        kv_prefix[k + 1] = kv_prefix[k] + kv_bytes[kvs[k]];
      }
      auto kv_before = [&](Key key, std::size_t& at) {
        while (at < P && kv_keys[at] < key) ++at;
        while (at > 0 && kv_keys[at - 1] >= key) --at;
        return kv_prefix[at];
      };
      std::size_t at_h = 0, at_g = 0;
      // The constant, from head h1 and its source (both in the sweep).
      u64 c = 0;
      for (u64 i = 0; i < nq; ++i)
        if (const Key key = first_read(head_row0[h1] + i); key != preprocessing) {
          const u64 rg = head_row0[h1 - back] + i;
          c = row_start[head_row0[h1] + i] - kv_before(key, at_h) - row_start[rg] + kv_before(first_read(rg), at_g);
          break;
        }
      std::vector<u64> q_head(heads, 0), u_head(heads, 0);  // per head, the rows' Q and row sets above
      for (u64 h = h1 + 1; h < heads; ++h) {
        const u64 rh = head_row0[h], rg = head_row0[h - back];
        const Key* keys = &first_keys[(h - h0) % back * nq];
        const Key at = static_cast<Key>((h - h0) / back) * shift;  // (whole periods past its first-period head)
        for (u64 i = 0; i < nq; ++i) {
          if (keys[i] == preprocessing) continue;
          const Key key = keys[i] + at;
          if (key <= stop || key > resume) continue;
          const u64 d = row_start[rg + i] + c + kv_before(key, at_h) - kv_before(key - shift, at_g);
          row_start[rh + i] = d;
          tally(rh + i, d);
          q_head[h] += ql(rh + i);
          u_head[h] += u[rh + i];
          ++periodic;
        }
      }
      // The sweep again after `resume`, its sums over the rows read before
      // (the first sweep's and, a head at a time, those above).
      for (u64 h = 0; h < heads; ++h) {
        q_seen.add(h, q_head[h]);
        u_seen.add(h, u_head[h]);
        q_total += q_head[h];
      }
      rows.clear();
      if (!merge_heads(head_row0, first_read, rows, ~Key{0}, resume))
        throw Error("internal: the backward's periodic heads' first reads out of order");
      sweep();
    }
    sums.first(q_first);
  }
  Array<std::uint32_t>().swap(first_by);  // (its pages for the rows by last read)

  // What the main loop reads after an access: the row sets, K/V and dK, dV
  // whose last access is later. Rows by last read, latest first (merged as
  // the first reads where each head's come in row order; then the rows never
  // read, last).
  // (With a period, most of them copied from a period before.)
  Array<RowId> rows_late;
  Array<Key> late_key;
  const bool late_by_heads = period.found() ? merge_by_period(head_row0, last_read, period, rows_late, late_key)
                                            : merge_heads(head_row0, last_read, rows_late);
  if (late_by_heads) {
    std::reverse(rows_late.begin(), rows_late.end());
    std::reverse(late_key.begin(), late_key.end());
    for (u64 r = 0; r < R; ++r)
      if (last_by[r] == no_reader) rows_late.push_back(static_cast<RowId>(r));
  } else {
    rows_late = order_by<RowId>(R, last_read);
    std::reverse(rows_late.begin(), rows_late.end());
    late_key.clear();
  }
  if (late_key.size() < rows_late.size()) {
    const std::size_t known = late_key.size();
    late_key.resize(rows_late.size());
    for (std::size_t i = known; i < rows_late.size(); ++i) late_key[i] = last_read(rows_late[i]);
  }
  const Array<std::uint32_t> kvs_late = kv_by_read(true);
  struct After {
    u64 rows = 0, acc = 0, kv = 0, dk = 0;
    std::size_t r = 0, k = 0, d = 0;
  };
  // Advances `a` over every access later than `key`; `row` and `dk` see each
  // one passed (a row; a dK, dV write's place in trace order).
  // (Its arrays' data read through pointers, as the per-row helpers'.)
  const RowId* const late_rows = rows_late.data();
  const Key* const late_keys = late_key.data();
  auto advance = [&](After& a, Key key, auto&& row, auto&& dk) {
    for (const std::size_t end = rows_late.size(); a.r < end && late_keys[a.r] > key; ++a.r) {
      const u64 x = late_rows[a.r];
      a.rows += u_of(x);
      a.acc += acc(x);
      row(x);
    }
    for (; a.k < kvs_late.size() && kv_last[kvs_late[a.k]] > key; ++a.k) a.kv += kv_bytes[kvs_late[a.k]];
    for (; a.d < ctas && dk_key(ctas - 1 - a.d) > key; ++a.d) {  // (dK, dV: written once)
      a.dk += dk_at(ctas - 1 - a.d);
      dk(ctas - 1 - a.d);
    }
  };

  // D's depth at its death and the dQ conversion's reads, in row order: the
  // accumulators the conversion read before (those of rows with an earlier
  // last read; the others are among the main loop's rows). Those of rows
  // below r read later, by row, or by head where each head's rows are last
  // read in row order (those of r's head read later all lie above it); for a
  // row never read, every row the main loop reads below it.
  {
    // A row the main loop never reads was last accessed by the preprocessing:
    // after it come the preprocessing's later rows (with O, for those the
    // main loop reads too, beside their row sets) and the whole main loop.
    // (Both only where some row is never read.)
    bool unread = false;
    for (u64 r = 0; r < R && !unread; ++r) unread = last_by[r] == no_reader;
    Array<u64> pre_extra(unread ? R + 1 : 0), acc_read(unread ? R + 1 : 0);
    if (unread) {
      pre_extra[R] = 0;
      for (u64 r = R; r-- > 0;)
        pre_extra[r] = pre_extra[r + 1] + (last_by[r] != no_reader ? (qo ? o(r) : 0) : pre(r));
      acc_read[0] = 0;  // accumulators of the rows below r, of those the main loop reads
      for (u64 r = 0; r < R; ++r) acc_read[r + 1] = acc_read[r] + (last_by[r] != no_reader ? acc(r) : 0);
    }
    // (The conversion's reads before a row's: the rows' below it, from the
    // rows' prefix sums.)
    PrefixSums<> acc_later(late_by_heads ? heads : R);
    After a;
    for (std::size_t i = 0; i < rows_late.size(); ++i) {
      const u64 r = late_rows[i];
      const Key key = late_keys[i];
      advance(a, key, [&](u64 x) { acc_later.add(late_by_heads ? ho[x] : x, acc(x)); }, [](u64) {});
      const u64 after = a.rows + a.kv + a.dk + (key == preprocessing ? pre_extra[r + 1] : 0);
      rs[r] = std::max(rs[r], dd(r) + acc(r) + after);
      const u64 conv = acc(r) + after - (key == preprocessing ? acc_read[r] : acc_later.below(late_by_heads ? ho[r] : r));
      const u64 d = conv + (g.acc_row() + (qo ? g.dq_row() : 0)) * rb[r];
      sums.read_writeback(d, acc(r), acc(r));
    }
    t.write(g.dq_row() * all_rows);
  }

  // GQA: dK, dV of the G heads of a (kv head, key block) read in head order
  // after the conversion, then their sum written.
  if (gqa) {
    const u64 acc_total = g.acc_row() * all_rows, dq_total = g.dq_row() * all_rows;
    // A place's dK, dV as its object's K/V. Those written later, below a
    // place: the objects' below it (sums over objects) and its object's
    // heads' below its own (one bit a place: each is written once, as many
    // bytes as its object's K/V).
    std::vector<u64> out_before(P + 1, 0);
    for (u64 k = 0; k < P; ++k) out_before[k + 1] = out_before[k] + kv_bytes[k];
    PrefixSums<4> objects_later(P);  // (chunks: written from a few parts in turn)
    std::vector<u64> written_later((P * G + 63) / 64, 0);
    auto written_below = [&](u64 from, u64 to) {  // places [from, to) written later
      u64 n = 0;
      for (u64 x = from; x < to;) {
        const u64 w = x / 64, lo = x % 64, hi = std::min<u64>(64, lo + (to - x));
        const u64 word = written_later[w] >> lo;
        n += bits_set(hi - lo == 64 ? word : word & ((u64{1} << (hi - lo)) - 1));
        x += hi - lo;
      }
      return n;
    };
    After a;
    const std::uint32_t* const places = dk_place.data();
    const u64* const zkv = kv_bytes.data();
    const u64* const before = out_before.data();
    u64* const bits = written_later.data();
    for (u64 i = ctas; i-- > 0;) {
      advance(a, dk_key(i), [](u64) {}, [&](u64 j) {
        const u64 place = places[j];
        objects_later.add(object_of(place), zkv[object_of(place)]);
        bits[place / 64] |= u64{1} << (place % 64);
      });
      const u64 k = object_of(places[i]), h = head_in_group(places[i]), z = zkv[k];
      const u64 later = objects_later.below(k) + written_below(k * G, k * G + h) * z;
      const u64 d = z + a.rows + a.kv + a.dk + (acc_total - a.acc) + (qo ? dq_total : 0) + (G * before[k] + h * z - later) +
                    (qo ? before[k] : 0);
      sums.read_writeback(d, z, z);
    }
    t.write(out_before[P]);
  }
  sums.flush(t);
  return row_start;
}

}  // namespace

CtasByHead ctas_by_head(const Array<BackwardCta>& ct, u64 head_keys, bool alike) {
  CtasByHead r;
  r.at.assign(head_keys + 1, 0);
  if (alike && head_keys > 0 && ct.size() % head_keys == 0) {
    for (u64 h = 0; h <= head_keys; ++h) r.at[h] = h * (ct.size() / head_keys);
    return r;
  }
  bool in_order = true;  // (query-block-major: a head's CTAs are consecutive; ids stay empty)
  std::uint32_t last = 0;
  for (const BackwardCta& c : ct) {
    ++r.at[c.head_key + 1];
    in_order = in_order && c.head_key >= last;
    last = c.head_key;
  }
  std::partial_sum(r.at.begin(), r.at.end(), r.at.begin());
  if (in_order) return r;
  r.ids.resize(ct.size());
  std::vector<u64> next(r.at.begin(), r.at.end() - 1);
  for (u64 id = 0; id < ct.size(); ++id) r.ids[next[ct[id].head_key]++] = static_cast<std::uint32_t>(id);
  return r;
}

Array<u64> backward_outside(const BackwardKeys& in, Tally& t, u64& periodic) {
  periodic = 0;
  // Keys in 64 bits where every step lies below 2^37 and every CTA below 2^25.
  if (!in.wide_keys && in.steps < (u64{1} << 37) - 1 && in.ct->size() < (u64{1} << 25))
    return outside<u64>(in, t, periodic);
  return outside<Wide>(in, t, periodic);
}

}  // namespace hbmscope::l2
