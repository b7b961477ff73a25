// DramCounter through CUPTI's Range Profiler and Profiler Host API (CUDA 13):
// user ranges with user replay, so that every pass of a range is preceded by
// the same L2 flush as the timed runs. The call sequence follows the CUPTI
// documentation (cupti_range_profiler.h, cupti_profiler_host.h).
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <string>
#include <vector>

#include "dram_counters.hpp"
#include "hbmscope/error.hpp"

namespace hbmscope::cuda {

namespace {

// A failed CUPTI call, with its code kept for the messages.
class CuptiError : public Error {
 public:
  CuptiError(CUptiResult code, const char* call)
      : Error(std::string(call) + ": " + text(code)), code_(code), call_(call) {}
  CUptiResult code() const { return code_; }
  const std::string& call() const { return call_; }
  static std::string text(CUptiResult r) {
    const char* s = nullptr;
    if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s) return "CUPTI error " + std::to_string(static_cast<int>(r));
    return s;
  }

 private:
  CUptiResult code_;
  std::string call_;
};

void cupti_check(CUptiResult r, const char* call) {
  if (r != CUPTI_SUCCESS) throw CuptiError(r, call);
}

#define HBMSCOPE_CUPTI(call) cupti_check((call), #call)

template <class P>
P params(std::size_t size) {
  P p{};
  p.structSize = size;
  return p;
}

class CuptiDramCounter final : public DramCounter {
 public:
  explicit CuptiDramCounter(int device) {
    try {
      set_up(device);
    } catch (...) {
      tear_down();  // the destructor does not run for a constructor that throws
      throw;
    }
  }

  CuptiDramCounter(const CuptiDramCounter&) = delete;
  CuptiDramCounter& operator=(const CuptiDramCounter&) = delete;
  ~CuptiDramCounter() override { tear_down(); }

 private:
  void set_up(int device) {
    // The driver's cuCtxGetCurrent through the runtime: linking libcuda
    // directly would stop the program from starting where no driver is
    // installed (the no-GPU backend must still say why).
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess || !fn)
      throw Error("cudaGetDriverEntryPointByVersion(cuCtxGetCurrent) failed");
    using CtxGetCurrent = CUresult (*)(CUcontext*);
    if (reinterpret_cast<CtxGetCurrent>(fn)(&ctx_) != CUDA_SUCCESS || !ctx_)
      throw Error("cuCtxGetCurrent: no current CUDA context");
    auto init = params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
    HBMSCOPE_CUPTI(cuptiProfilerInitialize(&init));
    initialized_ = true;

    auto chip = params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
    chip.deviceIndex = static_cast<std::size_t>(device);
    HBMSCOPE_CUPTI(cuptiDeviceGetChipName(&chip));
    chip_ = chip.pChipName;

    auto avail = params<CUpti_Profiler_GetCounterAvailability_Params>(
        CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE);
    avail.ctx = ctx_;
    HBMSCOPE_CUPTI(cuptiProfilerGetCounterAvailability(&avail));  // the size first
    availability_.resize(avail.counterAvailabilityImageSize);
    avail.pCounterAvailabilityImage = availability_.data();
    HBMSCOPE_CUPTI(cuptiProfilerGetCounterAvailability(&avail));

