#pragma once
// Two tallies of the L2 simulation held equal (tests/test_l2_list.cpp,
// test_l2_runs.cpp, test_l2_backward.cpp): read and write-back bytes at every
// capacity, requests, first reads, writes and the largest distance.
#include <catch2/catch.hpp>

#include "../src/core/l2_tally.hpp"

namespace hbmscope::test {

inline void same_tally(const l2::Tally& a, const l2::Tally& b) {
  for (std::uint64_t c : a.capacities()) {
    INFO("capacity " << c);
    CHECK(a.dram_reads(c) == b.dram_reads(c));
    CHECK(a.dram_writes(c) == b.dram_writes(c));
  }
  CHECK(a.dram_reads(0) == b.dram_reads(0));
  CHECK(a.requested() == b.requested());
  CHECK(a.first_access_reads() == b.first_access_reads());
  CHECK(a.writes_always() == b.writes_always());
  CHECK(a.max_reuse_distance() == b.max_reuse_distance());
}

}  // namespace hbmscope::test
