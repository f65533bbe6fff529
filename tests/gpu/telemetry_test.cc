// GPU telemetry (gpu/telemetry.h): the trace format and its replay, the health fold
// (throttle time, XIDs, quarantine), and the NVML source against the fake libnvidia-ml.
#include "fastpath/gpu/telemetry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>

namespace fastpath::gpu {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class TraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("fastpath_telemetry_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path Write(const std::string& text) {
    const fs::path file = dir_ / "trace.jsonl";
    std::ofstream(file) << text;
    return file;
  }
  // The error of opening `text` as a trace; empty when it opens.
  std::string Error(const std::string& text) {
    auto source = OpenTraceSource(Write(text));
    return source.ok() ? "" : source.status().message();
  }
  fs::path dir_;
};

TEST_F(TraceTest, EachGpuPlaysItsLastLineReachedAndEachXidOnce) {
  auto source = OpenTraceSource(
      Write("{\"t_ms\": 100, \"gpu\": 0, \"uuid\": \"GPU-a\", \"temperature_c\": 50}\n"
            "\n"
            "{\"t_ms\": 100, \"gpu\": 1, \"sm_clock_mhz\": 1980}\n"
            "{\"t_ms\": 200, \"gpu\": 0, \"temperature_c\": 60, \"xid\": 31}\n"
            "{\"t_ms\": 300, \"gpu\": 0, \"temperature_c\": 70, \"xid\": 79, "
            "\"clocks_event_reasons\": \"0x40\", \"lost\": true}\n"
            "{\"t_ms\": 300, \"gpu\": 1, \"unanswered\": \"NVML_ERROR_UNKNOWN\"}\n"));
  ASSERT_TRUE(source.ok()) << source.status().message();
  EXPECT_THAT((*source)->Describe(), HasSubstr("trace.jsonl"));
  EXPECT_TRUE((*source)->Sample(milliseconds(99)).empty()) << "no GPU has a line yet";

  std::vector<GpuSample> at150 = (*source)->Sample(milliseconds(150));
  ASSERT_EQ(at150.size(), 2u);
  EXPECT_EQ(at150[0].gpu, 0);
  EXPECT_EQ(at150[0].uuid, "GPU-a");
  EXPECT_EQ(at150[0].temperature_c, 50);
  EXPECT_FALSE(at150[0].sm_clock_mhz.has_value()) << "left out: unsupported";
  EXPECT_EQ(at150[1].gpu, 1);
  EXPECT_EQ(at150[1].sm_clock_mhz, 1980);

  // Both of GPU 0's later lines are reached in one pass: the last one is the sample, the
  // XIDs of both are in it.
  std::vector<GpuSample> at400 = (*source)->Sample(milliseconds(400));
  EXPECT_EQ(at400[0].temperature_c, 70);
  EXPECT_EQ(at400[0].uuid, "GPU-a") << "a GPU keeps its UUID";
  EXPECT_EQ(at400[0].clocks_event_reasons, 0x40u);
  EXPECT_THAT(at400[0].xids, ElementsAre(31u, 79u));
  EXPECT_TRUE(at400[0].lost);
  EXPECT_FALSE(at150[0].lost);
  EXPECT_EQ(at400[1].unanswered, "NVML_ERROR_UNKNOWN");
  EXPECT_EQ(at150[1].unanswered, "");
  // After the trace ends the GPUs hold their last state, without the XIDs again.
  std::vector<GpuSample> at900 = (*source)->Sample(milliseconds(900));
  EXPECT_EQ(at900[0].temperature_c, 70);
  EXPECT_TRUE(at900[0].xids.empty());
}

TEST_F(TraceTest, ABadLineFailsTheFileWithItsNumberAndWhy) {
  const std::string good = "{\"t_ms\": 0}\n";
  EXPECT_THAT(Error(good + "{\"t_ms\": 5, \"temp\": 50}\n"),
              HasSubstr("trace.jsonl line 2: unknown field \"temp\" (known: t_ms, gpu"));
  EXPECT_THAT(Error(good + good + "{\"t_ms\": 5, \"power_w\": \"high\"}\n"),
              HasSubstr("line 3: \"power_w\" must be a non-negative number"));
  EXPECT_THAT(Error("{\"gpu\": 0}\n"), HasSubstr("line 1: \"t_ms\" is missing"));
  EXPECT_THAT(Error("{\"t_ms\": -1}\n"), HasSubstr("line 1: \"t_ms\" must be a non-negative integer"));
  EXPECT_THAT(Error("{\"t_ms\": 10}\n{\"t_ms\": 5}\n"),
              HasSubstr("line 2: t_ms 5 is before the previous line of gpu 0 (10)"));
  EXPECT_THAT(Error("{\"t_ms\": 10\n"), HasSubstr("line 1: not JSON"));
  EXPECT_THAT(Error("[1]\n"), HasSubstr("line 1: not a JSON object"));
  EXPECT_THAT(Error("{\"t_ms\": 0, \"gpu\": 64}\n"), HasSubstr("\"gpu\" must be an integer from 0 to 63"));
  EXPECT_THAT(Error("{\"t_ms\": 0, \"utilization_ratio\": 30}\n"), HasSubstr("must be 0..1"));
  EXPECT_THAT(Error("{\"t_ms\": 0, \"clocks_event_reasons\": \"40\"}\n"),
              HasSubstr("must be a bit mask"));
  EXPECT_THAT(Error("{\"t_ms\": 0, \"xid\": 0}\n"), HasSubstr("\"xid\" must be a positive integer"));
  EXPECT_THAT(Error("\n\n"), HasSubstr("has no samples"));
  EXPECT_EQ(Error("{\"t_ms\": 0, \"xid\": null}\n"), "");
  auto missing = OpenTraceSource(dir_ / "absent.jsonl");
  EXPECT_THAT(missing.status().message(), HasSubstr("absent.jsonl cannot be read"));
}

