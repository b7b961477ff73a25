#include <catch2/catch.hpp>
#include <chrono>
#include <list>
#include <random>
#include <unordered_map>

#include "hbmscope/error.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/sweep.hpp"
#include "hbmscope/l2_sim.hpp"
#include "hbmscope/model.hpp"
#include "hbmscope/tile_walk.hpp"

using namespace hbmscope;

namespace {

// The oracle: a plain LRU of `capacity` bytes over whole objects, evicting from
// the cold end until the contents fit (an object larger than the L2 is not kept).
struct DirectLru {
  explicit DirectLru(std::uint64_t c) : capacity(c) {}
  std::uint64_t capacity;
  std::list<std::uint64_t> order;  // front = most recent
  struct Entry {
    std::uint64_t bytes;
    std::list<std::uint64_t>::iterator it;
    bool dirty = false;  // an intermediate written and not yet written back
  };
  std::unordered_map<std::uint64_t, Entry> entries;
  std::uint64_t used = 0, reads = 0, writes = 0, next_anon = 1ull << 40;
  std::unordered_map<std::uint32_t, std::uint64_t> key_of;  // object id -> current key

  std::uint64_t key(std::uint32_t obj) {
    if (obj == l2_once_only) return next_anon++;
    auto [it, fresh] = key_of.try_emplace(obj, obj);
    return it->second;
  }
  bool touch(std::uint64_t k, std::uint64_t bytes, bool make_dirty = false) {
    bool hit = false, dirty = make_dirty;
    if (auto it = entries.find(k); it != entries.end()) {
      hit = true;
      dirty |= it->second.dirty;
      order.erase(it->second.it);
      used -= it->second.bytes;
      entries.erase(it);
    }
    order.push_front(k);
    entries[k] = {bytes, order.begin(), dirty};
    used += bytes;
    while (used > capacity) {
      const std::uint64_t victim = order.back();
      if (entries[victim].dirty) writes += entries[victim].bytes;  // evicted dirty: written back
      used -= entries[victim].bytes;
      entries.erase(victim);
      order.pop_back();
    }
    return hit;
  }
  void operator()(const L2Access& a) {
    switch (a.kind) {
      case L2Access::Kind::read:
        if (!a.allocate || !touch(key(a.obj), a.bytes)) reads += a.bytes;
        break;
      case L2Access::Kind::write:
        writes += a.bytes;
        if (a.allocate) touch(key(a.obj), a.bytes);
        break;
      case L2Access::Kind::write_dirty:
        touch(key(a.obj), a.bytes, true);
        break;
      case L2Access::Kind::forget:  // the id may be reused: the old object stays cached under a new name
        if (auto it = key_of.find(a.obj); it != key_of.end()) {
          const std::uint64_t fresh = next_anon++;
          if (auto e = entries.find(it->second); e != entries.end()) {
            Entry moved = e->second;
            moved.dirty = false;  // dead: never written back
            entries.erase(e);
            *moved.it = fresh;
            entries[fresh] = moved;
          }
          it->second = next_anon++;  // the next object under this id is a new one
        }
        break;
    }
  }
};

std::uint64_t direct_flash(const Shape& s, L2SimConfig c) {
  DirectLru lru(c.l2_bytes);
  for_each_flash_l2_access(s, c, [&](const L2Access& a) { lru(a); });
  return lru.reads + lru.writes;
}

std::uint64_t direct_standard(const Shape& s, L2SimConfig c) {
  DirectLru lru(c.l2_bytes);
  for_each_standard_l2_access(s, c, [&](const L2Access& a) { lru(a); });
  return lru.reads + lru.writes;
}

std::vector<Shape> grid_shapes() {
  std::vector<Shape> out;
  for (std::uint64_t nq : {1u, 100u, 256u, 300u})
    for (std::uint64_t nkv : {64u, 257u, 512u})
      for (bool causal : {false, true})
        for (auto [h, hkv] : {std::pair<std::uint64_t, std::uint64_t>{1, 1}, {4, 4}, {6, 2}}) {
          Shape s;
          s.seq_q = nq;
          s.seq_kv = nkv;
          s.block_rows = 64;
          s.block_cols = 32;
          s.causal = causal;
          s.heads = h;
          s.kv_heads = hkv;
          s.head_dim = 32;
          s.batch = 2;
          out.push_back(s);
        }
  return out;
}

Shape random_shape(std::mt19937_64& rng) {
  auto pick = [&](std::uint64_t lo, std::uint64_t hi) {
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
  };
  Shape s;
  s.kv_heads = pick(1, 3);
  s.heads = s.kv_heads * pick(1, 3);
  s.batch = pick(1, 2);
  s.seq_q = pick(1, 700);
  s.seq_kv = pick(1, 700);
  s.head_dim = pick(1, 96);
  s.block_rows = pick(8, 128);
  s.block_cols = pick(8, 128);
  s.causal = pick(0, 1) == 1;
  s.dtype = static_cast<Dtype>(pick(0, 3));
  return s;
}

L2SimConfig small_gpu(std::uint64_t l2_bytes, Rasterization order = Rasterization::query_block_major) {
  L2SimConfig c;
  c.l2_bytes = l2_bytes;
  c.sm_count = 3;
  c.ctas_per_sm = 2;
  c.order = order;
  return c;
}

}  // namespace

