#pragma once
// How import_measurements (ncu_import.cpp) tells the forms apart by their
// lines; each test lives with its reader. Not a public interface.
#include <string_view>

namespace hbmscope::importing {

// ncu_csv.cpp: "ID",... (a header of either page).
bool is_ncu_header_line(std::string_view line);
// ncu_console.cpp: "NAME (GX, GY, GZ)x(BX, BY, BZ), Context C, Stream S, Device D, CC X.Y".
bool is_ncu_kernel_line(std::string_view line);

// nsys_trace.cpp: which `nsys stats` CSV a header line starts.
enum class NsysReport { none, gpu_trace, nvtx_projected, nvtx_pushpop, summary };
NsysReport nsys_header_kind(std::string_view line);

}  // namespace hbmscope::importing