TEST_F(TraceTest, WhatTheRecorderWritesReadsBackTheSame) {
  GpuSample s;
  s.gpu = 2;
  s.uuid = "GPU-b";
  s.temperature_c = 81.5;
  s.sm_clock_mhz = 1410;
  s.utilization_ratio = 0.25;
  s.memory_used_bytes = uint64_t{5} << 30;
  s.power_w = 612.25;
  s.clocks_event_reasons = 0x44;
  s.ecc_uncorrected_volatile = 0;
  s.xids = {13, 79};
  const std::string lines = SampleToTraceLines(s, milliseconds(1500));
  EXPECT_EQ(std::count(lines.begin(), lines.end(), '\n'), 1) << "one line per XID:\n" << lines;

  auto source = OpenTraceSource(Write(lines + "\n"));
  ASSERT_TRUE(source.ok()) << source.status().message();
  const std::vector<GpuSample> back = (*source)->Sample(milliseconds(1500));
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].gpu, 2);
  EXPECT_EQ(back[0].uuid, "GPU-b");
  EXPECT_EQ(back[0].temperature_c, 81.5);
  EXPECT_EQ(back[0].sm_clock_mhz, 1410);
  EXPECT_EQ(back[0].utilization_ratio, 0.25);
  EXPECT_EQ(back[0].memory_used_bytes, uint64_t{5} << 30);
  EXPECT_EQ(back[0].power_w, 612.25);
  EXPECT_EQ(back[0].clocks_event_reasons, 0x44u);
  EXPECT_EQ(back[0].ecc_uncorrected_volatile, 0u);
  EXPECT_FALSE(back[0].power_limit_w.has_value());
  EXPECT_FALSE(back[0].mem_clock_mhz.has_value());
  EXPECT_THAT(back[0].xids, ElementsAre(13u, 79u));
}

TEST_F(TraceTest, ViolationCountersAreAnObjectOfSecondsByPolicy) {
  auto source = OpenTraceSource(Write(
      "{\"t_ms\": 0, \"violation_s\": {\"thermal\": 12.5, \"power\": 0, "
      "\"total_base_clocks\": 3}}\n"
      "{\"t_ms\": 10}\n"));
  ASSERT_TRUE(source.ok()) << source.status().message();
  EXPECT_EQ((*source)->Sample(milliseconds(0))[0].violation_seconds,
            (std::map<std::string, double>{
                {"thermal", 12.5}, {"power", 0}, {"total_base_clocks", 3}}));
  EXPECT_TRUE((*source)->Sample(milliseconds(10))[0].violation_seconds.empty())
      << "a line without the field: unsupported";

  const std::string good = "{\"t_ms\": 0}\n";
  EXPECT_THAT(Error(good + "{\"t_ms\": 5, \"violation_s\": {\"thermal\": 1, \"hot\": 2}}\n"),
              HasSubstr("trace.jsonl line 2: unknown key \"hot\" in \"violation_s\" (known: power, "
                        "thermal, sync_boost, board_limit, low_utilization, reliability, "
                        "total_app_clocks, total_base_clocks)"));
  EXPECT_THAT(Error("{\"t_ms\": 0, \"violation_s\": {\"power\": -1}}\n"),
              HasSubstr("line 1: \"violation_s\": \"power\" must be a non-negative number"));
  EXPECT_THAT(Error("{\"t_ms\": 0, \"violation_s\": {\"power\": \"1\"}}\n"),
              HasSubstr("line 1: \"violation_s\": \"power\" must be a non-negative number"));
  EXPECT_THAT(Error("{\"t_ms\": 0, \"violation_s\": 12.5}\n"),
              HasSubstr("line 1: \"violation_s\" must be an object of seconds by policy"));
  EXPECT_THAT(Error("{\"t_ms\": 0, \"violations\": {}}\n"),
              HasSubstr("unknown field \"violations\" (known: t_ms"));
  EXPECT_EQ(Error("{\"t_ms\": 0, \"violation_s\": {}}\n"), "") << "no counter: unsupported";

  // What the recorder writes reads back.
  GpuSample s;
  s.violation_seconds = {{"thermal", 1.25}, {"reliability", 0}};
  const std::string line = SampleToTraceLines(s, milliseconds(7));
  EXPECT_THAT(line, HasSubstr("\"violation_s\":{\"reliability\":0.0,\"thermal\":1.25}"));
  auto back = OpenTraceSource(Write(line + "\n"));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ((*back)->Sample(milliseconds(7))[0].violation_seconds, s.violation_seconds);
  EXPECT_THAT(SampleToTraceLines(GpuSample{}, milliseconds(7)),
              ::testing::Not(HasSubstr("violation_s")));
}

