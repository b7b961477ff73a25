#pragma once
// The one CSV writer of every command (RFC 4180): text fields quoted when they
// hold a comma, quote or line break, quotes doubled; numbers as JSON prints
// them, the shortest text that reads back as the same double (819.2, not
// 819.20000000000005).
#include <string>
#include <string_view>
#include <vector>

namespace hbmscope {

std::string csv_field(std::string_view text);
// Shortest round-trip form; empty for NaN (a missing value), "inf"/"-inf".
std::string csv_number(double v);
// The fields, each through csv_field, joined by commas, ending in "\n".
std::string csv_line(const std::vector<std::string>& fields);

}  // namespace hbmscope