    auto host = params<CUpti_Profiler_Host_Initialize_Params>(CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
    host.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    host.pChipName = chip_.c_str();
    host.pCounterAvailabilityImage = availability_.data();
    HBMSCOPE_CUPTI(cuptiProfilerHostInitialize(&host));
    host_ = host.pHostObject;

    auto add = params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(
        CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
    add.pHostObject = host_;
    add.ppMetricNames = metric_names();
    add.numMetrics = std::size(dram_metrics);
    HBMSCOPE_CUPTI(cuptiProfilerHostConfigAddMetrics(&add));

    auto size = params<CUpti_Profiler_Host_GetConfigImageSize_Params>(
        CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
    size.pHostObject = host_;
    HBMSCOPE_CUPTI(cuptiProfilerHostGetConfigImageSize(&size));
    config_.resize(size.configImageSize);
    auto image = params<CUpti_Profiler_Host_GetConfigImage_Params>(CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
    image.pHostObject = host_;
    image.configImageSize = config_.size();
    image.pConfigImage = config_.data();
    HBMSCOPE_CUPTI(cuptiProfilerHostGetConfigImage(&image));

    auto passes = params<CUpti_Profiler_Host_GetNumOfPasses_Params>(CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
    passes.configImageSize = config_.size();
    passes.pConfigImage = config_.data();
    HBMSCOPE_CUPTI(cuptiProfilerHostGetNumOfPasses(&passes));
    passes_ = passes.numOfPasses;

    auto enable = params<CUpti_RangeProfiler_Enable_Params>(CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE);
    enable.ctx = ctx_;
    HBMSCOPE_CUPTI(cuptiRangeProfilerEnable(&enable));
    profiler_ = enable.pRangeProfilerObject;

    auto data = params<CUpti_RangeProfiler_GetCounterDataSize_Params>(
        CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE);
    data.pRangeProfilerObject = profiler_;
    data.pMetricNames = metric_names();
    data.numMetrics = std::size(dram_metrics);
    data.maxNumOfRanges = 1;
    data.maxNumRangeTreeNodes = 1;
    HBMSCOPE_CUPTI(cuptiRangeProfilerGetCounterDataSize(&data));
    counter_data_.resize(data.counterDataSize);
  }

  // Teardown errors have nowhere useful to go.
  void tear_down() {
    if (profiler_) {
      auto d = params<CUpti_RangeProfiler_Disable_Params>(CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
      d.pRangeProfilerObject = profiler_;
      cuptiRangeProfilerDisable(&d);
    }
    if (host_) {
      auto d = params<CUpti_Profiler_Host_Deinitialize_Params>(CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
      d.pHostObject = host_;
      cuptiProfilerHostDeinitialize(&d);
    }
    if (initialized_) {
      auto d = params<CUpti_Profiler_DeInitialize_Params>(CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE);
      cuptiProfilerDeInitialize(&d);
    }
    profiler_ = nullptr;
    host_ = nullptr;
    initialized_ = false;
  }

 public:
  DramCounts count(const std::function<void()>& before, const std::function<void()>& launch,
                   const std::function<void()>& sync) override {
    // A fresh counter data image per range: it holds exactly one.
    auto init = params<CUpti_RangeProfiler_CounterDataImage_Initialize_Params>(
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE);
    init.pRangeProfilerObject = profiler_;
    init.counterDataSize = counter_data_.size();
    init.pCounterData = counter_data_.data();
    HBMSCOPE_CUPTI(cuptiRangeProfilerCounterDataImageInitialize(&init));

    auto cfg = params<CUpti_RangeProfiler_SetConfig_Params>(CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE);
    cfg.pRangeProfilerObject = profiler_;
    cfg.configSize = config_.size();
    cfg.pConfig = config_.data();
    cfg.counterDataImageSize = counter_data_.size();
    cfg.pCounterDataImage = counter_data_.data();
    cfg.range = CUPTI_UserRange;
    cfg.replayMode = CUPTI_UserReplay;
    cfg.maxRangesPerPass = 1;
    cfg.numNestingLevels = 1;
    cfg.minNestingLevel = 1;
    cfg.passIndex = 0;
    cfg.targetNestingLevel = 1;
    HBMSCOPE_CUPTI(cuptiRangeProfilerSetConfig(&cfg));

    // One pass per replay until CUPTI has every metric; bounded, so that a
    // CUPTI that never says "done" cannot hang the run.
    bool done = false;
    for (std::size_t pass = 0; !done && pass < passes_ + 8; ++pass) {
      before();
      auto start = params<CUpti_RangeProfiler_Start_Params>(CUpti_RangeProfiler_Start_Params_STRUCT_SIZE);
      start.pRangeProfilerObject = profiler_;
      HBMSCOPE_CUPTI(cuptiRangeProfilerStart(&start));
      auto push = params<CUpti_RangeProfiler_PushRange_Params>(CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE);
      push.pRangeProfilerObject = profiler_;
      push.pRangeName = "hbmscope";
      HBMSCOPE_CUPTI(cuptiRangeProfilerPushRange(&push));
      launch();
      auto pop = params<CUpti_RangeProfiler_PopRange_Params>(CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE);
      pop.pRangeProfilerObject = profiler_;
      HBMSCOPE_CUPTI(cuptiRangeProfilerPopRange(&pop));
      auto stop = params<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
      stop.pRangeProfilerObject = profiler_;
      HBMSCOPE_CUPTI(cuptiRangeProfilerStop(&stop));
      sync();
      done = stop.isAllPassSubmitted != 0;
    }
    if (!done) throw Error("DRAM counters: CUPTI wanted more than " + std::to_string(passes_ + 8) + " passes");

    auto decode = params<CUpti_RangeProfiler_DecodeData_Params>(CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE);
    decode.pRangeProfilerObject = profiler_;
    HBMSCOPE_CUPTI(cuptiRangeProfilerDecodeData(&decode));
    if (decode.numOfRangeDropped != 0) throw Error("DRAM counters: CUPTI dropped the range");

    auto info = params<CUpti_RangeProfiler_GetCounterDataInfo_Params>(
        CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE);
    info.pCounterDataImage = counter_data_.data();
    info.counterDataImageSize = counter_data_.size();
    HBMSCOPE_CUPTI(cuptiRangeProfilerGetCounterDataInfo(&info));
    if (info.numTotalRanges < 1) throw Error("DRAM counters: no range in the counter data");

    double values[std::size(dram_metrics)] = {};
    auto eval = params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(
        CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
    eval.pHostObject = host_;
    eval.pCounterDataImage = counter_data_.data();
    eval.counterDataImageSize = counter_data_.size();
    eval.rangeIndex = 0;
    eval.ppMetricNames = metric_names();
    eval.numMetrics = std::size(dram_metrics);
    eval.pMetricValues = values;
    HBMSCOPE_CUPTI(cuptiProfilerHostEvaluateToGpuValues(&eval));
    return {counter_bytes(values[0], dram_metrics[0]), counter_bytes(values[1], dram_metrics[1])};
  }

 private:
  static const char** metric_names() {
    static const char* names[] = {dram_metrics[0], dram_metrics[1]};
    return names;
  }

  CUcontext ctx_ = nullptr;
  bool initialized_ = false;
  std::string chip_;
  std::vector<std::uint8_t> availability_, config_, counter_data_;
  CUpti_Profiler_Host_Object* host_ = nullptr;
  CUpti_RangeProfiler_Object* profiler_ = nullptr;
  std::size_t passes_ = 1;
};

}  // namespace

std::unique_ptr<DramCounter> make_dram_counter(int device, std::string& why) {
  try {
    return std::make_unique<CuptiDramCounter>(device);
  } catch (const CuptiError& e) {
    why = counters_unavailable(static_cast<int>(e.code()), CuptiError::text(e.code()), e.call());
  } catch (const Error& e) {
    why = std::string("DRAM counters unavailable (") + e.what() + "); timings only";
  }
  return nullptr;
}

}  // namespace hbmscope::cuda