TEST_CASE("L2 sim: no L2 gives flash_no_l2, an L2 holding everything gives the floor", "[l2sim]") {
  for (const Shape& s : grid_shapes())
    for (auto order : {Rasterization::query_block_major, Rasterization::head_major}) {
      INFO(describe(s) << " " << rasterization_name(order));
      L2SimConfig c = small_gpu(0, order);
      const auto none = flash_l2_sim(s, c);
      CHECK(none.dram_bytes == flash_no_l2_bytes(s));
      CHECK(none.l2_hit_rate == 0.0);
      CHECK(none.dram_write_bytes == qo_footprint_bytes(s) / 2);
      CHECK(none.min_dram_bytes == floor_bytes(s));

      c.l2_bytes = kv_footprint_bytes(s) + qo_footprint_bytes(s);
      CHECK(flash_l2_sim(s, c).dram_bytes == floor_bytes(s));
      c.q_o_allocate = false;  // Q and O bypass: all K and V is enough
      c.l2_bytes = kv_footprint_bytes(s);
      CHECK(flash_l2_sim(s, c).dram_bytes == floor_bytes(s));
      c.l2_bytes = 0;
      CHECK(flash_l2_sim(s, c).dram_bytes == flash_no_l2_bytes(s));
    }
}

TEST_CASE("L2 sim: floor <= flash_l2_sim <= flash_no_l2, non-increasing in L2 size", "[l2sim]") {
  std::mt19937_64 rng(77);
  std::vector<Shape> shapes = grid_shapes();
  for (int t = 0; t < 120; ++t) shapes.push_back(random_shape(rng));
  for (const Shape& s : shapes)
    for (auto order : {Rasterization::query_block_major, Rasterization::head_major}) {
      INFO(describe(s) << " " << rasterization_name(order));
      const std::uint64_t all = kv_footprint_bytes(s) + qo_footprint_bytes(s);
      std::vector<std::uint64_t> ladder{0, 1};
      for (std::uint64_t k = 1; k <= 40; ++k) ladder.push_back(all * k / 32);
      const auto bytes = flash_l2_curve(s, small_gpu(0, order), ladder);
      REQUIRE(bytes.size() == ladder.size());
      for (std::size_t k = 0; k < bytes.size(); ++k) {
        CHECK(bytes[k] >= floor_bytes(s));
        CHECK(bytes[k] <= flash_no_l2_bytes(s));
        if (k > 0) CHECK(bytes[k] <= bytes[k - 1]);
      }
      CHECK(bytes.front() == flash_no_l2_bytes(s));
      CHECK(bytes.back() == floor_bytes(s));
    }
}

