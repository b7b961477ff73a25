#include "hbmscope/measure.hpp"

#include <algorithm>

#include "hbmscope/checked.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/model.hpp"
#include "hbmscope/reference.hpp"
#include "hbmscope/sweep.hpp"

namespace hbmscope {

std::string_view kernel_name(KernelKind k) {
  switch (k) {
    case KernelKind::standard: return "standard";
    case KernelKind::flash: return "flash";
    case KernelKind::floor: return "floor";
    case KernelKind::copy: return "copy";
    case KernelKind::softmax: return "softmax";
    case KernelKind::flash_v1: return "flash_v1";
    case KernelKind::decode: return "decode";
    case KernelKind::decode_paged: return "decode_paged";
  }
  return "?";
}

std::uint64_t softmax_bytes(const Shape& s) {
  return checked_product("softmax bytes", 2, elem_bytes(s.dtype), s.batch, s.heads, s.seq_q, s.seq_kv);
}

std::uint64_t kernel_model_bytes(const Row& row, KernelKind k) {
  if (k == KernelKind::softmax) return softmax_bytes(row.shape);
  const VariantResult* v = row.variant(kernel_variant(k));
  return v ? v->bytes : 0;
}

std::string_view kernel_variant(KernelKind k) {
  switch (k) {
    case KernelKind::standard: return "standard";
    case KernelKind::flash:
    case KernelKind::flash_v1: return "flash_no_l2";
    case KernelKind::floor: return "floor";
    case KernelKind::copy: return "copy";
    case KernelKind::softmax: return "softmax";
    case KernelKind::decode: return "decode_split";
    case KernelKind::decode_paged: return "decode_paged";
  }
  return "?";
}

std::vector<KernelKind> parse_kernels(std::string_view text) {
  std::vector<KernelKind> kinds;
  if (text.empty()) throw UsageError("--kernels: '' is an empty list");
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view item = text.substr(pos, comma - pos);
    KernelKind k{};
    if (item == "standard") k = KernelKind::standard;
    else if (item == "flash") k = KernelKind::flash;
    else if (item == "floor") k = KernelKind::floor;
    else if (item == "softmax") k = KernelKind::softmax;
    else if (item == "flash_v1") k = KernelKind::flash_v1;
    else if (item == "decode") k = KernelKind::decode;
    else if (item == "decode_paged") k = KernelKind::decode_paged;
    else
      throw UsageError("--kernels: '" + std::string(item) +
                       "' is not one of standard, softmax, flash, flash_v1, floor, decode, decode_paged (the copy probe "
                       "always runs)");
    if (std::find(kinds.begin(), kinds.end(), k) != kinds.end())
      throw UsageError("--kernels: '" + std::string(item) + "' is listed twice");
    kinds.push_back(k);
    pos = comma + 1;
  }
  return kinds;
}

Shape with_flash_blocks(const Shape& s, bool blocks_given) {
  // A decode row's block_cols is the split kernel's key block (decode.hpp), not a flash instantiation.
  if (s.decode || !flash_supports(s.head_dim)) return s;
  Shape r = s;
  const FlashConfig c = blocks_given ? choose_flash_config(s.head_dim, s.block_rows, s.block_cols)
                                     : default_flash_config(s.head_dim);
  r.block_rows = static_cast<std::uint64_t>(c.block_rows);
  r.block_cols = static_cast<std::uint64_t>(c.block_cols);
  return r;
}

TimingStats summarize(std::vector<double> samples, double warm_median) {
  TimingStats t;
  t.warm_median = warm_median;
  t.samples = samples;
  if (samples.empty()) return t;
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  t.median = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  t.min = samples.front();
  t.max = samples.back();
  t.rel_spread = t.median > 0 ? (t.max - t.min) / t.median : 0.0;
  return t;
}

void complete_measurement(KernelMeasurement& m, std::uint64_t model_bytes, std::uint64_t flops,
                          double copy_bw, double peak_bw) {
  m.model_bytes = model_bytes;
  m.flops = flops;
  const double t = m.timing.median;
  const auto bytes = static_cast<double>(model_bytes);
  m.bandwidth = t > 0 ? bytes / t : 0.0;
  m.tflops = t > 0 ? static_cast<double>(flops) / t / 1e12 : 0.0;
  m.copy_fraction = copy_bw > 0 ? m.bandwidth / copy_bw : 0.0;
  m.predicted_copy = copy_bw > 0 ? bytes / copy_bw : 0.0;
  m.predicted_peak = peak_bw > 0 ? bytes / peak_bw : 0.0;
  m.measured_over_predicted = m.predicted_copy > 0 && t > 0 ? t / m.predicted_copy : 0.0;
}

