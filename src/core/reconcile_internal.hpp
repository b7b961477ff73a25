#pragma once
// What reconcile.cpp and reconcile_model.cpp share; not a public interface.
#include <string>

#include "hbmscope/reconcile.hpp"

namespace hbmscope::reconciling {

std::string fmt_ratio(double v);  // 3 significant figures
std::string fmt_pct(double v);    // a fraction as "37 %"

const ModelBytesRW* find_variant(const std::vector<ModelBytesRW>& m, std::string_view id);

// Every variant's counted / model ratios, the bandwidths, the roofline and
// the verdict of a call whose counts, time and model are in.
void judge(ReconciledCall& c, const ReconcileOptions& opt);

}  // namespace hbmscope::reconciling