GpuSample Healthy(int gpu = 0) {
  GpuSample s;
  s.gpu = gpu;
  s.clocks_event_reasons = 0;
  s.ecc_uncorrected_volatile = 0;
  return s;
}

TEST(GpuHealthTest, ThrottleTimeIsTheReasonsHeldBetweenSamples) {
  GpuHealth health;
  GpuSample s = Healthy();
  health.Add({s}, milliseconds(0));
  s.clocks_event_reasons = 0x40 | 0x4;  // HW thermal, SW power cap
  health.Add({s}, milliseconds(1000));
  health.Add({s}, milliseconds(2500));
  s.clocks_event_reasons = 0x4;
  health.Add({s}, milliseconds(3000));
  health.Add({s}, milliseconds(3500));
  const std::vector<GpuStatus> statuses = health.Statuses();
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_DOUBLE_EQ(statuses[0].throttle_seconds.at(6), 2.0);  // 1000..3000
  EXPECT_DOUBLE_EQ(statuses[0].throttle_seconds.at(2), 2.5);  // 1000..3500
  EXPECT_EQ(statuses[0].throttle_seconds.count(0), 0u);
  EXPECT_EQ(statuses[0].last_sample_at, milliseconds(3500));
  EXPECT_FALSE(health.AnyQuarantined());
}

TEST(GpuHealthTest, AnUncorrectedEccErrorQuarantinesForGood) {
  GpuHealth health;
  EXPECT_TRUE(health.Add({Healthy(0), Healthy(1)}, milliseconds(0)).empty());
  GpuSample bad = Healthy(1);
  bad.ecc_uncorrected_volatile = 3;
  EXPECT_THAT(health.Add({Healthy(0), bad}, milliseconds(100)), ElementsAre(1));
  EXPECT_TRUE(health.AnyQuarantined());
  // Said once; and the count going back to 0 (a driver reload under us) clears nothing.
  EXPECT_TRUE(health.Add({Healthy(0), bad}, milliseconds(200)).empty());
  EXPECT_TRUE(health.Add({Healthy(0), Healthy(1)}, milliseconds(300)).empty());
  const std::vector<GpuStatus> statuses = health.Statuses();
  EXPECT_EQ(statuses[0].quarantined, "");
  EXPECT_EQ(statuses[1].quarantined,
            "3 uncorrected ECC error(s) since the driver loaded (volatile count)");
}

TEST(GpuHealthTest, ALostGpuIsQuarantined) {
  GpuHealth health;
  GpuSample s = Healthy();
  s.lost = true;
  EXPECT_THAT(health.Add({s}, milliseconds(0)), ElementsAre(0));
  EXPECT_THAT(health.Statuses()[0].quarantined, HasSubstr("the GPU is lost"));
}

// Three samples in a row in which NVML answered none of a GPU's reads quarantine it; fewer, or
// broken by one that answers, do not.
TEST(GpuHealthTest, AGpuThatStopsAnsweringIsQuarantinedAfterThreeSamples) {
  GpuHealth health;
  GpuSample silent;  // every field unread
  silent.gpu = 1;
  silent.unanswered = "NVML_ERROR_UNKNOWN";
  EXPECT_TRUE(health.Add({Healthy(0), silent}, milliseconds(0)).empty());
  EXPECT_TRUE(health.Add({Healthy(0), silent}, milliseconds(1000)).empty());
  EXPECT_TRUE(health.Add({Healthy(0), Healthy(1)}, milliseconds(2000)).empty()) << "a hiccup";
  EXPECT_TRUE(health.Add({Healthy(0), silent}, milliseconds(3000)).empty());
  EXPECT_TRUE(health.Add({Healthy(0), silent}, milliseconds(4000)).empty());
  EXPECT_FALSE(health.AnyQuarantined());
  EXPECT_THAT(health.Add({Healthy(0), silent}, milliseconds(5000)), ElementsAre(1));
  const std::vector<GpuStatus> statuses = health.Statuses();
  EXPECT_EQ(statuses[0].quarantined, "");
  EXPECT_THAT(statuses[1].quarantined,
              HasSubstr("NVML answered none of the GPU's reads in 3 samples in a row over "
                        "2 s (NVML_ERROR_UNKNOWN)"));
  EXPECT_THAT(StatusToJson(statuses[1]), HasSubstr("\"unanswered\":\"NVML_ERROR_UNKNOWN\""));
  EXPECT_THAT(StatusToJson(statuses[0]), HasSubstr("\"unanswered\":null"));

  // Sampled every 10 ms, a 40 ms hiccup is many samples but no GPU gone.
  GpuHealth fast;
  for (int ms = 0; ms <= 40; ms += 10) {
    EXPECT_TRUE(fast.Add({silent}, milliseconds(ms)).empty()) << ms;
  }
  EXPECT_FALSE(fast.AnyQuarantined());
}