std::vector<float> floor_reference(const Shape& s, const std::vector<float>& q, const std::vector<float>& k,
                                   const std::vector<float>& v) {
  std::vector<float> o(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) {
    o[i] = round_to_dtype(i < k.size() ? q[i] + k[i] + v[i] : q[i], s.dtype);
  }
  return o;
}

std::uint64_t kernel_output_bytes(const Shape& s, KernelKind k) {
  const std::uint64_t e = elem_bytes(s.dtype);
  switch (k) {
    case KernelKind::softmax:
      return checked_product("output bytes", s.batch, s.heads, s.seq_q, score_row_stride(s), e);
    case KernelKind::flash:
    case KernelKind::flash_v1:
      return checked_add(checked_product("output bytes", s.batch, s.heads, s.seq_q, s.head_dim, e),
                         checked_product("output bytes", s.batch, s.heads, s.seq_q, 4), "output bytes");
    case KernelKind::copy: return 0;
    default: return checked_product("output bytes", s.batch, s.heads, s.seq_q, s.head_dim, e);
  }
}

double copy_bandwidth(const KernelMeasurement& copy) {
  if (copy.status != MeasureStatus::ok || copy.timing.median <= 0) return 0.0;
  return static_cast<double>(copy.model_bytes) / copy.timing.median;
}

Row measure_row(Backend& backend, const Shape& shape, const std::vector<KernelKind>& kinds,
                const MeasureOptions& opt, double copy_bw) {
  check_measurable(shape, kinds);  // before anything touches a device
  if (!backend.available()) throw Error(backend.unavailable_reason());
  // Decode rows: the split heuristic with the device's own SM count, and each
  // decode kernel run with its model variant's split count, so that the bytes
  // it is held against are those of the splits it ran.
  ModelOptions model_options;
  if (backend.device().sm_count > 0) model_options.sm_count = static_cast<std::uint64_t>(backend.device().sm_count);
  Row row = model_row(shape, model_options);
  const double peak = backend.device().peak_bandwidth;
  for (const KernelKind k : kinds) {
    KernelMeasurement m;
    Shape run_shape = shape;
    if (const VariantResult* v = row.variant(kernel_variant(k));
        shape.decode && v && (k == KernelKind::decode || k == KernelKind::decode_paged))
      run_shape.splits = v->splits;
    try {
      m = backend.run(run_shape, k, opt);
    } catch (const Error& e) {
      m = {};
      m.kernel = std::string(kernel_name(k));
      m.variant = std::string(kernel_variant(k));
      m.status = MeasureStatus::failed;
      m.reason = e.what();
    }
    const std::uint64_t bytes = kernel_model_bytes(row, k);
    // FLOPs are attention's: the softmax alone and the floor kernel do none of
    // its matrix work, so they get no TFLOP/s.
    const bool attention = k == KernelKind::standard || k == KernelKind::flash || k == KernelKind::flash_v1 ||
                           k == KernelKind::decode || k == KernelKind::decode_paged;
    const std::uint64_t flops = attention ? row.flops : 0;
    const std::uint64_t l2 = backend.device().l2_bytes;
    m.output_fits_l2 = l2 > 0 && kernel_output_bytes(shape, k) <= l2;
    if (m.status == MeasureStatus::ok)
      complete_measurement(m, bytes, flops, copy_bw, peak);
    else
      m.model_bytes = bytes;
    row.measurements.push_back(std::move(m));
  }
  return row;
}

DeviceReport measure_device(Backend& backend, const MeasureOptions& opt) {
  if (!backend.available()) throw Error(backend.unavailable_reason());
  DeviceReport d;
  d.info = backend.device();
  d.copy = backend.copy_probe(opt);
  if (d.copy.status == MeasureStatus::ok)
    complete_measurement(d.copy, d.copy.model_bytes, 0, copy_bandwidth(d.copy), d.info.peak_bandwidth);
  return d;
}

}  // namespace hbmscope
