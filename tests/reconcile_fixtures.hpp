#pragma once
// What the reconcile tests share: the fixtures of tests/fixtures/ncu
// (constructed, docs/reconcile.md) and shapes written briefly.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "hbmscope/ncu_import.hpp"
#include "hbmscope/shape.hpp"

namespace hbmscope::testing {

inline const std::string fixtures = HBMSCOPE_NCU_FIXTURES;

inline std::string slurp(const std::string& name) {
  std::ifstream f(fixtures + "/" + name, std::ios::binary);
  REQUIRE(f);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline Shape shape(std::uint64_t b, std::uint64_t h, std::uint64_t hkv, std::uint64_t nq, std::uint64_t nkv,
                   std::uint64_t d, Dtype t = Dtype::bf16) {
  Shape s;
  s.batch = b, s.heads = h, s.kv_heads = hkv, s.seq_q = nq, s.seq_kv = nkv, s.head_dim = d, s.dtype = t;
  return s;
}

}  // namespace hbmscope::testing
