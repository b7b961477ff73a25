#pragma once
// What a bench case returns and how the table names it (bench/main.cpp prints
// them; bench/l2_runs.cpp holds the L2 simulation's long-context cases).
#include <functional>
#include <string>
#include <vector>

namespace hbmscope_bench {

struct Result {
  std::string work;     // what one run did, e.g. "100000 shapes"
  double seconds = 0;   // wall time of one run
  double items = 0;     // items in one run, for the rate
  std::string unit;     // "shapes", "tiles", ...: rate is items/s
  std::string target;   // the goal, or empty
  bool met = true;
  std::string beside{};  // printed after the target: e.g. the enumeration's time on the same shape
};

struct Case {
  std::string name;
  std::function<Result()> run;
};

// "12.3 ms", "1.5 s": a time as the table prints it.
std::string secs(double s);

// Issue 20: the L2 simulation by runs on long contexts (bench/l2_runs.cpp).
std::vector<Case> l2_runs_cases();

}  // namespace hbmscope_bench
