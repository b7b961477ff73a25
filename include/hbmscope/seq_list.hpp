#pragma once
// The sequences of a ragged batch, as one immutable list shared by every shape
// that uses it (a sweep's option product copies a pointer, never the list),
// with its sums and extremes computed once when it is made. Decode's context
// lengths (Shape::context_lengths) and ragged prefill (Shape::seq_lens) are
// both SeqLists (docs/model.md, "Ragged prefill").
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace hbmscope {

// One sequence: q query tokens against kv keys, bottom-right aligned (the
// queries are the last q of the kv positions). A prefill item "L" is {L, L};
// "Q:KV" (chunked prefill) is Q new tokens against a cached prefix of KV - Q
// plus themselves. Decode's context lengths set kv only (q = 0: the shape's
// seq_q new tokens).
struct SeqLen {
  std::uint64_t q = 0, kv = 0;
  friend auto operator<=>(const SeqLen&, const SeqLen&) = default;
};

// Distinct items, ascending, with how many sequences each stands for.
struct SeqGroup {
  SeqLen item;
  std::uint64_t count = 0;
};

class SeqList {
 public:
  SeqList() = default;
  explicit SeqList(std::vector<SeqLen> items);
  // Decode's context lengths: kv only.
  SeqList(const std::vector<std::uint64_t>& lengths);  // NOLINT: a list of lengths is a SeqList
  SeqList(std::initializer_list<std::uint64_t> lengths);

  // Drops this reference (the list itself never changes).
  void clear() { d_.reset(); }
  bool empty() const { return !d_; }
  std::size_t size() const { return d_ ? d_->items.size() : 0; }
  const SeqLen& operator[](std::size_t i) const { return d_->items[i]; }
  const SeqLen& at(std::size_t i) const;
  std::span<const SeqLen> items() const;
  const SeqLen* begin() const { return items().data(); }
  const SeqLen* end() const { return items().data() + size(); }
  std::span<const SeqGroup> groups() const;

  // Computed once (0 for an empty list).
  std::uint64_t max_q() const { return d_ ? d_->max_q : 0; }
  std::uint64_t max_kv() const { return d_ ? d_->max_kv : 0; }
  std::uint64_t min_q() const { return d_ ? d_->min_q : 0; }
  std::uint64_t min_kv() const { return d_ ? d_->min_kv : 0; }
  // Sums over the sequences; nullopt when one passes 2^64 (callers refuse it).
  std::optional<std::uint64_t> total_q() const;
  std::optional<std::uint64_t> total_kv() const;
  // Every item the same (a dense batch in disguise).
  bool uniform() const { return d_ && d_->groups.size() == 1; }
  // The kv lengths, in order (a copy).
  std::vector<std::uint64_t> kv_lengths() const;
  // "512;4096;128:4096": items in order, q:kv where q differs from kv and is set.
  std::string text(char separator = ';') const;

  // The same items in the same order (the same list compares without a pass).
  friend bool operator==(const SeqList& a, const SeqList& b);
  // Context lengths against a plain list of lengths (kv only, q unset).
  friend bool operator==(const SeqList& a, const std::vector<std::uint64_t>& b);

 private:
  struct Data {
    std::vector<SeqLen> items;
    std::vector<SeqGroup> groups;
    std::uint64_t max_q = 0, max_kv = 0, min_q = 0, min_kv = 0;
    std::uint64_t sum_q = 0, sum_kv = 0;
    bool sum_q_wrapped = false, sum_kv_wrapped = false;
  };
  std::shared_ptr<const Data> d_;
};

}  // namespace hbmscope
