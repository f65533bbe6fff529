#include "fastpath/metrics/metrics.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>
#include <sys/resource.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fakes/fake_inference_server.h"
#include "fastpath/common/utf8.h"
#include "prometheus/promtool_lint.h"

namespace fastpath::metrics {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

// The fake facade with scripted statistics.
class StatsServer : public testing::FakeInferenceServer {
 public:
  void SetStatistics(StatusOr<std::vector<ModelStatistics>> stats) {
    std::lock_guard lock(stats_mu_);
    stats_ = std::move(stats);
  }
  StatusOr<std::vector<ModelStatistics>> GetModelStatistics(
      const std::string& name, const std::string& version) const override {
    std::lock_guard lock(stats_mu_);
    return stats_;
  }

 private:
  mutable std::mutex stats_mu_;
  StatusOr<std::vector<ModelStatistics>> stats_ = std::vector<ModelStatistics>{};
};

// The exposition read back: "name{a="x",b="y"}" -> value, plus the TYPE of each family.
// Labels are kept in the order the text has them, which prometheus-cpp keeps as given.
struct Exposition {
  std::map<std::string, double> samples;
  std::map<std::string, std::string> types;

  double Get(const std::string& key) const {
    auto it = samples.find(key);
    if (it == samples.end()) {
      ADD_FAILURE() << "no sample " << key;
      return -1;
    }
    return it->second;
  }
  bool Has(const std::string& key) const { return samples.count(key) > 0; }
};

Exposition Parse(const std::string& text) {
  Exposition out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream fields(line.substr(7));
      std::string name, type;
      fields >> name >> type;
      out.types[name] = type;
      continue;
    }
    if (line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    EXPECT_NE(space, std::string::npos) << line;
    if (space == std::string::npos) continue;
    out.samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

ModelStatistics SampleStats() {
  ModelStatistics s;
  s.name = "mlp";
  s.version = "3";
  s.inference_count = 40;  // batch elements
  s.execution_count = 3;
  s.inference_stats.success = {5, 12'345'999};  // 12345.999 us -> 12345 (Triton truncates)
  s.inference_stats.fail = {4, 1000};
  s.inference_stats.queue = {5, 2'000'000};
  s.inference_stats.compute_input = {5, 3000};
  s.inference_stats.compute_infer = {5, 7'000'000};
  s.inference_stats.compute_output = {5, 4000};
  s.batch_stats.push_back({1, {}, {1, 100}, {}});
  s.batch_stats.push_back({3, {}, {1, 100}, {}});
  s.batch_stats.push_back({36, {}, {1, 100}, {}});
  s.failures[static_cast<size_t>(FailureReason::kRejected)] = 3;
  s.failures[static_cast<size_t>(FailureReason::kBackend)] = 1;
  s.request_latency.Observe(40'000);             // 40 us: the first bucket (le 50)
  s.request_latency.Observe(50'000);             // exactly 50 us: still le 50
  s.request_latency.Observe(3'000'000);          // 3 ms: le 5000
  s.request_latency.Observe(20'000'000'000ull);  // 20 s: only +Inf
  s.queue_latency.Observe(200'000, 5);           // 200 us, five requests
  s.pending_request_count = 7;
  return s;
}

constexpr const char* kLabels = "model=\"mlp\",version=\"3\"";

std::string Key(const std::string& name, const std::string& extra = "") {
  return name + "{" + kLabels + extra + "}";
}

TEST(StatisticsFamiliesTest, TritonCountersAndGaugeWithModelAndVersionLabels) {
  const Exposition e =
      Parse(prometheus::TextSerializer().Serialize(StatisticsFamilies({SampleStats()})));
  EXPECT_EQ(e.Get(Key("nv_inference_request_success")), 5);
  EXPECT_EQ(e.Get(Key("nv_inference_count")), 40);
  EXPECT_EQ(e.Get(Key("nv_inference_exec_count")), 3);
  EXPECT_EQ(e.Get(Key("nv_inference_request_duration_us")), 12345);
  EXPECT_EQ(e.Get(Key("nv_inference_queue_duration_us")), 2000);
  EXPECT_EQ(e.Get(Key("nv_inference_compute_input_duration_us")), 3);
  EXPECT_EQ(e.Get(Key("nv_inference_compute_infer_duration_us")), 7000);
  EXPECT_EQ(e.Get(Key("nv_inference_compute_output_duration_us")), 4);
  EXPECT_EQ(e.Get(Key("nv_inference_pending_request_count")), 7);
  for (const char* counter :
       {"nv_inference_request_success", "nv_inference_request_failure", "nv_inference_count",
        "nv_inference_exec_count", "nv_inference_request_duration_us",
        "nv_inference_queue_duration_us", "nv_inference_compute_input_duration_us",
        "nv_inference_compute_infer_duration_us", "nv_inference_compute_output_duration_us"}) {
    EXPECT_EQ(e.types.at(counter), "counter") << counter;
  }
  EXPECT_EQ(e.types.at("nv_inference_pending_request_count"), "gauge");
}

TEST(StatisticsFamiliesTest, FailureCounterHasEveryReasonEvenAtZero) {
  const Exposition e =
      Parse(prometheus::TextSerializer().Serialize(StatisticsFamilies({SampleStats()})));
  EXPECT_EQ(e.Get(Key("nv_inference_request_failure", ",reason=\"REJECTED\"")), 3);
  EXPECT_EQ(e.Get(Key("nv_inference_request_failure", ",reason=\"CANCELED\"")), 0);
  EXPECT_EQ(e.Get(Key("nv_inference_request_failure", ",reason=\"BACKEND\"")), 1);
  EXPECT_EQ(e.Get(Key("nv_inference_request_failure", ",reason=\"OTHER\"")), 0);
}

TEST(StatisticsFamiliesTest, DurationHistogramsAreInSecondsCumulativeWithInf) {
  const Exposition e =
      Parse(prometheus::TextSerializer().Serialize(StatisticsFamilies({SampleStats()})));
  const std::string h = "fastpath_inference_request_duration_seconds";
  EXPECT_EQ(e.types.at(h), "histogram");
  EXPECT_EQ(e.Get(Key(h + "_count")), 4);
  EXPECT_DOUBLE_EQ(e.Get(Key(h + "_sum")), 40e-6 + 50e-6 + 3e-3 + 20);
  // The bounds of kLatencyBucketBoundsUs (50 us .. 10 s) in seconds, as the text writes them.
  EXPECT_EQ(e.Get(Key(h + "_bucket", ",le=\"5e-05\"")), 2);
  EXPECT_EQ(e.Get(Key(h + "_bucket", ",le=\"0.0025\"")), 2);
  EXPECT_EQ(e.Get(Key(h + "_bucket", ",le=\"0.005\"")), 3);
  EXPECT_EQ(e.Get(Key(h + "_bucket", ",le=\"10\"")), 3);
  EXPECT_EQ(e.Get(Key(h + "_bucket", ",le=\"+Inf\"")), 4);
  size_t bounds = 0;
  for (const auto& [key, value] : e.samples) {
    if (key.rfind(h + "_bucket{", 0) == 0) ++bounds;
  }
  EXPECT_EQ(bounds, kLatencyBucketBoundsUs.size() + 1);  // and +Inf

  const std::string q = "fastpath_inference_queue_duration_seconds";
  EXPECT_EQ(e.types.at(q), "histogram");
  EXPECT_EQ(e.Get(Key(q + "_count")), 5);
  EXPECT_DOUBLE_EQ(e.Get(Key(q + "_sum")), 5 * 200e-6);
  EXPECT_EQ(e.Get(Key(q + "_bucket", ",le=\"0.0001\"")), 0);
  EXPECT_EQ(e.Get(Key(q + "_bucket", ",le=\"0.00025\"")), 5);
  EXPECT_EQ(e.types.at("fastpath_inference_compute_infer_duration_seconds"), "histogram");
  EXPECT_EQ(e.Get(Key("fastpath_inference_compute_infer_duration_seconds_count")), 0);
  for (const auto& [name, type] : e.types) {
    EXPECT_EQ(name.find("latency_us"), std::string::npos) << "the old name " << name;
  }
}

TEST(StatisticsFamiliesTest, BatchSizeHistogramComesFromBatchStats) {
  const Exposition e =
      Parse(prometheus::TextSerializer().Serialize(StatisticsFamilies({SampleStats()})));
  const std::string b = "fastpath_inference_batch_size";
  EXPECT_EQ(e.types.at(b), "histogram");
  EXPECT_EQ(e.Get(Key(b + "_count")), 3);  // executions
  EXPECT_EQ(e.Get(Key(b + "_sum")), 1 + 3 + 36);
  EXPECT_EQ(e.Get(Key(b + "_bucket", ",le=\"1\"")), 1);
  EXPECT_EQ(e.Get(Key(b + "_bucket", ",le=\"2\"")), 1);
  EXPECT_EQ(e.Get(Key(b + "_bucket", ",le=\"4\"")), 2);
  EXPECT_EQ(e.Get(Key(b + "_bucket", ",le=\"32\"")), 2);
  EXPECT_EQ(e.Get(Key(b + "_bucket", ",le=\"64\"")), 3);
  EXPECT_EQ(e.Get(Key(b + "_bucket", ",le=\"+Inf\"")), 3);
}

TEST(StatisticsFamiliesTest, OneSeriesPerModelVersion) {
  ModelStatistics a = SampleStats();
  ModelStatistics b = SampleStats();
  b.version = "4";
  b.inference_stats.success.count = 9;
  const Exposition e = Parse(prometheus::TextSerializer().Serialize(StatisticsFamilies({a, b})));
  EXPECT_EQ(e.Get("nv_inference_request_success{model=\"mlp\",version=\"3\"}"), 5);
  EXPECT_EQ(e.Get("nv_inference_request_success{model=\"mlp\",version=\"4\"}"), 9);
}

TEST(StatisticsFamiliesTest, NoModelsNoFamilies) { EXPECT_TRUE(StatisticsFamilies({}).empty()); }

TEST(ServerCollectorTest, ReadsTheFacadeOnEveryScrape) {
  StatsServer fake;
  ServerCollector collector(fake);
  EXPECT_FALSE(Parse(RenderText(collector)).Has(Key("nv_inference_request_success")));
  fake.SetStatistics(std::vector<ModelStatistics>{SampleStats()});
  EXPECT_EQ(Parse(RenderText(collector)).Get(Key("nv_inference_request_success")), 5);
  auto more = SampleStats();
  more.inference_stats.success.count = 6;
  fake.SetStatistics(std::vector<ModelStatistics>{more});
  EXPECT_EQ(Parse(RenderText(collector)).Get(Key("nv_inference_request_success")), 6);
}

// Prometheus refuses a whole scrape over one label value that is not UTF-8: a model folder
// named with such a byte shows it as U+FFFD.
TEST(ServerCollectorTest, LabelValuesAreUtf8WhateverTheyQuote) {
  StatsServer fake;
  ServerCollector collector(fake);
  auto stats = SampleStats();
  stats.name =
      "bad\xff"
      "name";
  fake.SetStatistics(std::vector<ModelStatistics>{stats});
  const std::string text = RenderText(collector);
  EXPECT_TRUE(IsValidUtf8(text));
  EXPECT_NE(text.find("model=\"bad\xef\xbf\xbd"
                      "name\""),
            std::string::npos)
      << text;
}

// Two folders that differ only in bytes that are not UTF-8 ("m\xff", "m\xfe") both show as
// "m\uFFFD": their series came out twice, which a scrape must not hold.
TEST(ServerCollectorTest, NamesThatBecomeOneLabelValueGiveOneSeries) {
  StatsServer fake;
  ServerCollector collector(fake);
  auto first = SampleStats();
  first.name = "m\xff";
  auto second = SampleStats();
  second.name = "m\xfe";
  fake.SetStatistics(std::vector<ModelStatistics>{first, second});
  const std::string text = RenderText(collector);
  const std::string series = "nv_inference_request_success{model=\"m\xef\xbf\xbd\",version=\"3\"}";
  const size_t at = text.find(series);
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_EQ(text.find(series, at + 1), std::string::npos) << text;
  // A model really named "m\uFFFD" keeps its own series, whichever comes first.
  auto real = SampleStats();
  real.name = "m\xef\xbf\xbd";
  real.inference_stats.success.count = 9;
  fake.SetStatistics(std::vector<ModelStatistics>{first, real, second});
  EXPECT_EQ(Parse(RenderText(collector)).Get(series), 9);
}

admission::AdmissionReport SampleAdmission() {
  admission::AdmissionReport report;
  report.ready = false;
  admission::ModelAdmission slow;
  slow.name = "mlp";
  slow.version = "3";
  slow.state = admission::AdmissionState::kDegraded;
  slow.reasons = {"self-test missed its budget"};
  admission::ModelAdmission broken;
  broken.name = "cnn";  // failed before any version was loaded
  broken.state = admission::AdmissionState::kUnavailable;
  report.models = {slow, broken};
  return report;
}

TEST(AdmissionFamiliesTest, OneStateGaugePerModelWithTheCurrentStateAtOne) {
  prometheus::TextSerializer serializer;
  const Exposition e = Parse(serializer.Serialize(AdmissionFamilies(SampleAdmission())));
  EXPECT_EQ(e.types.at("fastpath_server_ready"), "gauge");
  EXPECT_EQ(e.types.at("fastpath_model_state"), "gauge");
  EXPECT_EQ(e.Get("fastpath_server_ready"), 0);
  EXPECT_EQ(e.Get(Key("fastpath_model_state", ",state=\"DEGRADED\"")), 1);
  EXPECT_EQ(e.Get(Key("fastpath_model_state", ",state=\"READY\"")), 0);
  EXPECT_EQ(e.Get(Key("fastpath_model_state", ",state=\"UNAVAILABLE\"")), 0);
  EXPECT_EQ(e.Get("fastpath_model_state{model=\"cnn\",version=\"\",state=\"UNAVAILABLE\"}"), 1);
  EXPECT_EQ(e.Get("fastpath_model_state{model=\"cnn\",version=\"\",state=\"READY\"}"), 0);
}

// A model left unloaded by choice (explicit mode) has no state series: the UNAVAILABLE alert
// must not fire for every model an operator did not load.
TEST(AdmissionFamiliesTest, AModelUnloadedByChoiceHasNoStateSeries) {
  admission::AdmissionReport report = SampleAdmission();
  admission::ModelAdmission idle;
  idle.name = "idle";
  idle.state = admission::AdmissionState::kUnavailable;
  idle.reasons = {"unloaded"};
  idle.unloaded = true;
  report.models.push_back(idle);
  prometheus::TextSerializer serializer;
  const Exposition e = Parse(serializer.Serialize(AdmissionFamilies(report)));
  EXPECT_FALSE(e.Has("fastpath_model_state{model=\"idle\",version=\"\",state=\"UNAVAILABLE\"}"));
  EXPECT_EQ(e.Get("fastpath_model_state{model=\"cnn\",version=\"\",state=\"UNAVAILABLE\"}"), 1);
}

TEST(AdmissionFamiliesTest, RolloutDecisionsAreCountedByModelAndOutcome) {
  admission::AdmissionReport report = SampleAdmission();
  report.rollout_decisions = {{"mlp", "passed", 2}, {"mlp", "refused", 1}};
  prometheus::TextSerializer serializer;
  const Exposition e = Parse(serializer.Serialize(AdmissionFamilies(report)));
  EXPECT_EQ(e.types.at("fastpath_rollout_decisions_total"), "counter");
  EXPECT_EQ(e.Get("fastpath_rollout_decisions_total{model=\"mlp\",outcome=\"passed\"}"), 2);
  EXPECT_EQ(e.Get("fastpath_rollout_decisions_total{model=\"mlp\",outcome=\"refused\"}"), 1);
  EXPECT_FALSE(Parse(serializer.Serialize(AdmissionFamilies(SampleAdmission())))
                   .types.count("fastpath_rollout_decisions_total"));
}

// Before the leak window is covered, the verdict is "not suspected, slope 0" for want of
// samples: exported, it read as a measured flat line for the window's first 30 minutes.
TEST(AdmissionFamiliesTest, ALeakVerdictIsExportedOnceTheWindowIsJudged) {
  admission::AdmissionReport report = SampleAdmission();
  backend::MemoryStats memory;
  memory.device = "cpu";
  report.models[0].instance_memory = {memory};
  admission::LeakVerdict leak;
  leak.reason = "the window is not covered yet";
  report.models[0].instance_leaks = {leak};
  prometheus::TextSerializer serializer;
  const std::string early = serializer.Serialize(AdmissionFamilies(report));
  EXPECT_EQ(early.find("fastpath_memory_leak_suspected{"), std::string::npos) << early;
  EXPECT_EQ(early.find("fastpath_memory_leak_slope_bytes_per_second{"), std::string::npos);
  EXPECT_NE(early.find("fastpath_memory_in_use_bytes{"), std::string::npos) << early;
  report.models[0].instance_leaks[0]->judged = true;
  const std::string judged = serializer.Serialize(AdmissionFamilies(report));
  EXPECT_NE(judged.find("fastpath_memory_leak_suspected{"), std::string::npos) << judged;
}

TEST(AdmissionFamiliesTest, NoModelsStillSaysWhetherTheServerIsReady) {
  admission::AdmissionReport report;
  report.ready = true;
  const auto families = AdmissionFamilies(report);
  ASSERT_EQ(families.size(), 1u);
  EXPECT_EQ(families[0].name, "fastpath_server_ready");
  EXPECT_EQ(families[0].metric.at(0).gauge.value, 1);
}

TEST(AdmissionFamiliesTest, MemoryPerInstanceAndOutOfMemoryRunsPerVersion) {
  admission::AdmissionReport report = SampleAdmission();
  backend::MemoryStats capped;
  capped.device = "cpu";
  capped.in_use_bytes = 1000;
  capped.reserved_bytes = 4096;
  capped.peak_bytes = 3000;
  capped.limit_bytes = 1 << 20;
  capped.arena_extensions = 3;
  capped.out_of_memory_runs = 2;
  backend::MemoryStats uncapped = capped;
  uncapped.device = "gpu1";
  uncapped.limit_bytes.reset();
  uncapped.out_of_memory_runs = 5;
  // Instance 1's backend cannot tell: no samples for it, and no zeros either.
  report.models[0].instance_memory = {capped, std::nullopt, uncapped};
  prometheus::TextSerializer serializer;
  const Exposition e = Parse(serializer.Serialize(AdmissionFamilies(report)));
  const std::string i0 = "{model=\"mlp\",version=\"3\",model_instance=\"0\",device=\"cpu\"}";
  const std::string i2 = "{model=\"mlp\",version=\"3\",model_instance=\"2\",device=\"gpu1\"}";
  EXPECT_EQ(e.types.at("fastpath_memory_in_use_bytes"), "gauge");
  EXPECT_EQ(e.types.at("fastpath_memory_oom_total"), "counter");
  EXPECT_EQ(e.Get("fastpath_memory_in_use_bytes" + i0), 1000);
  EXPECT_EQ(e.Get("fastpath_memory_reserved_bytes" + i0), 4096);
  EXPECT_EQ(e.Get("fastpath_memory_peak_bytes" + i0), 3000);
  EXPECT_EQ(e.Get("fastpath_memory_limit_bytes" + i0), 1 << 20);
  EXPECT_FALSE(e.Has("fastpath_memory_limit_bytes" + i2));
  EXPECT_EQ(e.Get("fastpath_memory_arena_extensions_total" + i2), 3);
  EXPECT_EQ(e.Get("fastpath_memory_oom_total{model=\"mlp\",version=\"3\"}"), 7);
  for (const auto& [key, value] : e.samples) {
    EXPECT_EQ(key.find("model_instance=\"1\""), std::string::npos) << key;
    EXPECT_EQ(key.find("fastpath_memory_oom_total{model=\"cnn\""), std::string::npos) << key;
  }
}

TEST(HeapFamiliesTest, OneGaugePerKindOfHeapBytes) {
  HeapStatistics heap;
  heap.allocated = 1000;
  heap.active = 4096;
  heap.resident = 8192;
  heap.retained = 65536;
  const Exposition e = Parse(prometheus::TextSerializer().Serialize(HeapFamilies(heap)));
  EXPECT_EQ(e.types.at("fastpath_heap_bytes"), "gauge");
  EXPECT_EQ(e.Get("fastpath_heap_bytes{kind=\"allocated\"}"), 1000);
  EXPECT_EQ(e.Get("fastpath_heap_bytes{kind=\"active\"}"), 4096);
  EXPECT_EQ(e.Get("fastpath_heap_bytes{kind=\"resident\"}"), 8192);
  EXPECT_EQ(e.Get("fastpath_heap_bytes{kind=\"retained\"}"), 65536);
  EXPECT_EQ(e.samples.size(), 4u);
}

// A malloc other than jemalloc keeps no statistics fastpath reads: no family, not zeros.
TEST(HeapFamiliesTest, NoStatisticsNoFamily) { EXPECT_TRUE(HeapFamilies(std::nullopt).empty()); }

// The unit tests do not link jemalloc, so the scrape-time reading is absent here; the
// server's is checked by tests/integration/metrics_test.cc.
TEST(HeapFamiliesTest, ThisTestProcessReadsNoJemallocStatistics) {
  EXPECT_FALSE(ReadHeapStatistics().has_value()) << DescribeProcessAllocator();
}

// Prometheus's process metrics, under the names and types its client libraries use (standard
// dashboards and alerts read them: process_open_fds / process_max_fds).
TEST(ProcessFamiliesTest, TheStandardNamesAndTypes) {
  ProcessStatistics process;
  process.cpu_seconds = 12.5;
  process.start_time_seconds = 1.7e9;
  process.resident_bytes = 200 << 20;
  process.virtual_bytes = uint64_t{3} << 30;
  process.open_fds = 97;
  process.max_fds = 1024;
  const Exposition e = Parse(prometheus::TextSerializer().Serialize(ProcessFamilies(process)));
  EXPECT_EQ(e.types.at("process_cpu_seconds_total"), "counter");
  EXPECT_EQ(e.Get("process_cpu_seconds_total"), 12.5);
  EXPECT_EQ(e.types.at("process_start_time_seconds"), "gauge");
  EXPECT_EQ(e.Get("process_start_time_seconds"), 1.7e9);
  EXPECT_EQ(e.Get("process_resident_memory_bytes"), 200 << 20);
  EXPECT_EQ(e.Get("process_virtual_memory_bytes"), double(uint64_t{3} << 30));
  EXPECT_EQ(e.types.at("process_open_fds"), "gauge");
  EXPECT_EQ(e.Get("process_open_fds"), 97);
  EXPECT_EQ(e.Get("process_max_fds"), 1024);
  EXPECT_EQ(e.samples.size(), 6u);
}

// What /proc cannot give is left out, not written as zero (an unlimited soft limit, say).
TEST(ProcessFamiliesTest, WhatIsUnknownIsLeftOut) {
  ProcessStatistics process;
  process.open_fds = 5;
  const Exposition e = Parse(prometheus::TextSerializer().Serialize(ProcessFamilies(process)));
  EXPECT_EQ(e.Get("process_open_fds"), 5);
  EXPECT_EQ(e.samples.size(), 1u);
  EXPECT_TRUE(ProcessFamilies(ProcessStatistics{}).empty());
}

// This test process, read from /proc.
TEST(ProcessFamiliesTest, ThisProcessIsReadFromProc) {
  const ProcessStatistics process = ReadProcessStatistics();
  ASSERT_TRUE(process.open_fds.has_value());
  EXPECT_GE(*process.open_fds, 3u);  // stdin, stdout, stderr
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_cur != RLIM_INFINITY) {
    ASSERT_TRUE(process.max_fds.has_value());
    EXPECT_EQ(*process.max_fds, limit.rlim_cur);
    EXPECT_LE(*process.open_fds, *process.max_fds);
  }
  ASSERT_TRUE(process.resident_bytes.has_value() && process.virtual_bytes.has_value());
  EXPECT_GT(*process.resident_bytes, 0u);
  EXPECT_GE(*process.virtual_bytes, *process.resident_bytes);
  ASSERT_TRUE(process.cpu_seconds.has_value());
  EXPECT_GE(*process.cpu_seconds, 0);
  ASSERT_TRUE(process.start_time_seconds.has_value());
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // Started before now, and this test binary has not run for a day.
  EXPECT_LE(*process.start_time_seconds, now + 1);
  EXPECT_GT(*process.start_time_seconds, now - 86400);
}

// Every family this module can write, each optional one present (a memory cap, the leak
// and fragmentation verdicts), through promtool's naming lint: a scrape of a real server
// (tests/integration/metrics_test.cc) shows only what that server has.
TEST(PromtoolLintTest, EveryFastpathFamilyPassesPromtoolCheckMetrics) {
  admission::AdmissionReport report = SampleAdmission();
  backend::MemoryStats memory;
  memory.device = "cpu";
  memory.in_use_bytes = 1000;
  memory.reserved_bytes = 4096;
  memory.peak_bytes = 3000;
  memory.limit_bytes = 1 << 20;
  memory.arena_extensions = 3;
  memory.out_of_memory_runs = 2;
  report.models[0].instance_memory = {memory};
  admission::LeakVerdict leak;
  leak.judged = true;
  leak.suspected = true;
  leak.slope_bytes_per_second = 12.5;
  report.models[0].instance_leaks = {leak};
  admission::FragmentationVerdict fragmentation;
  fragmentation.suspected = true;
  report.models[0].instance_fragmentation = {fragmentation};
  report.rollout_decisions = {{"mlp", "refused", 1}};
  // One GPU with every reading, throttled, after an XID.
  gpu::GpuHealth health;
  gpu::GpuSample g;
  g.uuid = "GPU-lint";
  g.temperature_c = 80;
  g.sm_clock_mhz = 1400;
  g.mem_clock_mhz = 2600;
  g.utilization_ratio = 0.5;
  g.memory_used_bytes = 1 << 30;
  g.memory_total_bytes = uint64_t{80} << 30;
  g.power_w = 650;
  g.power_limit_w = 700;
  g.clocks_event_reasons = 0x40;
  g.ecc_uncorrected_volatile = 0;
  g.remapped_rows_uncorrectable = 0;
  g.violation_seconds = {{"thermal", 1.5}, {"power", 0}};
  health.Add({g}, std::chrono::milliseconds(0));
  g.xids = {79};
  health.Add({g}, std::chrono::milliseconds(1000));
  report.gpu_telemetry = "test";
  report.gpus = health.Statuses();

  std::vector<prometheus::MetricFamily> families = StatisticsFamilies({SampleStats()});
  for (auto& f : AdmissionFamilies(report)) families.push_back(std::move(f));
  for (auto& f : GpuFamilies(report)) families.push_back(std::move(f));
  for (auto& f : HeapFamilies(HeapStatistics{1, 2, 3, 4})) families.push_back(std::move(f));
  for (auto& f : ProcessFamilies(ReadProcessStatistics())) families.push_back(std::move(f));
  const std::string text = prometheus::TextSerializer().Serialize(families);
  const Exposition e = Parse(text);
  for (const char* name : {"fastpath_inference_request_duration_seconds",
                           "fastpath_inference_queue_duration_seconds",
                           "fastpath_inference_compute_infer_duration_seconds",
                           "fastpath_inference_batch_size",
                           "fastpath_server_ready",
                           "fastpath_model_state",
                           "fastpath_memory_in_use_bytes",
                           "fastpath_memory_reserved_bytes",
                           "fastpath_memory_peak_bytes",
                           "fastpath_memory_limit_bytes",
                           "fastpath_memory_arena_extensions_total",
                           "fastpath_memory_fragmentation_ratio",
                           "fastpath_memory_fragmentation_suspected",
                           "fastpath_memory_leak_suspected",
                           "fastpath_memory_leak_slope_bytes_per_second",
                           "fastpath_memory_oom_total",
                           "fastpath_gpu_temperature_celsius",
                           "fastpath_gpu_sm_clock_mhz",
                           "fastpath_gpu_memory_clock_mhz",
                           "fastpath_gpu_utilization_ratio",
                           "fastpath_gpu_memory_used_bytes",
                           "fastpath_gpu_memory_total_bytes",
                           "fastpath_gpu_power_watts",
                           "fastpath_gpu_power_limit_watts",
                           "fastpath_gpu_ecc_uncorrected_total",
                           "fastpath_gpu_remapped_rows_uncorrectable",
                           "fastpath_gpu_clocks_event_active",
                           "fastpath_gpu_throttle_seconds_total",
                           "fastpath_gpu_violation_seconds_total",
                           "fastpath_gpu_xid_total",
                           "fastpath_gpu_quarantined",
                           "fastpath_rollout_decisions_total",
                           "fastpath_heap_bytes",
                           "process_cpu_seconds_total",
                           "process_start_time_seconds",
                           "process_resident_memory_bytes",
                           "process_virtual_memory_bytes",
                           "process_open_fds",
                           "process_max_fds",
                           "nv_gpu_utilization",
                           "nv_gpu_memory_total_bytes",
                           "nv_gpu_memory_used_bytes",
                           "nv_gpu_power_usage",
                           "nv_gpu_power_limit"}) {
    EXPECT_EQ(e.types.count(name), 1u) << name << " is not in the text, so not linted";
  }
  // Each fastpath_ counter ends in _total (promtool checks it too; this says which).
  for (const auto& [name, type] : e.types) {
    if (name.rfind("fastpath_", 0) == 0 && type == "counter") {
      EXPECT_TRUE(name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0) << name;
    }
  }
  EXPECT_TRUE(testing::FastpathNamesPassPromtool(text)) << text;
}

TEST(ServerCollectorTest, ScrapesCarryTheFacadesAdmission) {
  class AdmittingServer : public StatsServer {
   public:
    admission::AdmissionReport Admission() const override { return SampleAdmission(); }
  } fake;
  fake.SetStatistics(std::vector<ModelStatistics>{SampleStats()});
  const Exposition e = Parse(RenderText(ServerCollector(fake)));
  EXPECT_EQ(e.Get(Key("nv_inference_request_success")), 5);
  EXPECT_EQ(e.Get(Key("fastpath_model_state", ",state=\"DEGRADED\"")), 1);
}

TEST(ServerCollectorTest, FacadeErrorYieldsNoFamilies) {
  StatsServer fake;
  fake.SetStatistics(Unavailable("shutting down"));
  EXPECT_TRUE(ServerCollector(fake).Collect().empty());
}

struct Fetched {
  int status = 0;
  std::string content_type;
  std::string body;
};

// Sends each request on one keep-alive connection and reads every answer.
std::vector<Fetched> Send(int port,
                          const std::vector<std::pair<http::verb, std::string>>& requests) {
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  std::vector<Fetched> out;
  beast::flat_buffer buffer;
  for (const auto& [verb, target] : requests) {
    http::request<http::empty_body> req{verb, target, 11};
    req.set(http::field::host, "127.0.0.1");
    http::write(socket, req);
    http::response_parser<http::string_body> parser;
    parser.skip(verb == http::verb::head);
    http::read(socket, buffer, parser);
    const auto& res = parser.get();
    out.push_back({static_cast<int>(res.result_int()), std::string(res[http::field::content_type]),
                   res.body()});
  }
  return out;
}

Fetched Get(int port, const std::string& target) {
  return Send(port, {{http::verb::get, target}}).front();
}

TEST(MetricsServerTest, ServesMetricsOnAnEphemeralPort) {
  StatsServer fake;
  fake.SetStatistics(std::vector<ModelStatistics>{SampleStats()});
  auto metrics = MetricsServer::Start(fake, {"127.0.0.1", 0});
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
  ASSERT_GT((*metrics)->port(), 0);
  const Fetched r = Get((*metrics)->port(), "/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.content_type.find("text/plain"), std::string::npos) << r.content_type;
  const Exposition e = Parse(r.body);
  EXPECT_EQ(e.Get(Key("nv_inference_request_success")), 5);
  EXPECT_EQ(e.Get(Key("nv_inference_request_failure", ",reason=\"REJECTED\"")), 3);
}

TEST(MetricsServerTest, KeepAliveScrapesSeeNewValuesAndOtherPathsAreRefused) {
  StatsServer fake;
  fake.SetStatistics(std::vector<ModelStatistics>{SampleStats()});
  auto metrics = MetricsServer::Start(fake, {"127.0.0.1", 0});
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
  auto first = Send((*metrics)->port(), {{http::verb::get, "/metrics"},
                                         {http::verb::get, "/metrics?name[]=x"},
                                         {http::verb::head, "/metrics"},
                                         {http::verb::get, "/v2/health/ready"},
                                         {http::verb::post, "/metrics"}});
  ASSERT_EQ(first.size(), 5u);
  EXPECT_EQ(first[0].status, 200);
  EXPECT_EQ(first[1].status, 200);  // a query string is ignored
  EXPECT_EQ(first[2].status, 200);
  EXPECT_EQ(first[2].body, "");
  EXPECT_EQ(first[3].status, 404);
  EXPECT_EQ(first[4].status, 405);

  auto more = SampleStats();
  more.inference_stats.success.count = 11;
  fake.SetStatistics(std::vector<ModelStatistics>{more});
  EXPECT_EQ(
      Parse(Get((*metrics)->port(), "/metrics").body).Get(Key("nv_inference_request_success")), 11);
}

TEST(MetricsServerTest, GarbageIsAnsweredWith400) {
  StatsServer fake;
  auto metrics = MetricsServer::Start(fake, {"127.0.0.1", 0});
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect(
      {asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>((*metrics)->port())});
  asio::write(socket, asio::buffer(std::string("NOT HTTP AT ALL\r\n\r\n")));
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(socket, buffer, res);
  EXPECT_EQ(res.result_int(), 400u);
  EXPECT_NE(res.body().find("malformed"), std::string::npos) << res.body();
}

TEST(MetricsServerTest, StopsWithAConnectionStillOpen) {
  StatsServer fake;
  auto metrics = MetricsServer::Start(fake, {"127.0.0.1", 0});
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
  asio::io_context io;
  asio::ip::tcp::socket idle(io);
  idle.connect(
      {asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>((*metrics)->port())});
  metrics->reset();  // must not wait for the idle client
  SUCCEED();
}

TEST(MetricsServerTest, BadAddressIsInvalidArgument) {
  StatsServer fake;
  auto metrics = MetricsServer::Start(fake, {"not-an-address", 0});
  ASSERT_FALSE(metrics.ok());
  EXPECT_EQ(metrics.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(metrics.status().message().find("not-an-address"), std::string::npos);
}

TEST(MetricsServerTest, PortInUseIsAnErrorNotACrash) {
  StatsServer fake;
  auto first = MetricsServer::Start(fake, {"127.0.0.1", 0});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = MetricsServer::Start(fake, {"127.0.0.1", (*first)->port()});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find(std::to_string((*first)->port())), std::string::npos)
      << second.status().message();
}

}  // namespace
}  // namespace fastpath::metrics