TEST(GpuHealthTest, ThrottleCausesNameTheReasonBehindHwSlowdown) {
  EXPECT_THAT(ThrottleCauses(0x40), ElementsAre("thermal"));
  EXPECT_THAT(ThrottleCauses(0x20 | 0x4), ElementsAre("thermal", "power"));
  EXPECT_THAT(ThrottleCauses(0x8), ElementsAre("reliability"));
  EXPECT_THAT(ThrottleCauses(0x8 | 0x40), ElementsAre("thermal")) << "HW slowdown rides along";
  EXPECT_THAT(ThrottleCauses(0x8 | 0x80), ElementsAre("power"));
  EXPECT_TRUE(ThrottleCauses(0x1 | 0x2 | 0x10 | 0x100).empty()) << "idle, app clocks, sync boost";
}

TEST(GpuHealthTest, CriticalXidsQuarantineAndApplicationXidsAreOnlyCounted) {
  GpuHealth health;
  GpuSample s = Healthy();
  s.xids = {13, 43, 13};
  EXPECT_TRUE(health.Add({s}, milliseconds(0)).empty());
  s.xids = {79};
  EXPECT_THAT(health.Add({s}, milliseconds(10)), ElementsAre(0));
  s.xids = {48};
  health.Add({s}, milliseconds(20));
  const GpuStatus status = health.Statuses()[0];
  EXPECT_EQ(status.quarantined, "critical XID 79 (GPU has fallen off the bus)") << "the first cause";
  EXPECT_EQ(status.xid_counts.at(13), 2u);
  EXPECT_EQ(status.xid_counts.at(43), 1u);
  EXPECT_EQ(status.xid_counts.at(79), 1u);
  EXPECT_EQ(status.xid_counts.at(48), 1u);

  GpuHealth custom({79});  // configured: 79 is the application's, 13 is not
  s.xids = {79};
  EXPECT_TRUE(custom.Add({s}, milliseconds(0)).empty());
  s.xids = {13};
  EXPECT_THAT(custom.Add({s}, milliseconds(10)), ElementsAre(0));
}

TEST(GpuHealthTest, XidListsParseOrNameTheBadItem) {
  EXPECT_EQ(*ParseXidList("13,31, 43"), std::set<uint64_t>({13, 31, 43})) << "\" 43\" parses";
  EXPECT_EQ(*ParseXidList(""), std::set<uint64_t>());
  EXPECT_THAT(ParseXidList("13,x1").status().message(), HasSubstr("'x1' is not an XID"));
  EXPECT_THAT(ParseXidList("0").status().message(), HasSubstr("'0' is not an XID"));
  EXPECT_THAT(ParseXidList("-5").status().message(), HasSubstr("'-5' is not an XID"));
  EXPECT_EQ(*ParseXidList("43 , 79"), std::set<uint64_t>({43, 79}));
  EXPECT_EQ(DefaultIgnoredXids(), std::set<uint64_t>({13, 31, 43, 45, 68, 109}));
}

// The cause seconds of GPU 0, 0 for a cause never seen. A copy: Statuses() returns a vector by
// value, and a reference into it would dangle.
double Cause(const GpuHealth& health, const std::string& cause) {
  const std::map<std::string, double> seconds = health.Statuses()[0].cause_seconds;
  auto it = seconds.find(cause);
  return it == seconds.end() ? 0.0 : it->second;
}

