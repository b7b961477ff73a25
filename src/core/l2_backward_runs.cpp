#include "l2_backward.hpp"
namespace hbmscope::l2 {
FlashStats runs_backward(const Shape& s, const L2SimConfig& c, Tally& t) { return enumerate_backward(s, c, t); }
std::uint64_t backward_runs_work(const Shape& s, const L2SimConfig&) { return backward_enum_accesses(s) * 30; }
}
