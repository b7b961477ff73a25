#pragma once
// The shapes of a run (model, sweep, measure): made as they are visited,
// never held, with what the run's checks need to know of them.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hbmscope/shape.hpp"
#include "hbmscope/shard.hpp"
#include "hbmscope/sweep_config.hpp"

namespace hbmscope::cli {

// What the checks made before a run need to know of its shapes, from one pass.
struct ShapeFacts {
  std::uint64_t count = 0;  // points (a whole-model point makes several rows)
  std::uint64_t rows = 0;
  bool any_decode = false, all_decode = true;
  bool any_forward_prefill = false;  // a prefill shape of the forward pass (--fa1 has a column)
  std::optional<Shape> not_forward;  // a shape of another pass (measure refuses it)
  // One shape of each kind of row (pass, decode): their variants are those of every row of that kind.
  std::vector<Shape> kinds;
};

// The shapes of a run, made as they are visited (a sweep's or the shape
// options' axes), with their group labels; --shard's slice of them.
class RunShapes {
 public:
  explicit RunShapes(SweepConfig config);
  // Only slice s of the sweep (`--shard I/N`).
  void shard(Shard s);
  // `measure`: the flash kernels' instantiation for each shape's head dim.
  void flash_blocks(bool blocks_given);
  std::uint64_t total() const { return total_; }  // of the whole sweep
  std::uint64_t size() const { return end_ - begin_; }  // of this run
  // One pass over the shapes, made the first time they are asked for.
  const ShapeFacts& facts() const;
  // The rows of the whole sweep (a pass over its points when some has a model).
  std::uint64_t total_rows() const;
  void for_each(const ShapeVisit& visit) const;

 private:
  SweepConfig config_;
  std::uint64_t total_ = 0, begin_ = 0, end_ = 0;
  bool flash_blocks_ = false, blocks_given_ = false;
  mutable std::optional<ShapeFacts> facts_;
};

}  // namespace hbmscope::cli
