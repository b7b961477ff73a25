// The one launch stream and the dispatch of an input to its reader by its
// content (docs/reconcile.md "Inputs"); the readers are ncu_details.cpp,
// ncu_raw.cpp, ncu_console.cpp, nsys_trace.cpp and timings_import.cpp.
#include "hbmscope/ncu_import.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "hbmscope/error.hpp"
#include "../report/json_check.hpp"
#include "csv_stream.hpp"
#include "import_sniff.hpp"

namespace hbmscope {

namespace {

std::size_t heap_bytes(const std::string& s) { return s.capacity() > 15 ? s.capacity() + 1 : 0; }

std::size_t launch_bytes(const MeasuredLaunch& l) {
  return sizeof(MeasuredLaunch) + heap_bytes(l.origin) + heap_bytes(l.id) + heap_bytes(l.kernel) +
         heap_bytes(l.nvtx) + heap_bytes(l.stream);
}

[[noreturn]] void too_many(const std::string& where, std::size_t count, std::size_t max_bytes) {
  throw Error(where + ": more than " + std::to_string(max_bytes >> 20) + " MiB of launches (" + std::to_string(count) +
              " read so far): reconcile the capture in parts (ncu --launch-skip/--launch-count, "
              "nsys stats --filter-time or --filter-nvtx)");
}

}  // namespace

void LaunchStream::add(MeasuredLaunch l) {
  const std::size_t b = launch_bytes(l);
  if (bytes + b > max_bytes) too_many(l.origin, launches.size(), max_bytes);
  bytes += b;
  launches.push_back(std::move(l));
}

void LaunchStream::add(NvtxRange r) {
  const std::size_t b = sizeof(NvtxRange) + heap_bytes(r.name) + heap_bytes(r.origin);
  if (bytes + b > max_bytes) too_many(r.origin, launches.size() + ranges.size(), max_bytes);
  bytes += b;
  ranges.push_back(std::move(r));
}

namespace {

enum class Form { ncu_csv, ncu_console, nsys, timings_csv, timings_json };

// The form of an input from its first chunk: '{' first is timings JSON; then
// the first line that names a form (an ncu header, an nsys header, an ncu
// kernel line; a first data line with time_s is a timings CSV). Anything else
// goes to the ncu CSV reader, which says what it lacks.
Form sniff(std::string_view head) {
  if (head.substr(0, 3) == "\xEF\xBB\xBF") head.remove_prefix(3);
  const std::size_t first = head.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && head[first] == '{') return Form::timings_json;
  bool first_data_line = true;
  for (std::size_t at = 0; at < head.size();) {
    const std::size_t nl = std::min(head.find('\n', at), head.size());
    const std::string_view l = importing::trim(head.substr(at, nl - at));
    at = nl + 1;
    if (l.empty()) continue;
    if (importing::is_ncu_header_line(l)) return Form::ncu_csv;
    if (importing::nsys_header_kind(l) != importing::NsysReport::none) return Form::nsys;
    if (importing::is_ncu_kernel_line(l)) return Form::ncu_console;
    if (l[0] == '#' || importing::starts_with(l, "==")) continue;
    if (first_data_line && l.find("time_s") != std::string_view::npos) return Form::timings_csv;
    first_data_line = false;
  }
  return Form::ncu_csv;
}

}  // namespace

void import_measurements(const std::string& path, const KernelTable& table, LaunchStream& into) {
  const bool is_stdin = path == "-";
  const std::string origin = is_stdin ? std::string("(stdin)") : json_check::printable(path);
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> owned(nullptr, &std::fclose);
  std::FILE* fp = stdin;
  if (!is_stdin) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw Error(origin + ": cannot read: " + std::strerror(errno));
    if (S_ISDIR(st.st_mode)) throw Error(origin + ": is a directory, not a CSV or JSON file");
    owned.reset(std::fopen(path.c_str(), "rb"));
    if (!owned) throw Error(origin + ": cannot read: " + std::strerror(errno));
    fp = owned.get();
  }
  // A first chunk decides the form; it is then replayed before the rest.
  std::string head(std::size_t{1} << 20, '\0');
  std::size_t head_len = std::fread(head.data(), 1, head.size(), fp);
  if (std::ferror(fp)) throw Error(origin + ": cannot read: " + std::strerror(errno));
  head.resize(head_len);
  std::size_t replay = 0;
  ByteSource src = [&](char* b, std::size_t n) -> std::size_t {
    if (replay < head.size()) {
      const std::size_t k = std::min(n, head.size() - replay);
      std::memcpy(b, head.data() + replay, k);
      replay += k;
      return k;
    }
    const std::size_t k = std::fread(b, 1, n, fp);
    if (k == 0 && std::ferror(fp)) throw Error(origin + ": read error: " + std::strerror(errno));
    return k;
  };
  switch (sniff(head)) {
    case Form::timings_json: {
      std::string text = head;
      char buf[1 << 16];
      for (std::size_t k; (k = std::fread(buf, 1, sizeof buf, fp)) > 0;) {
        if (text.size() + k > json_check::max_input_bytes) throw Error(origin + ": larger than 4 GiB");
        text.append(buf, k);
      }
      if (text.substr(0, 3) == "\xEF\xBB\xBF") text.erase(0, 3);
      return read_timings_json(text, origin, into);
    }
    case Form::timings_csv: return read_timings_csv(src, origin, table, into);
    case Form::ncu_console: return read_ncu_console(src, origin, into);
    case Form::nsys: return read_nsys_csv(src, origin, into);
    case Form::ncu_csv: return read_ncu_csv(src, origin, into);
  }
}

}  // namespace hbmscope