TEST_CASE("L2 sim: the stack-distance LRU equals a direct LRU on the same accesses", "[l2sim]") {
  std::mt19937_64 rng(5);
  for (int t = 0; t < 60; ++t) {
    const Shape s = random_shape(rng);
    const std::uint64_t all = kv_footprint_bytes(s) + qo_footprint_bytes(s);
    for (auto order : {Rasterization::query_block_major, Rasterization::head_major})
      for (bool qo : {true, false})
        for (std::uint64_t cap : {std::uint64_t{0}, all / 50, all / 9, all / 4, all / 2 + 7}) {
          INFO(describe(s) << " " << rasterization_name(order) << " qo " << qo << " L2 " << cap);
          L2SimConfig c = small_gpu(cap, order);
          c.q_o_allocate = qo;
          c.sm_count = static_cast<std::uint32_t>(1 + t % 5);
          CHECK(flash_l2_sim(s, c).dram_bytes == direct_flash(s, c));
          CHECK(standard_l2_sim(s, c).dram_bytes == direct_standard(s, c));
        }
  }
}

TEST_CASE("L2 sim: the backward's stack distances equal a direct LRU with dirty lines", "[l2sim][backward]") {
  // Intermediates (D, the dQ accumulator, per-query-head dK and dV) are written
  // back when evicted dirty, never when dead in the L2.
  std::mt19937_64 rng(17);
  for (int t = 0; t < 40; ++t) {
    Shape s = random_shape(rng);
    s.pass = Pass::bwd;
    for (bool qo : {true, false})
      for (std::uint64_t cap : {std::uint64_t{0}, std::uint64_t{3000}, std::uint64_t{40000}, std::uint64_t{300000}}) {
        INFO(describe(s) << " qo " << qo << " L2 " << cap);
        L2SimConfig c = small_gpu(cap);
        c.q_o_allocate = qo;
        c.method = L2SimMethod::enumeration;
        CHECK(flash_l2_sim(s, c).dram_bytes == direct_flash(s, c));
      }
  }
}

TEST_CASE("L2 sim: the L2 size to reach the floor is exact", "[l2sim]") {
  for (const Shape& s : grid_shapes()) {
    INFO(describe(s));
    L2SimConfig c = small_gpu(0);
    const std::uint64_t need = flash_l2_sim(s, c).l2_bytes_to_min;
    c.l2_bytes = need;
    CHECK(flash_l2_sim(s, c).dram_bytes == floor_bytes(s));
    if (need > 0) {
      c.l2_bytes = need - 1;
      CHECK(flash_l2_sim(s, c).dram_bytes > floor_bytes(s));
    } else {
      CHECK(flash_no_l2_bytes(s) == floor_bytes(s));  // nothing is re-read
    }
    CHECK(need <= kv_footprint_bytes(s) + qo_footprint_bytes(s));
  }
}

TEST_CASE("L2 sim: deterministic, counts consistent", "[l2sim]") {
  Shape s;
  s.batch = 2;
  s.heads = 8;
  s.kv_heads = 2;
  s.seq_q = s.seq_kv = 2000;
  s.head_dim = 64;
  s.causal = true;
  L2SimConfig c = small_gpu(3'000'000);
  const auto a = flash_l2_sim(s, c);
  const auto b = flash_l2_sim(s, c);
  CHECK(a.dram_bytes == b.dram_bytes);
  CHECK(a.dram_read_bytes == b.dram_read_bytes);
  CHECK(a.l2_hit_rate == b.l2_hit_rate);
  CHECK(a.heads_per_wave == b.heads_per_wave);
  CHECK(a.dram_bytes == a.dram_read_bytes + a.dram_write_bytes);
  CHECK(a.read_request_bytes == flash_no_l2_bytes(s) - qo_footprint_bytes(s) / 2);
  CHECK(a.l2_hit_rate > 0.0);
  CHECK(a.l2_hit_rate < 1.0);
}

TEST_CASE("L2 sim: the schedule's waves and heads in flight", "[l2sim]") {
  Shape s;
  s.heads = s.kv_heads = 8;
  s.seq_q = s.seq_kv = 1024;  // 8 query blocks and 8 key blocks per head
  s.head_dim = 64;
  L2SimConfig c;
  c.sm_count = 8;
  c.ctas_per_sm = 2;  // 16 slots: two heads' query blocks per wave
  c.l2_bytes = 1'000'000;
  const auto q = flash_l2_sim(s, c);
  CHECK(q.waves == 4);
  CHECK(q.steps == 4 * 8);
  CHECK(q.heads_per_wave == 2.0);
  CHECK(q.kv_heads_per_wave == 2.0);
  c.order = Rasterization::head_major;
  const auto h = flash_l2_sim(s, c);
  CHECK(h.steps == 4 * 8);
  CHECK(h.heads_per_wave == 8.0);
  // Eight heads' K/V (8 x 256 kB) do not fit 1 MB; two heads' (512 kB) do.
  CHECK(q.dram_bytes < h.dram_bytes);
  CHECK(q.dram_bytes == floor_bytes(s));

  s.kv_heads = 1;  // GQA: all eight heads share one K/V
  const auto g = flash_l2_sim(s, c);
  CHECK(g.kv_heads_per_wave == 1.0);
  CHECK(g.dram_bytes == floor_bytes(s));
}

