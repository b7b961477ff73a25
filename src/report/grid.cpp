// Grids of text cells, for every table printer: display widths, padding,
// and render_grid (terminal table or Markdown).
#include <algorithm>
#include <string>
#include <vector>

#include "printers_internal.hpp"

namespace hbmscope {

namespace printing {

// Display width of UTF-8 text: one column per code point ("×" is one).
std::size_t width(std::string_view s) {
  std::size_t w = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++w;
  return w;
}

std::string pad(const std::string& s, std::size_t w, bool right) {
  const std::size_t n = width(s);
  const std::string fill(w > n ? w - n : 0, ' ');
  return right ? fill + s : s + fill;
}

std::size_t grid_width(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows) {
  std::size_t total = 0;
  for (std::size_t c = 0; c < head.size(); ++c) {
    std::size_t w = width(head[c]);
    for (const auto& r : rows) w = std::max(w, width(r[c]));
    total += w + (c ? 3 : 0);
  }
  return total;
}

namespace {

// A '|' inside a Markdown cell would end it.
std::string md_cell(const std::string& x) {
  std::string r;
  for (char ch : x) {
    if (ch == '|') r += '\\';
    r += ch;
  }
  return r;
}

}  // namespace

std::string md_head(const std::vector<std::string>& head, const std::vector<bool>& right) {
  std::string out = "|";
  for (const auto& h : head) out.append(" ").append(md_cell(h)).append(" |");
  out += "\n|";
  for (std::size_t c = 0; c < head.size(); ++c) out += c < right.size() && right[c] ? " ---: |" : " :--- |";
  return out + "\n";
}

std::string md_line(const std::vector<std::string>& cells) {
  std::string out = "|";
  for (const auto& x : cells) out.append(" ").append(md_cell(x)).append(" |");
  return out + "\n";
}

std::string render_grid_parts(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows,
                              const std::vector<bool>& right, Format format, std::size_t max_width,
                              const std::vector<std::vector<std::size_t>>& parts) {
  if (format == Format::md || grid_width(head, rows) <= max_width) return render_grid(head, rows, right, format);
  std::string out;
  for (const auto& cols : parts) {
    std::vector<std::string> h;
    std::vector<bool> rt;
    std::vector<std::vector<std::string>> rs(rows.size());
    for (std::size_t c : cols) {
      h.push_back(head[c]);
      rt.push_back(right[c]);
      for (std::size_t r = 0; r < rows.size(); ++r) rs[r].push_back(rows[r][c]);
    }
    if (!out.empty()) out += "\n";
    out += render_grid(h, rs, rt, format);
  }
  return out;
}

}  // namespace printing

using printing::pad;
using printing::width;

std::string render_grid(const std::vector<std::string>& head,
                        const std::vector<std::vector<std::string>>& rows,
                        const std::vector<bool>& right, Format format) {
  auto is_right = [&](std::size_t c) { return c < right.size() && right[c]; };
  std::string out;
  if (format == Format::md) {
    out = printing::md_head(head, right);
    for (const auto& r : rows) out += printing::md_line(r);
    return out;
  }
  std::vector<std::size_t> w(head.size());
  for (std::size_t c = 0; c < head.size(); ++c) w[c] = width(head[c]);
  for (const auto& r : rows)
    for (std::size_t c = 0; c < r.size() && c < w.size(); ++c) w[c] = std::max(w[c], width(r[c]));
  auto line = [&](const std::vector<std::string>& r) {
    std::string l;
    for (std::size_t c = 0; c < r.size() && c < w.size(); ++c) {
      if (c) l += "   ";
      l += pad(r[c], w[c], is_right(c));
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  };
  line(head);
  for (const auto& r : rows) line(r);
  return out;
}

}  // namespace hbmscope
