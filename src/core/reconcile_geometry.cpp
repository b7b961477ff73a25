// Launch geometry (docs/reconcile.md, "Launch geometry"): what the grid of a
// kernel whose launch code is public says about the shape and the split
// count. flash-attn 2 (csrc/flash_attn/src/flash_fwd_launch_template.h):
// forward grid (row blocks, batch, heads); split-KV grid (row blocks, splits,
// batch x heads) when it splits, the forward's otherwise; for decode with GQA
// it swaps the query heads of a kv head into the rows, so "heads" is the kv
// heads there. flash-attn 1 (fmha_fwd_launch_template.h): (batch, heads,
// query splits). vLLM (csrc/attention/paged_attention_v1.cu, _v2.cu): (heads,
// sequences, partitions of 512 tokens), v1 with one partition.
#include <string>

#include "hbmscope/reconcile.hpp"

namespace hbmscope {

namespace {

// Appended piece by piece: GCC 12 warns (-Wrestrict) on long chains of
// std::string temporaries here.
std::string grid_text(const MeasuredLaunch& l) {
  std::string t;
  if (!l.grid[0]) {
    t.append("of ").append(std::to_string(l.grid_size)).append(" CTAs");
    return t;
  }
  t.append("(").append(std::to_string(l.grid[0])).append(", ").append(std::to_string(l.grid[1]));
  t.append(", ").append(std::to_string(l.grid[2])).append(")");
  return t;
}

std::string shape_text(const Shape& s) {
  std::string t;
  t.append("batch ").append(std::to_string(s.batch)).append(", ").append(std::to_string(s.heads));
  t.append(s.heads == 1 ? " head" : " heads");
  if (s.kv_heads != s.heads)
    t.append(", ").append(std::to_string(s.kv_heads)).append(s.kv_heads == 1 ? " kv head" : " kv heads");
  return t;
}

}  // namespace

std::string_view grid_layout_name(GridLayout g) {
  switch (g) {
    case GridLayout::unknown: return "unknown";
    case GridLayout::fa2: return "fa2";
    case GridLayout::fa2_splitkv: return "fa2_splitkv";
    case GridLayout::fa1: return "fa1";
    case GridLayout::vllm: return "vllm";
  }
  return "unknown";
}

std::optional<GridLayout> parse_grid_layout(std::string_view s) {
  for (GridLayout g : {GridLayout::fa2, GridLayout::fa2_splitkv, GridLayout::fa1, GridLayout::vllm})
    if (s == grid_layout_name(g)) return g;
  return std::nullopt;
}

GridCheck check_grid(GridLayout layout, const MeasuredLaunch& l, const Shape& s) {
  GridCheck r;
  const bool dims = l.grid[0] && l.grid[1] && l.grid[2];
  if (layout == GridLayout::unknown || (!dims && l.grid_size == 0)) return r;
  const std::uint64_t b = s.batch, h = s.heads, hkv = s.kv_heads;
  const std::uint64_t gx = l.grid[0], gy = l.grid[1], gz = l.grid[2], total = l.grid_size;
  auto heads = [&](std::uint64_t n) { return n == h || n == hkv; };
  auto divides = [&](std::uint64_t n) { return n != 0 && total % n == 0; };
  bool fits = true;
  const char* layout_text = "";
  switch (layout) {
    case GridLayout::fa2:
      layout_text = "flash-attn 2 launches (row blocks, batch, heads)";
      fits = dims ? gy == b && heads(gz) : divides(b * h) || divides(b * hkv);
      break;
    case GridLayout::fa2_splitkv:
      layout_text = "flash-attn 2's split-KV kernel launches (row blocks, splits, batch x heads), unsplit (row blocks, "
                    "batch, heads)";
      if (!dims) {
        fits = divides(b * h) || divides(b * hkv);
      } else if (gz == b * h || gz == b * hkv) {
        r.splits = gy;
      } else if (gy == b && heads(gz)) {
        r.splits = 1;
      } else {
        fits = false;
      }
      break;
    case GridLayout::fa1:
      layout_text = "flash-attn 1 launches (batch, heads, query splits)";
      fits = dims ? gx == b && gy == h : divides(b * h);
      break;
    case GridLayout::vllm:
      layout_text = "vLLM's paged attention launches (heads, sequences, partitions)";
      if (dims) {
        fits = gx == h && gy == b;
        if (fits) r.splits = gz;
      } else {
        fits = divides(b * h);
        if (fits) r.splits = total / (b * h);
      }
      break;
    case GridLayout::unknown: break;
  }
  if (!fits) {
    std::string t = "the launch grid ";
    t.append(grid_text(l)).append(" contradicts the shape (").append(shape_text(s)).append("): ").append(layout_text);
    r.contradiction = std::move(t);
  }
  return r;
}

}  // namespace hbmscope