TEST_CASE("L2 sim: every CTA reads Q, its visible K/V tiles in order, then writes O", "[l2sim]") {
  Shape s;
  s.heads = s.kv_heads = 2;
  s.seq_q = 300;
  s.seq_kv = 300;
  s.causal = true;
  L2SimConfig c = small_gpu(0);
  std::uint64_t reads = 0, writes = 0, kv_reads = 0;
  for_each_flash_l2_access(s, c, [&](const L2Access& a) {
    if (a.kind == L2Access::Kind::read) {
      reads += a.bytes;
      kv_reads += a.obj != l2_once_only;
    }
    if (a.kind == L2Access::Kind::write) writes += a.bytes;
  });
  CHECK(kv_reads == walk_totals(s).tiles);  // K_j and V_j: one object, read together
  CHECK(reads + writes == flash_no_l2_bytes(s));
  CHECK(writes == qo_footprint_bytes(s) / 2);
}

TEST_CASE("standard_l2_sim: between its minimum and the standard model", "[l2sim][standard]") {
  std::mt19937_64 rng(11);
  std::vector<Shape> shapes = grid_shapes();
  for (int t = 0; t < 60; ++t) shapes.push_back(random_shape(rng));
  for (const Shape& s : shapes) {
    INFO(describe(s));
    const std::uint64_t e = elem_bytes(s.dtype);
    const std::uint64_t sp_writes = 2 * e * s.batch * s.heads * s.seq_q * s.seq_kv;
    const std::uint64_t least = floor_bytes(s) + sp_writes;
    L2SimConfig c = small_gpu(0);
    const auto none = standard_l2_sim(s, c);
    CHECK(none.dram_bytes == standard_bytes(s));
    CHECK(none.min_dram_bytes == least);
    const std::uint64_t all = qo_footprint_bytes(s) + kv_footprint_bytes(s) + 2 * sp_writes;
    std::vector<std::uint64_t> ladder{0};
    for (std::uint64_t k = 1; k <= 20; ++k) ladder.push_back(all * k / 16);
    const auto bytes = standard_l2_curve(s, c, ladder);
    for (std::size_t k = 0; k < bytes.size(); ++k) {
      CHECK(bytes[k] >= least);
      CHECK(bytes[k] <= standard_bytes(s));
      if (k > 0) CHECK(bytes[k] <= bytes[k - 1]);
    }
    CHECK(bytes.front() == standard_bytes(s));
    CHECK(bytes.back() == least);
    c.l2_bytes = none.l2_bytes_to_min;
    CHECK(standard_l2_sim(s, c).dram_bytes == least);
  }
}

TEST_CASE("standard_l2_sim: one head's S and P stay in L2 at N = 2048", "[l2sim][standard]") {
  Shape s;
  s.seq_q = s.seq_kv = 2048;
  s.head_dim = 128;
  L2SimConfig c;
  c.l2_bytes = 60ull << 20;
  const auto r = standard_l2_sim(s, c);
  const std::uint64_t sp = 2ull * 2048 * 2048 * 2;  // S and P, written once each
  CHECK(r.dram_bytes == floor_bytes(s) + sp);
  CHECK(r.l2_bytes_to_min > 8'000'000);  // S's 8 MB must survive until the softmax reads it
  s.heads = s.kv_heads = 32;             // 32 heads' S is 268 MB: the LRU keeps none of it
  const auto many = standard_l2_sim(s, c);
  CHECK(many.dram_bytes > many.min_dram_bytes);
}

