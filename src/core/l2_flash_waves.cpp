#include "l2_flash.hpp"
namespace hbmscope::l2 {
bool flash_in_waves(const Shape&) { return false; }
FlashStats waves_flash(const Shape& s, const L2SimConfig& c, Tally& t) { return enumerate_flash(s, c, t); }
std::uint64_t waves_flash_work(const FlashGrid& g, std::uint64_t) { return g.ctas(); }
}
