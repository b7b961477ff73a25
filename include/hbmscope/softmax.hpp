#pragma once
// Online softmax (Milakov and Gimelshein, 2018) and the two-pass safe softmax
// it must equal. Header-only so float and double share one definition.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>

namespace hbmscope {

template <class T>
struct OnlineSoftmaxState {
  T m = -std::numeric_limits<T>::infinity();  // running maximum
  T l = T(0);                                 // running sum of e^(x - m)
};

// What one block did to the running state (the `softmax` command shows it).
template <class T>
struct OnlineSoftmaxStep {
  T m_before, m_after;
  T l_before, l_after;
  T scale;  // e^(m_before - m_after): applied to every term already in l
};

// Largest element, ignoring NaN as the comparison does in both softmaxes.
template <class T>
T block_max(std::span<const T> x, T start) {
  T m = start;
  for (T v : x)
    if (v > m) m = v;
  return m;
}

template <class T>
OnlineSoftmaxStep<T> online_softmax_update(OnlineSoftmaxState<T>& st, std::span<const T> block) {
  OnlineSoftmaxStep<T> step{st.m, st.m, st.l, st.l, T(1)};
  const T m_new = block_max(block, st.m);
  // While every value so far is -inf there is nothing to rescale and no term to
  // add: e^(-inf - -inf) would be NaN where the true contribution is nothing.
  if (m_new == -std::numeric_limits<T>::infinity()) return step;
  const T scale = std::exp(st.m - m_new);
  T s = T(0);
  for (T v : block) s += std::exp(v - m_new);
  st.l = st.l * scale + s;
  st.m = m_new;
  step.m_after = st.m;
  step.l_after = st.l;
  step.scale = scale;
  return step;
}

// out[i] = e^(x[i] - m) / l after one pass over x in blocks of `block`.
template <class T>
void online_softmax(std::span<const T> x, std::span<T> out, std::size_t block) {
  if (block == 0) block = x.size() == 0 ? 1 : x.size();
  OnlineSoftmaxState<T> st;
  for (std::size_t i = 0; i < x.size(); i += block)
    online_softmax_update(st, x.subspan(i, std::min(block, x.size() - i)));
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = std::exp(x[i] - st.m) / st.l;
}

// Two-pass safe softmax: find the maximum, then sum and normalise.
template <class T>
void safe_softmax(std::span<const T> x, std::span<T> out) {
  const T m = block_max(x, -std::numeric_limits<T>::infinity());
  T l = T(0);
  for (T v : x) l += std::exp(v - m);
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = std::exp(x[i] - m) / l;
}

}  // namespace hbmscope
