#include "l2_flash.hpp"
namespace hbmscope::l2 {
FlashStats runs_flash(const Shape& s, const L2SimConfig& c, Tally& t) { return enumerate_flash(s, c, t); }
std::uint64_t flash_runs_work(const Shape& s, const L2SimConfig&) { return flash_enum_accesses(s) * 30; }
}
