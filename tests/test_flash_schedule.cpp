// The flash kernels' shared-memory schedule, checked on the CPU: cp.async
// groups, waits and barriers in the order each kernel issues them (written out
// here step for step from flash_attention.cuh and flash_attention_v2.cuh), for
// every number of key blocks. Every thread runs the same sequence, and any
// thread may lag another by up to one barrier, so:
//   - a read of a tile is good only if the tile's latest copy was of the block
//     the MMA expects, its group was completed by a wait, and a barrier came
//     after that wait and before the read (other threads' copies visible);
//   - a copy into a tile is good only if a barrier came after every earlier
//     read of that tile (no thread may still be reading the old block).
// compute-sanitizer's racecheck and synccheck check the same on a GPU.
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

namespace {

enum class Op { issue, commit, wait, barrier, read };
struct Step {
  Op op;
  std::string tile;  // issue, read
  int block = 0;     // issue: block copied; read: block expected; wait: groups left pending
};

struct Schedule {
  std::vector<Step> steps;
  void issue(const std::string& t, int b) { steps.push_back({Op::issue, t, b}); }
  void commit() { steps.push_back({Op::commit, "", 0}); }
  void wait(int pending) { steps.push_back({Op::wait, "", pending}); }
  void barrier() { steps.push_back({Op::barrier, "", 0}); }
  void read(const std::string& t, int b) { steps.push_back({Op::read, t, b}); }
};

// Q is block -1 (its own tile). K and V stages by parity: "K0", "K1", "V0", "V1".
std::string stage(const char* t, int j) { return std::string(t) + std::to_string(j & 1); }

// Key blocks first .. first + n - 1 (a sliding window's band starts past
// block 0; stages go by the block's parity, as in the kernels).
Schedule v1_schedule(int n, int first = 0) {
  Schedule s;
  s.issue("Q", -1);
  if (n > 0) {
    s.issue(stage("K", first), first);
    s.issue(stage("V", first), first);
  }
  s.commit();
  for (int j = first; j < first + n; ++j) {
    if (j + 1 < first + n) {
      s.issue(stage("K", j + 1), j + 1);
      s.issue(stage("V", j + 1), j + 1);
      s.commit();
      s.wait(1);
    } else {
      s.wait(0);
    }
    s.barrier();
    s.read("Q", -1);
    s.read(stage("K", j), j);
    s.read(stage("V", j), j);
    s.barrier();
  }
  if (n == 0) {
    s.wait(0);
    s.barrier();
  }
  return s;
}

Schedule v2_schedule(int n, int first = 0) {
  Schedule s;
  s.issue("Q", -1);
  if (n > 0) s.issue(stage("K", first), first);
  s.commit();
  for (int j = first; j < first + n; ++j) {
    s.issue(stage("V", j), j);
    s.commit();
    s.wait(1);
    s.barrier();
    s.read("Q", -1);
    s.read(stage("K", j), j);
    if (j + 1 < first + n) s.issue(stage("K", j + 1), j + 1);
    s.commit();  // empty on the last block
    s.wait(1);
    s.barrier();
    s.read(stage("V", j), j);
  }
  if (n == 0) {
    s.wait(0);
    s.barrier();
  }
  return s;
}

// Empty when the schedule is good, else what is wrong first.
std::string check(const Schedule& s) {
  struct Copy {
    int block = 0, group = 0;
    bool issued = false;
  };
  std::map<std::string, Copy> latest;
  std::map<std::string, int> last_read;  // step index
  std::vector<bool> group_done;          // by group index
  int open_group = 0;
  int last_barrier = -1;
  std::vector<int> completed_at;  // step at which group g was completed by a wait
  for (int i = 0; i < static_cast<int>(s.steps.size()); ++i) {
    const Step& st = s.steps[static_cast<std::size_t>(i)];
    switch (st.op) {
      case Op::issue: {
        auto it = last_read.find(st.tile);
        if (it != last_read.end() && !(last_barrier > it->second))
          return "step " + std::to_string(i) + ": copy into " + st.tile + " while a thread may still read it";
        latest[st.tile] = {st.block, open_group, true};
        break;
      }
      case Op::commit:
        ++open_group;
        completed_at.resize(static_cast<std::size_t>(open_group), -1);
        break;
      case Op::wait:
        for (int g = 0; g < open_group - st.block; ++g)
          if (completed_at[static_cast<std::size_t>(g)] < 0) completed_at[static_cast<std::size_t>(g)] = i;
        break;
      case Op::barrier: last_barrier = i; break;
      case Op::read: {
        const auto it = latest.find(st.tile);
        if (it == latest.end() || it->second.block != st.block)
          return "step " + std::to_string(i) + ": " + st.tile + " does not hold block " + std::to_string(st.block);
        const int g = it->second.group;
        if (g >= open_group || completed_at[static_cast<std::size_t>(g)] < 0)
          return "step " + std::to_string(i) + ": " + st.tile + "'s copy not waited for";
        if (!(last_barrier > completed_at[static_cast<std::size_t>(g)]))
          return "step " + std::to_string(i) + ": " + st.tile + " read without a barrier after its wait";
        last_read[st.tile] = i;
        break;
      }
    }
  }
  (void)group_done;
  return "";
}

}  // namespace

TEST_CASE("flash schedules: every tile read holds its block, no copy overwrites a tile in use", "[flash][schedule]") {
  for (int first : {0, 1, 2, 7})
    for (int n = 0; n <= 6; ++n) {
      INFO("key blocks: " << n << " from block " << first);
      CHECK(check(v1_schedule(n, first)).empty());
      CHECK(check(v2_schedule(n, first)).empty());
    }
}

TEST_CASE("the schedule check catches the mistakes it is for", "[flash][schedule]") {
  // v1 without its trailing barrier: the next pair is copied into the stage
  // that the previous block's MMAs may still be reading.
  Schedule v1_no_trailing = v1_schedule(3);
  for (std::size_t i = v1_no_trailing.steps.size(); i-- > 1;)
    if (v1_no_trailing.steps[i].op == Op::barrier && v1_no_trailing.steps[i - 1].op == Op::read)
      v1_no_trailing.steps.erase(v1_no_trailing.steps.begin() + static_cast<std::ptrdiff_t>(i));
  CHECK_THAT(check(v1_no_trailing), Catch::Contains("while a thread may still read it"));
  // A wait that leaves V[j] pending before P V.
  Schedule loose = v2_schedule(3);
  for (auto& st : loose.steps)
    if (st.op == Op::wait) st.block = 2;
  CHECK_THAT(check(loose), Catch::Contains("not waited for"));
  // A single V stage: V[j+1] overwrites V[j] while P V[j] may run.
  Schedule one;
  one.issue("Q", -1);
  one.issue("K0", 0);
  one.commit();
  for (int j = 0; j < 3; ++j) {
    one.issue("V", j);
    one.commit();
    one.wait(1);
    one.barrier();
    one.read(stage("K", j), j);
    if (j + 1 < 3) one.issue(stage("K", j + 1), j + 1);
    one.commit();
    one.wait(1);
    one.barrier();
    one.read("V", j);
  }
  CHECK_THAT(check(one), Catch::Contains("copy into V while a thread may still read it"));
}