TEST_CASE("L2 sim: options and refusals", "[l2sim]") {
  CHECK(parse_rasterization("head-major") == Rasterization::head_major);
  CHECK(parse_rasterization("query-block-major") == Rasterization::query_block_major);
  CHECK_FALSE(parse_rasterization("diagonal"));
  CHECK(rasterization_name(Rasterization::head_major) == "head-major");
  Shape s;
  L2SimConfig c;
  c.sm_count = 0;
  CHECK_THROWS_AS(flash_l2_sim(s, c), Error);
  c.sm_count = 1;
  c.ctas_per_sm = 0;
  CHECK_THROWS_AS(standard_l2_sim(s, c), Error);
  c.ctas_per_sm = 1;
  CHECK(parse_l2_method("runs") == L2SimMethod::runs);
  CHECK(parse_l2_method("enumeration") == L2SimMethod::enumeration);
  CHECK_FALSE(parse_l2_method("fast"));
  CHECK(l2_method_name(L2SimMethod::enumeration) == "enumeration");
  s.seq_q = s.seq_kv = 16ull << 20;  // 1.7e10 tiles: the waves' closed form, 131072 CTAs
  CHECK(flash_l2_sim(s, c).dram_bytes >= floor_bytes(s));
  c.method = L2SimMethod::enumeration;  // enumerated: refused, naming the way out
  CHECK_THROWS_WITH(flash_l2_sim(s, c), Catch::Contains("work units") && Catch::Contains("--l2-method runs"));
  c.method = L2SimMethod::runs;
  s.causal = true;  // not in lockstep, 128 heads of 131072 CTAs: more than any exact evaluation holds
  s.heads = s.kv_heads = 128;
  c.sm_count = 132;
  CHECK_THROWS_WITH(flash_l2_sim(s, c), Catch::Contains("work units (at most"));
}

TEST_CASE("L2 sim: the bench shape is computed", "[l2sim]") {
  Shape s;
  s.batch = 1;
  s.heads = s.kv_heads = 32;
  s.seq_q = s.seq_kv = 32768;
  s.head_dim = 128;
  L2SimConfig c;
  c.l2_bytes = 60ull << 20;
  const auto r = flash_l2_sim(s, c);
  CHECK(r.dram_bytes >= floor_bytes(s));
  CHECK(r.dram_bytes <= flash_no_l2_bytes(s));
  CHECK(r.steps > 0);
}

TEST_CASE("L2 sim rows: variants, detail, table columns and JSON fields", "[l2sim][report]") {
  Report rep;
  rep.rows = model_rows(expand(note_axes()));
  L2SimConfig c;
  c.l2_bytes = 60ull << 20;
  for (Row& r : rep.rows) add_l2_sim(r, c);
  const Row& first = rep.rows.front();
  REQUIRE(first.l2_sim);
  REQUIRE(first.variant("flash_l2_sim"));
  REQUIRE(first.variant("standard_l2_sim"));
  CHECK(first.variants[0].id == "standard");  // existing variants keep their places
  CHECK(first.variant("flash_l2_sim")->bytes == floor_bytes(first.shape));
  CHECK(first.l2_sim->flash.read_bytes + first.l2_sim->flash.write_bytes ==
        first.variant("flash_l2_sim")->bytes);
  CHECK(first.l2_sim->heads_per_wave == 1.0);

  const std::string t = render(rep, {});
  CHECK_THAT(t, Catch::Contains("simulated L2 of 60 MiB, 132 SMs × 2 CTAs, query-block-major"));
  CHECK_THAT(t, Catch::Contains("flash_l2_sim"));  // a table too wide for one is split, with variant ids
  CHECK_THAT(render(rep, {Format::table, Units::decimal, true}), Catch::Contains("FlashAttention, simulated L2"));
  CHECK_THAT(t, Catch::Contains("L2 for floor"));
  CHECK_THAT(t, Catch::Contains(" %"));

  const auto j = report_to_json(rep);
  const auto& row = j["rows"][0];
  CHECK(row["bytes"]["flash_l2_sim"].get<std::uint64_t>() == floor_bytes(first.shape));
  CHECK(row["l2_sim"]["l2_bytes"].get<std::uint64_t>() == c.l2_bytes);
  CHECK(row["l2_sim"]["order"] == "query-block-major");
  CHECK(row["l2_sim"]["flash"].contains("l2_bytes_to_floor"));
  CHECK(row["l2_sim"]["flash"].contains("heads_per_wave"));
  CHECK(row["l2_sim"]["standard"].contains("l2_bytes_to_min"));

  Report plain;
  plain.rows = model_rows(expand(note_axes()));
  CHECK_FALSE(report_to_json(plain)["rows"][0].contains("l2_sim"));
}

