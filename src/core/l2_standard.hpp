#pragma once
// Standard attention through the simulated L2 (l2_standard.cpp). Internal.
#include <cstdint>
#include <functional>

#include "hbmscope/l2_sim.hpp"
#include "l2_tally.hpp"

namespace hbmscope::l2 {

void enumerate_standard(const Shape& s, const L2SimConfig& c, Tally& t);
void trace_standard(const Shape& s, const L2SimConfig& c, const std::function<void(const L2Access&)>& f);
void runs_standard(const Shape& s, const L2SimConfig& c, Tally& t);
std::uint64_t standard_enum_accesses(const Shape& s);
std::uint64_t standard_runs_work(const Shape& s);

}  // namespace hbmscope::l2
