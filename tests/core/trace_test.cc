#include "loom/core/trace.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

namespace loom::trace {
namespace {

Options opts(int64_t steps, int64_t every, int64_t max_events = 1000000) {
  Options o;
  o.path = "unused";
  o.steps = steps;
  o.every = every;
  o.max_events = max_events;
  return o;
}

int count_named(const nlohmann::json& events, const std::string& name) {
  int n = 0;
  for (const auto& e : events) n += e["name"] == name;
  return n;
}

TEST(Trace, DisabledRecordsNothing) {
  EXPECT_FALSE(enabled());
  bind_thread(0, kComputeTid, "compute", true);
  begin_step(0, 0);
  EXPECT_FALSE(active());
  { Span s("work", "test"); }
  start(opts(10, 1));
  EXPECT_EQ(recorded_events(), 0);
  stop_to_json();
}

TEST(Trace, SpansBecomeCompleteEventsWithTrackNames) {
  start(opts(10, 1));
  bind_thread(3, kComputeTid, "compute", true);
  begin_step(3, 0);
  {
    Span s;
    s.begin("fwd 0 linear", "forward", {{"layer", 0}});
  }
  instant("bucket 1 ready", "bucket", {{"bucket", 1}});
  const nlohmann::json j = nlohmann::json::parse(stop_to_json());
  ASSERT_TRUE(j.is_array());
  bool span = false, inst = false, thread_name = false, process_name = false;
  for (const auto& e : j) {
    if (e["name"] == "fwd 0 linear") {
      span = true;
      EXPECT_EQ(e["ph"], "X");
      EXPECT_EQ(e["pid"], 3);
      EXPECT_EQ(e["tid"], kComputeTid);
      EXPECT_EQ(e["cat"], "forward");
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      EXPECT_EQ(e["args"]["layer"], 0);
    }
    if (e["name"] == "bucket 1 ready") inst = e["ph"] == "i";
    if (e["name"] == "thread_name") thread_name = e["args"]["name"] == "compute";
    if (e["name"] == "process_name") process_name = e["args"]["name"] == "worker 3";
  }
  EXPECT_TRUE(span && inst && thread_name && process_name);
}

TEST(Trace, WindowKeepsEveryKthOfTheFirstNSteps) {
  // steps = 3, every = 4: steps 0, 4 and 8 are recorded, nothing else.
  start(opts(3, 4));
  bind_thread(0, kComputeTid, "compute", true);
  std::vector<int64_t> on;
  for (int64_t step = 0; step < 20; ++step) {
    begin_step(0, step);
    if (active()) on.push_back(step);
    Span s("step", "step");
  }
  EXPECT_EQ(on, (std::vector<int64_t>{0, 4, 8}));
  EXPECT_EQ(count_named(nlohmann::json::parse(stop_to_json()), "step"), 3);
}

TEST(Trace, MaxEventsBoundsTheFileAndSaysSo) {
  start(opts(1000, 1, 5));
  bind_thread(0, kComputeTid, "compute", true);
  begin_step(0, 0);
  for (int i = 0; i < 12; ++i) Span s("e", "test");
  EXPECT_EQ(recorded_events(), 5);
  EXPECT_EQ(dropped_events(), 7);
  const nlohmann::json j = nlohmann::json::parse(stop_to_json());
  EXPECT_EQ(count_named(j, "e"), 5);
  bool marker = false;
  for (const auto& e : j)
    marker |= e["name"].get<std::string>().find("7 events dropped") != std::string::npos;
  EXPECT_TRUE(marker);
}

TEST(Trace, ThreadsRecordConcurrentlyOnTheirOwnTracks) {
  start(opts(10, 1));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t] {
      bind_thread(t / 2, t % 2, t % 2 ? "comm" : "compute");
      begin_step(t / 2, 0);
      for (int i = 0; i < 500; ++i) Span s("work", "test");
    });
  for (auto& th : threads) th.join();
  const nlohmann::json j = nlohmann::json::parse(stop_to_json());
  std::map<std::pair<int, int>, int> per_track;
  for (const auto& e : j)
    if (e["name"] == "work") ++per_track[{e["pid"].get<int>(), e["tid"].get<int>()}];
  ASSERT_EQ(per_track.size(), 4u);
  for (const auto& [track, n] : per_track) EXPECT_EQ(n, 500);
}

TEST(Trace, NamesAreEscaped) {
  start(opts(10, 1));
  bind_thread(0, kComputeTid, "compute", true);
  begin_step(0, 0);
  { Span s("quote \" and \\ backslash", "test"); }
  const nlohmann::json j = nlohmann::json::parse(stop_to_json());
  EXPECT_EQ(count_named(j, "quote \" and \\ backslash"), 1);
}

}  // namespace
}  // namespace loom::trace
