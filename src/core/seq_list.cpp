#include "hbmscope/seq_list.hpp"

#include <algorithm>
#include <numeric>

#include "hbmscope/error.hpp"

namespace hbmscope {

SeqList::SeqList(std::vector<SeqLen> items) {
  if (items.empty()) return;
  auto d = std::make_shared<Data>();
  d->min_q = d->min_kv = ~std::uint64_t{0};
  for (const SeqLen& it : items) {
    d->max_q = std::max(d->max_q, it.q);
    d->max_kv = std::max(d->max_kv, it.kv);
    d->min_q = std::min(d->min_q, it.q);
    d->min_kv = std::min(d->min_kv, it.kv);
    d->sum_q_wrapped = d->sum_q_wrapped || __builtin_add_overflow(d->sum_q, it.q, &d->sum_q);
    d->sum_kv_wrapped = d->sum_kv_wrapped || __builtin_add_overflow(d->sum_kv, it.kv, &d->sum_kv);
  }
  // Distinct items with their counts: sums over the batch visit each once.
  std::vector<SeqLen> sorted = items;
  std::sort(sorted.begin(), sorted.end());
  for (const SeqLen& it : sorted) {
    if (d->groups.empty() || d->groups.back().item != it) d->groups.push_back({it, 0});
    ++d->groups.back().count;
  }
  d->groups.shrink_to_fit();
  d->items = std::move(items);
  d_ = std::move(d);
}

namespace {
std::vector<SeqLen> kv_items(const std::uint64_t* begin, const std::uint64_t* end) {
  std::vector<SeqLen> v;
  v.reserve(static_cast<std::size_t>(end - begin));
  for (const auto* p = begin; p != end; ++p) v.push_back({0, *p});
  return v;
}
}  // namespace

SeqList::SeqList(const std::vector<std::uint64_t>& lengths)
    : SeqList(kv_items(lengths.data(), lengths.data() + lengths.size())) {}

SeqList::SeqList(std::initializer_list<std::uint64_t> lengths)
    : SeqList(kv_items(lengths.begin(), lengths.end())) {}

const SeqLen& SeqList::at(std::size_t i) const {
  if (i >= size()) throw Error("sequence " + std::to_string(i) + " of a batch of " + std::to_string(size()));
  return d_->items[i];
}

std::span<const SeqLen> SeqList::items() const {
  if (!d_) return {};
  return {d_->items.data(), d_->items.size()};
}

std::span<const SeqGroup> SeqList::groups() const {
  if (!d_) return {};
  return {d_->groups.data(), d_->groups.size()};
}

std::optional<std::uint64_t> SeqList::total_q() const {
  if (d_ && d_->sum_q_wrapped) return std::nullopt;
  return d_ ? d_->sum_q : 0;
}

std::optional<std::uint64_t> SeqList::total_kv() const {
  if (d_ && d_->sum_kv_wrapped) return std::nullopt;
  return d_ ? d_->sum_kv : 0;
}

std::vector<std::uint64_t> SeqList::kv_lengths() const {
  std::vector<std::uint64_t> v;
  v.reserve(size());
  for (const SeqLen& it : items()) v.push_back(it.kv);
  return v;
}

std::string SeqList::text(char separator) const {
  std::string t;
  for (const SeqLen& it : items()) {
    if (!t.empty()) t += separator;
    if (it.q != 0 && it.q != it.kv) t.append(std::to_string(it.q)).append(":");
    t += std::to_string(it.kv);
  }
  return t;
}

bool operator==(const SeqList& a, const SeqList& b) {
  if (a.d_ == b.d_) return true;
  if (a.size() != b.size()) return false;
  if (a.d_->sum_kv != b.d_->sum_kv || a.d_->sum_q != b.d_->sum_q) return false;
  return std::equal(a.begin(), a.end(), b.begin());
}

bool operator==(const SeqList& a, const std::vector<std::uint64_t>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < b.size(); ++i)
    if (a[i].q != 0 || a[i].kv != b[i]) return false;
  return true;
}

}  // namespace hbmscope
