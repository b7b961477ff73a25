#include "l2_decode.hpp"
namespace hbmscope::l2 {
void runs_decode(const Shape& s, DecodeVariant v, std::uint64_t splits, const L2SimConfig& c, Tally& t,
                      std::uint64_t& waves, std::uint64_t& steps) { enumerate_decode(s, v, splits, c, t, waves, steps); }
std::uint64_t decode_runs_work(const Shape& s, DecodeVariant v, std::uint64_t splits, const L2SimConfig&) { return decode_enum_accesses(s, v, splits) * 30; }
}