TEST(GpuHealthTest, NvmlCountersArePreferredOverTheSamples) {
  GpuHealth health;
  GpuSample s = Healthy();
  s.clocks_event_reasons = 0x20 | 0x4;  // SW thermal, SW power cap: both have a counter
  s.violation_seconds = {{"thermal", 100.0}, {"power", 40.0}, {"board_limit", 7.0}};
  health.Add({s}, milliseconds(0));
  // Both reasons show in every sample, but the counters say they held 0.25 s and 0.5 s.
  s.violation_seconds = {{"thermal", 100.25}, {"power", 40.5}, {"board_limit", 9.0}};
  health.Add({s}, milliseconds(1000));
  EXPECT_DOUBLE_EQ(Cause(health, "thermal"), 0.25);
  EXPECT_DOUBLE_EQ(Cause(health, "power"), 0.5) << "board_limit is no part of power";
  // throttle_seconds stays what the samples show.
  EXPECT_DOUBLE_EQ(health.Statuses()[0].throttle_seconds.at(5), 1.0);
  EXPECT_DOUBLE_EQ(health.Statuses()[0].throttle_seconds.at(2), 1.0);

  // The reasons were gone by 2000 and the counters held still: nothing, where the samples
  // would count the whole second. Then an episode between two samples that both show no
  // reason: the counter sees it.
  s.clocks_event_reasons = 0;
  health.Add({s}, milliseconds(2000));
  EXPECT_DOUBLE_EQ(Cause(health, "thermal"), 0.25);
  EXPECT_DOUBLE_EQ(Cause(health, "power"), 0.5);
  s.violation_seconds["thermal"] = 100.625;
  health.Add({s}, milliseconds(3000));
  EXPECT_DOUBLE_EQ(Cause(health, "thermal"), 0.25 + 0.375);
  EXPECT_DOUBLE_EQ(health.Statuses()[0].throttle_seconds.at(5), 2.0) << "0..2000 by the samples";

  // More than the interval (a counter the driver updates in coarser steps than we sample,
  // or read late in a slow pass): all of it, since it is throttle time all the same.
  s.violation_seconds["thermal"] = 103.625;
  health.Add({s}, milliseconds(4000));
  EXPECT_DOUBLE_EQ(Cause(health, "thermal"), 0.625 + 3.0);
}

TEST(GpuHealthTest, ACounterGoingBackAddsNothing) {
  GpuHealth health;
  GpuSample s = Healthy();
  s.clocks_event_reasons = 0x20;
  s.violation_seconds = {{"thermal", 500.0}};
  health.Add({s}, milliseconds(0));
  s.violation_seconds = {{"thermal", 0.1}};  // the driver reloaded: the counter restarted
  health.Add({s}, milliseconds(1000));
  EXPECT_DOUBLE_EQ(Cause(health, "thermal"), 0.0) << "not the interval, not negative";
  EXPECT_EQ(health.Statuses()[0].cause_seconds.count("thermal"), 0u);
  s.violation_seconds = {{"thermal", 0.4}};
  health.Add({s}, milliseconds(2000));
  EXPECT_DOUBLE_EQ(Cause(health, "thermal"), 0.3) << "counting again from the new value";
}

TEST(GpuHealthTest, WithoutACounterInBothSamplesTheSamplesCount) {
  GpuHealth health;
  GpuSample s = Healthy();
  s.clocks_event_reasons = 0x20 | 0x4 | 0x8;  // SW thermal, SW power cap, HW slowdown
  s.violation_seconds = {{"thermal", 10.0}};  // no power counter (an old driver, a trace)
  health.Add({s}, milliseconds(0));
  s.violation_seconds = {{"thermal", 10.0}, {"reliability", 50.0}};
  health.Add({s}, milliseconds(1000));
  EXPECT_DOUBLE_EQ(Cause(health, "thermal"), 0.0) << "the counter held still";
  EXPECT_DOUBLE_EQ(Cause(health, "power"), 1.0) << "no counter: the interval";
  EXPECT_DOUBLE_EQ(Cause(health, "reliability"), 1.0)
      << "HW slowdown has no counter: NVML's reliability counter is the board's limit";
  s.violation_seconds.clear();  // the counter stopped answering: back to the samples
  health.Add({s}, milliseconds(1500));
  EXPECT_DOUBLE_EQ(Cause(health, "thermal"), 0.5);
  s.violation_seconds = {{"thermal", 10.0}};  // only the current sample has it
  health.Add({s}, milliseconds(2000));
  EXPECT_DOUBLE_EQ(Cause(health, "thermal"), 1.0);
}

TEST(GpuHealthTest, AReasonItsCounterDoesNotTimeTakesTheInterval) {
  GpuHealth health;
  GpuSample s = Healthy();
  s.clocks_event_reasons = 0x40 | 0x80;  // HW thermal, HW power brake: no counter times them
  s.violation_seconds = {{"thermal", 10.0}, {"power", 20.0}};
  health.Add({s}, milliseconds(0));
  s.violation_seconds = {{"thermal", 10.1}, {"power", 20.0}};
  health.Add({s}, milliseconds(1000));
  EXPECT_DOUBLE_EQ(Cause(health, "thermal"), 1.0);
  EXPECT_DOUBLE_EQ(Cause(health, "power"), 1.0);

  EXPECT_EQ(CounterOfCause("thermal")->policy, "thermal");
  EXPECT_EQ(CounterOfCause("thermal")->untimed_reasons, 0x40u);
  EXPECT_EQ(CounterOfCause("power")->policy, "power");
  EXPECT_EQ(CounterOfCause("power")->untimed_reasons, 0x80u);
  EXPECT_FALSE(CounterOfCause("reliability").has_value());
  for (const char* cause : {"thermal", "power"}) {
    const std::vector<std::string>& policies = ViolationPolicies();
    EXPECT_NE(std::find(policies.begin(), policies.end(), CounterOfCause(cause)->policy),
              policies.end());
  }
}