TEST_CASE("L2 sim: access counts are closed forms equal to the streams' lengths", "[l2sim]") {
  std::mt19937_64 rng(11);
  for (int k = 0; k < 200; ++k) {
    Shape s;
    s.batch = 1 + rng() % 2;
    s.kv_heads = 1 + rng() % 2;
    s.heads = s.kv_heads * (1 + rng() % 2);
    s.seq_q = 1 + rng() % 700;
    s.seq_kv = 1 + rng() % 700;
    s.head_dim = 16;
    s.block_rows = 1 + rng() % 130;
    s.block_cols = 1 + rng() % 130;
    s.causal = rng() % 2;
    L2SimConfig c;
    std::uint64_t flash = 0, standard = 0;
    for_each_flash_l2_access(s, c, [&](const L2Access& a) { flash += a.kind != L2Access::Kind::forget; });
    for_each_standard_l2_access(s, c, [&](const L2Access& a) { standard += a.kind != L2Access::Kind::forget; });
    INFO(describe(s));
    CHECK(flash_l2_sim_accesses(s) == flash);
    CHECK(standard_l2_sim_accesses(s) == standard);
  }
}

TEST_CASE("L2 sim: a huge shape is counted and refused at once", "[l2sim]") {
  // 2^40 query blocks of one row: counting them one by one took minutes.
  Shape s;
  s.seq_q = 1ull << 40;
  s.seq_kv = 1;
  s.block_rows = 1;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(flash_l2_sim_accesses(s) == 3 * (1ull << 40));
  CHECK_THROWS_WITH(check_l2_sim_size(s, L2SimConfig{}), Catch::Contains("work units (at most"));
  CHECK_THROWS_WITH(flash_l2_sim(s, L2SimConfig{}), Catch::Contains("work units"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1));
  s.seq_q = s.seq_kv = 1u << 20;  // one head of 1M tokens, blocks of 128: just over the cap
  s.block_rows = 128;
  CHECK_NOTHROW(check_l2_sim_size(s, L2SimConfig{}));
  s.block_rows = s.block_cols = 256;
}

TEST_CASE("L2 sim memo: a shape simulated again replays the same result", "[l2sim]") {
  SweepAxes a;
  a.seq = {1024, 2048};
  a.head_dim = {64};
  a.heads = {8};
  a.kv_heads = {2};
  a.causal = {false, true};
  std::vector<Shape> shapes = expand(a);
  Shape decode = shapes.front();
  decode.decode = true;
  decode.seq_q = 1;
  decode.seq_kv = 4096;
  shapes.push_back(decode);
  L2SimConfig c;
  c.l2_bytes = 1u << 20;
  L2SimMemo memo;
  for (int pass = 0; pass < 2; ++pass)  // the second pass replays every shape
    for (const Shape& s : shapes) {
      Row direct = model_row(s), remembered = model_row(s);
      add_l2_sim(direct, c);
      memo.add_l2_sim(remembered, c);
      REQUIRE(remembered.variants.size() == direct.variants.size());
      for (std::size_t i = 0; i < direct.variants.size(); ++i) {
        CHECK(remembered.variants[i].id == direct.variants[i].id);
        CHECK(remembered.variants[i].bytes == direct.variants[i].bytes);
        CHECK(remembered.variants[i].intensity == direct.variants[i].intensity);
      }
      REQUIRE(remembered.l2_sim);
      CHECK(remembered.l2_sim->flash.read_bytes == direct.l2_sim->flash.read_bytes);
      CHECK(remembered.l2_sim->decode.size() == direct.l2_sim->decode.size());
    }
  CHECK(memo.replays() == shapes.size());
  // Another L2 size is another simulation, not a replay.
  Row other = model_row(shapes.front());
  L2SimConfig bigger = c;
  bigger.l2_bytes = 60ull << 20;
  memo.add_l2_sim(other, bigger);
  CHECK(memo.replays() == shapes.size());
}
