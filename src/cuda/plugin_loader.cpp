// make_backend for a build with the CUDA backend: the backend is a plugin
// (libhbmscope_cuda.so, src/cuda/plugin.hpp) opened on the first call, so that
// only `measure` pays for loading the CUDA runtime and cuBLAS.
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "../report/json_check.hpp"
#include "hbmscope/backend.hpp"
#include "hbmscope/error.hpp"
#include "plugin.hpp"

#ifndef HBMSCOPE_PLUGIN_RELDIR
#define HBMSCOPE_PLUGIN_RELDIR "../lib/hbmscope"
#endif

namespace hbmscope {

namespace {

namespace fs = std::filesystem;

std::string shown(const fs::path& p) {
  std::string s = "'";  // appended, not "'" + ...: GCC 12 warns wrongly on that (-Wrestrict)
  s += json_check::printable(p.string());
  s += '\'';
  return s;
}

// Where to look, in order: $HBMSCOPE_CUDA_PLUGIN alone when set; else next to
// the executable (the build tree), then the installed layout (bin/ and
// lib/hbmscope/).
std::vector<fs::path> candidates() {
  if (const char* env = std::getenv(plugin::path_variable); env != nullptr && *env != '\0') return {fs::path(env)};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {fs::path(plugin::file_name)};  // the loader's own search (LD_LIBRARY_PATH)
  const fs::path dir = exe.parent_path();
  return {dir / plugin::file_name, (dir / HBMSCOPE_PLUGIN_RELDIR / plugin::file_name).lexically_normal()};
}

struct Loaded {
  plugin::Factory factory = nullptr;
  fs::path path;
};

// Opens the plugin (never closed: backends made by it may live until exit; a
// second dlopen of the same file is cheap). Returns the reason in `why` when
// it cannot.
Loaded load(std::string& why) {
  const std::vector<fs::path> places = candidates();
  std::string looked;
  for (const fs::path& p : places) {
    std::error_code ec;
    if (places.size() > 1 && !fs::exists(p, ec)) {
      looked += (looked.empty() ? "" : ", ") + shown(p);
      continue;
    }
    dlerror();
    void* handle = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* e = dlerror();
      why = "cannot load the CUDA backend " + shown(p) + ": " + json_check::printable(e ? e : "dlopen failed");
      return {};
    }
    void* symbol = dlsym(handle, plugin::factory_symbol);
    if (symbol == nullptr) {
      why = "cannot load the CUDA backend " + shown(p) + ": it has no " + plugin::factory_symbol;
      return {};
    }
    return {reinterpret_cast<plugin::Factory>(symbol), p};
  }
  why = std::string("the CUDA backend ") + plugin::file_name + " is not installed (looked for " + looked +
        "; set " + plugin::path_variable + " to its path)";
  return {};
}

}  // namespace

std::unique_ptr<Backend> make_backend(int device_index) {
  std::string why;
  const Loaded p = load(why);
  if (!p.factory) return make_no_gpu_backend("no CUDA device: " + why);
  char error[1024] = {};
  Backend* b = p.factory(plugin::abi_tag().c_str(), device_index, error, sizeof error);
  if (b == nullptr) throw Error("the CUDA backend " + shown(p.path) + ": " + json_check::printable(error));
  return std::unique_ptr<Backend>(b);
}

}  // namespace hbmscope