TEST(GpuHealthTest, TheJsonShowsUnsupportedAsNullAndTheReasonsByName) {
  GpuHealth health;
  GpuSample s = Healthy();
  s.uuid = "GPU-c";
  s.temperature_c = 77;
  s.clocks_event_reasons = 0x20;
  health.Add({s}, milliseconds(0));
  health.Add({s}, milliseconds(500));
  const std::string json = StatusToJson(health.Statuses()[0]);
  EXPECT_THAT(json, HasSubstr("\"uuid\":\"GPU-c\""));
  EXPECT_THAT(json, HasSubstr("\"temperature_c\":77.0"));
  EXPECT_THAT(json, HasSubstr("\"power_w\":null"));
  EXPECT_THAT(json, HasSubstr("\"clocks_event_reasons\":[\"SW thermal slowdown\"]"));
  EXPECT_THAT(json, HasSubstr("\"throttle_seconds\":{\"sw_thermal\":0.5}"));
  EXPECT_THAT(json, HasSubstr("\"quarantined\":null"));
  EXPECT_THAT(json, HasSubstr("\"violation_seconds\":null")) << "no counter: unsupported";
  s.violation_seconds = {{"thermal", 2.5}, {"power", 0}};
  health.Add({s}, milliseconds(1000));
  EXPECT_THAT(StatusToJson(health.Statuses()[0]),
              HasSubstr("\"violation_seconds\":{\"power\":0.0,\"thermal\":2.5}"));
  EXPECT_EQ(ClockEventReasonLabel(6), "hw_thermal");
  EXPECT_EQ(ClockEventReasonLabel(40), "bit_40");
}

// --- the NVML source against the fake libnvidia-ml ---

class NvmlSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_.getenv = [this](const std::string& name) -> std::optional<std::string> {
      auto it = process_env_.find(name);
      if (it == process_env_.end()) return std::nullopt;
      return it->second;
    };
    env_.nvml = {std::string(FASTPATH_FAKE_CUDA_LIB_DIR) + "/nvml/libnvidia-ml.so.1"};
  }
  void TearDown() override {
    for (const std::string& name : set_) ::unsetenv(name.c_str());
  }
  void Fake(const std::string& name, const std::string& value) {
    ::setenv(name.c_str(), value.c_str(), 1);
    set_.push_back(name);
  }
  ProbeEnvironment env_;
  std::map<std::string, std::string> process_env_;  // what the source sees
  std::vector<std::string> set_;
};

TEST_F(NvmlSourceTest, ReadsEveryFieldAndEachXidOnce) {
  Fake("FASTPATH_FAKE_NVML_TEMPERATURE", "83");
  Fake("FASTPATH_FAKE_NVML_THROTTLE", "0x40");
  Fake("FASTPATH_FAKE_NVML_ECC_UNCORRECTED", "2");
  Fake("FASTPATH_FAKE_NVML_XIDS", "79,13");
  auto source = OpenNvmlSource(env_);
  ASSERT_TRUE(source.ok()) << source.status().message();
  EXPECT_EQ((*source)->Describe(), "NVML driver 580.65.06 (1 GPU, XID events)");
  std::vector<GpuSample> s = (*source)->Sample(milliseconds(0));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].gpu, 0);
  EXPECT_EQ(s[0].uuid, "GPU-fake-0");
  EXPECT_EQ(s[0].temperature_c, 83);
  EXPECT_EQ(s[0].sm_clock_mhz, 1980);
  EXPECT_EQ(s[0].mem_clock_mhz, 2619);
  EXPECT_EQ(s[0].utilization_ratio, 0.30);
  EXPECT_EQ(s[0].memory_total_bytes, uint64_t{80} << 30);
  EXPECT_EQ(s[0].memory_used_bytes, uint64_t{1} << 30);
  EXPECT_EQ(s[0].power_w, 250.0);
  EXPECT_EQ(s[0].power_limit_w, 700.0);
  EXPECT_EQ(s[0].clocks_event_reasons, 0x40u);
  EXPECT_EQ(s[0].ecc_uncorrected_volatile, 2u);
  EXPECT_EQ(s[0].remapped_rows_uncorrectable, 0u);
  EXPECT_THAT(s[0].xids, ElementsAre(79u, 13u));
  EXPECT_TRUE((*source)->Sample(milliseconds(1000))[0].xids.empty());
}

