#pragma once
// Decode attention through the simulated L2 (l2_decode.cpp, l2_decode_runs.cpp). Internal.
#include <cstdint>
#include <functional>

#include "hbmscope/decode.hpp"
#include "hbmscope/l2_sim.hpp"
#include "l2_tally.hpp"

namespace hbmscope::l2 {

void enumerate_decode(const Shape& s, DecodeVariant v, std::uint64_t splits, const L2SimConfig& c, Tally& t,
                      std::uint64_t& waves, std::uint64_t& steps);
void trace_decode(const Shape& s, DecodeVariant v, std::uint64_t splits, const L2SimConfig& c,
                  const std::function<void(const L2Access&)>& f);
std::uint64_t decode_enum_accesses(const Shape& s, DecodeVariant v, std::uint64_t splits);
void runs_decode(const Shape& s, DecodeVariant v, std::uint64_t splits, const L2SimConfig& c, Tally& t,
                 std::uint64_t& waves, std::uint64_t& steps);
std::uint64_t decode_runs_work(const Shape& s, DecodeVariant v, std::uint64_t splits, const L2SimConfig& c);

}  // namespace hbmscope::l2