TEST_F(NvmlSourceTest, WhatTheDeviceDoesNotSupportIsUnsupportedNotZero) {
  Fake("FASTPATH_FAKE_NVML_NOT_SUPPORTED",
       "nvmlDeviceGetTemperature,nvmlDeviceGetPowerUsage,nvmlDeviceGetTotalEccErrors,"
       "nvmlDeviceGetRemappedRows,nvmlDeviceRegisterEvents");
  auto source = OpenNvmlSource(env_);
  ASSERT_TRUE(source.ok()) << source.status().message();
  EXPECT_THAT((*source)->Describe(), HasSubstr("no XID events"));
  const GpuSample s = (*source)->Sample(milliseconds(0))[0];
  EXPECT_FALSE(s.temperature_c.has_value());
  EXPECT_FALSE(s.power_w.has_value());
  EXPECT_FALSE(s.ecc_uncorrected_volatile.has_value());
  EXPECT_FALSE(s.remapped_rows_uncorrectable.has_value());
  EXPECT_EQ(s.sm_clock_mhz, 1980);

  // An old driver: only what its NVML has.
  env_.nvml = {std::string(FASTPATH_FAKE_CUDA_LIB_DIR) + "/nvml_minimal/libnvidia-ml.so.1"};
  auto old = OpenNvmlSource(env_);
  ASSERT_TRUE(old.ok()) << old.status().message();
  const GpuSample o = (*old)->Sample(milliseconds(0))[0];
  EXPECT_TRUE(o.uuid.empty());
  EXPECT_FALSE(o.temperature_c.has_value());
  EXPECT_FALSE(o.utilization_ratio.has_value());
  EXPECT_EQ(o.clocks_event_reasons, 0x1u) << "through the pre-12.2 throttle-reasons name";
}

// A GPU whose every read fails with an error other than NOT_SUPPORTED (NVML_ERROR_UNKNOWN, as
// some drivers answer after an XID 79) is noted as unanswered; those errors used to read as
// "unsupported", every field null, and the GPU stayed healthy. A read failing with
// NO_PERMISSION while others answer is a field left out, nothing more.
TEST_F(NvmlSourceTest, AGpuThatAnswersNoReadIsNotedWithNvmlsError) {
  auto source = OpenNvmlSource(env_);
  ASSERT_TRUE(source.ok()) << source.status().message();
  EXPECT_EQ((*source)->Sample(milliseconds(0))[0].unanswered, "");

  Fake("FASTPATH_FAKE_NVML_READ_ERROR", "999");
  const GpuSample gone = (*source)->Sample(milliseconds(1000))[0];
  EXPECT_EQ(gone.unanswered, "NVML_ERROR_UNKNOWN");
  EXPECT_FALSE(gone.lost);
  EXPECT_FALSE(gone.memory_used_bytes.has_value());
  EXPECT_THAT(SampleToTraceLines(gone, milliseconds(1000)),
              HasSubstr("\"unanswered\":\"NVML_ERROR_UNKNOWN\""));

  Fake("FASTPATH_FAKE_NVML_READ_ERROR", "0");
  Fake("FASTPATH_FAKE_NVML_NOT_SUPPORTED", "nvmlDeviceGetTemperature");
  EXPECT_EQ((*source)->Sample(milliseconds(2000))[0].unanswered, "") << "it answers again";
}

TEST_F(NvmlSourceTest, ReadsTheViolationCountersInSecondsAndLeavesOutTheUnsupported) {
  auto none = OpenNvmlSource(env_);
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_TRUE((*none)->Sample(milliseconds(0))[0].violation_seconds.empty())
      << "every field NOT_SUPPORTED: none, not zeros";

  Fake("FASTPATH_FAKE_NVML_DEVICES", "2");
  Fake("FASTPATH_FAKE_NVML_THROTTLE", "0x20");  // SW thermal in every sample
  Fake("FASTPATH_FAKE_NVML_VIOLATION_NS",
       "thermal=2500000000,power=0,board_limit=750000000,total_base_clocks=1");
  auto source = OpenNvmlSource(env_);
  ASSERT_TRUE(source.ok()) << source.status().message();
  std::vector<GpuSample> s = (*source)->Sample(milliseconds(0));
  ASSERT_EQ(s.size(), 2u);
  for (const GpuSample& gpu : s) {
    EXPECT_EQ(gpu.violation_seconds.size(), 4u);
    EXPECT_DOUBLE_EQ(gpu.violation_seconds.at("thermal"), 2.5);
    EXPECT_DOUBLE_EQ(gpu.violation_seconds.at("power"), 0.0) << "supported and 0";
    EXPECT_DOUBLE_EQ(gpu.violation_seconds.at("board_limit"), 0.75);
    EXPECT_DOUBLE_EQ(gpu.violation_seconds.at("total_base_clocks"), 1e-9);
    EXPECT_EQ(gpu.violation_seconds.count("reliability"), 0u) << "NOT_SUPPORTED: left out";
  }
  // Folded: the thermal cause grows by the counter, not by the interval.
  GpuHealth health;
  health.Add(s, milliseconds(0));
  Fake("FASTPATH_FAKE_NVML_VIOLATION_NS", "thermal=2600000000,power=0");
  s = (*source)->Sample(milliseconds(1000));
  EXPECT_EQ(s[0].violation_seconds.size(), 2u);
  health.Add(s, milliseconds(1000));
  EXPECT_NEAR(health.Statuses()[0].cause_seconds.at("thermal"), 0.1, 1e-9);
  EXPECT_DOUBLE_EQ(health.Statuses()[0].throttle_seconds.at(5), 1.0);

  // The call itself unsupported, or missing from an old driver's NVML: none.
  Fake("FASTPATH_FAKE_NVML_NOT_SUPPORTED", "nvmlDeviceGetFieldValues");
  EXPECT_TRUE((*source)->Sample(milliseconds(2000))[0].violation_seconds.empty());
  env_.nvml = {std::string(FASTPATH_FAKE_CUDA_LIB_DIR) + "/nvml_minimal/libnvidia-ml.so.1"};
  auto old = OpenNvmlSource(env_);
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_TRUE((*old)->Sample(milliseconds(0))[0].violation_seconds.empty());
}

TEST_F(NvmlSourceTest, CudaVisibleDevicesChoosesAndOrdersTheGpus) {
  Fake("FASTPATH_FAKE_NVML_DEVICES", "3");
  process_env_["CUDA_VISIBLE_DEVICES"] = "2,GPU-fake-0,junk,1";  // CUDA stops at "junk"
  auto source = OpenNvmlSource(env_);
  ASSERT_TRUE(source.ok()) << source.status().message();
  const std::vector<GpuSample> s = (*source)->Sample(milliseconds(0));
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].gpu, 0);
  EXPECT_EQ(s[0].uuid, "GPU-fake-2");
  EXPECT_EQ(s[1].gpu, 1);
  EXPECT_EQ(s[1].uuid, "GPU-fake-0");

  // An index or UUID NVML cannot find ends the list as CUDA's does: the GPUs before it are
  // still the process's, and watched (it turned the telemetry and the quarantine off).
  process_env_["CUDA_VISIBLE_DEVICES"] = "0,5,1";
  auto cut = OpenNvmlSource(env_);
  ASSERT_TRUE(cut.ok()) << cut.status().message();
  ASSERT_EQ((*cut)->Sample(milliseconds(0)).size(), 1u);
  EXPECT_THAT((*cut)->Describe(), HasSubstr("CUDA_VISIBLE_DEVICES names 5, which NVML cannot "
                                            "find (nvmlReturn_t"));
  // A GPU named twice is watched once (it gave each nv_gpu_* series twice, an XID on both).
  process_env_["CUDA_VISIBLE_DEVICES"] = "0,GPU-fake-0,1";
  auto twice = OpenNvmlSource(env_);
  ASSERT_TRUE(twice.ok()) << twice.status().message();
  EXPECT_EQ((*twice)->Sample(milliseconds(0)).size(), 1u);
  EXPECT_THAT((*twice)->Describe(), HasSubstr("names GPU-fake-0, a GPU named before it"));
  // Nothing before it: no GPU to watch.
  process_env_["CUDA_VISIBLE_DEVICES"] = "GPU-fake-9";
  EXPECT_THAT(OpenNvmlSource(env_).status().message(),
              HasSubstr("CUDA_VISIBLE_DEVICES names GPU-fake-9, which NVML cannot find"));
  process_env_["CUDA_VISIBLE_DEVICES"] = "";
  EXPECT_THAT(OpenNvmlSource(env_).status().message(), HasSubstr("NVML shows no GPU"));
}

TEST_F(NvmlSourceTest, NoNvmlIsAnErrorThatSaysWhy) {
  env_.nvml = {std::string(FASTPATH_FAKE_CUDA_LIB_DIR) + "/absent/libnvidia-ml.so.1"};
  EXPECT_THAT(OpenNvmlSource(env_).status().message(), HasSubstr("NVML cannot be loaded"));
  env_.nvml = {std::string(FASTPATH_FAKE_CUDA_LIB_DIR) + "/nvml/libnvidia-ml.so.1"};
  Fake("FASTPATH_FAKE_NVML_INIT_ERROR", "9");
  EXPECT_THAT(OpenNvmlSource(env_).status().message(), HasSubstr("nvmlInit_v2 failed"));
}

}  // namespace
}  // namespace fastpath::gpu
