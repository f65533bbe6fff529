#include "fastpath/bench/report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <regex>
#include <sstream>

#include "fastpath/bench/calibration.h"
#include "fastpath/bench/client.h"
#include "xml_check.h"

namespace fastpath::bench {
namespace {

BenchPoint Point(int64_t concurrency, double ips, double p50, double p99) {
  BenchPoint p;
  p.mode = "concurrency";
  p.concurrency = concurrency;
  p.throughput_rps = ips;
  p.throughput_ips = ips;
  p.latency.count = 100;
  p.latency.p50_us = p50;
  p.latency.p99_us = p99;
  p.requests = 100;
  p.stable = true;
  p.trials = 3;
  return p;
}

BenchReport SampleReport() {
  BenchReport r;
  r.label = "cnn http binary";
  r.model = "cnn_classifier";
  r.transport = "http";
  r.encoding = "binary";
  r.url = "http://127.0.0.1:8000";
  r.command = "fastpath bench -m cnn_classifier --concurrency 1,16";
  r.seed = 7;
  r.points.push_back(Point(1, 500, 1900, 2500));
  BenchPoint p16 = Point(16, 900, 17000, 25000);
  p16.errors = 3;
  p16.errors_by_kind = {{"http_503", 2}, {"io", 1}};
  p16.error_samples = {{"http_503", "{\"error\":\"queue full, \\\"x\\\"\"}"}};
  p16.server.available = true;
  p16.server.requests = 1800;
  p16.server.executions = 200;
  p16.server.queue_us = 15000;
  p16.server.compute_infer_us = 1700;
  p16.server.average_batch = 9;
  p16.server.batch_histogram = {{8, 100}, {10, 100}};
  r.points.push_back(p16);
  BenchPoint ip = Point(1, 1000, 900, 1100);
  ip.mode = "in_process";
  ip.batch_size = 8;
  r.in_process.push_back(ip);
  ComputeEfficiency(&r);
  return r;
}

// SampleReport with --collect-metrics: c=1 saw two GPUs (the second without a power reading),
// c=16 had one failed scrape of three and no GPU series.
BenchReport GpuMetricsReport() {
  BenchReport r = SampleReport();
  PointGpuMetrics two;
  two.scrapes = 4;
  PointGpu a;
  a.gpu = "0";
  a.uuid = "GPU-aa";
  a.scrapes = 4;
  a.utilization_avg = 0.87;
  a.power_avg_w = 312.5;
  a.memory_used_max_bytes = 2.5 * 1024 * 1024 * 1024;
  a.memory_total_bytes = 80.0 * 1024 * 1024 * 1024;
  PointGpu b;
  b.gpu = "1";
  b.scrapes = 4;
  b.utilization_avg = 0.5;
  two.gpus = {a, b};
  r.points[0].gpu_metrics = two;
  PointGpuMetrics none;
  none.scrapes = 3;
  none.failed = 1;
  none.error = "GET http://h:8002/metrics: connection refused";
  r.points[1].gpu_metrics = none;
  return r;
}

TEST(DiffStatsTest, SplitsQueueAndComputeAndCountsBatches) {
  ModelStatsSnapshot before;
  before.success = {10, 0};
  before.queue = {10, 1000000};
  before.compute_infer = {10, 5000000};
  before.execution_count = 10;
  before.batch_executions = {{1, 10}};
  ModelStatsSnapshot after = before;
  after.success = {110, 0};
  after.queue = {110, 1000000 + 100 * 2000};            // 2 us average queue
  after.compute_input = {100, 100 * 1000};              // 1 us
  after.compute_infer = {110, 5000000 + 100 * 50000};   // 50 us
  after.compute_output = {100, 100 * 3000};             // 3 us
  after.execution_count = 40;
  after.batch_executions = {{1, 20}, {4, 10}, {5, 10}};  // +10 x1, +10 x4, +10 x5
  ServerSplit s = DiffStats(before, after);
  ASSERT_TRUE(s.available);
  EXPECT_EQ(s.requests, 100u);
  EXPECT_EQ(s.executions, 30u);
  EXPECT_DOUBLE_EQ(s.queue_us, 2);
  EXPECT_DOUBLE_EQ(s.compute_input_us, 1);
  EXPECT_DOUBLE_EQ(s.compute_infer_us, 50);
  EXPECT_DOUBLE_EQ(s.compute_output_us, 3);
  EXPECT_DOUBLE_EQ(s.compute_us(), 54);
  EXPECT_DOUBLE_EQ(s.average_batch, (10 * 1 + 10 * 4 + 10 * 5) / 30.0);
  EXPECT_EQ(s.batch_histogram, (std::map<uint64_t, uint64_t>{{1, 10}, {4, 10}, {5, 10}}));
}

TEST(DiffStatsTest, CountersGoingBackwardsAreUnavailable) {
  ModelStatsSnapshot before;
  before.success = {100, 0};
  ModelStatsSnapshot after;  // a reload reset the counters
  after.success = {5, 0};
  EXPECT_FALSE(DiffStats(before, after).available);
}

TEST(EfficiencyTest, ServerThroughputOverTheBestInProcess) {
  BenchReport r = SampleReport();
  ASSERT_TRUE(r.best_in_process_ips);
  EXPECT_DOUBLE_EQ(*r.best_in_process_ips, 1000);
  ASSERT_TRUE(r.points[0].efficiency);
  EXPECT_DOUBLE_EQ(*r.points[0].efficiency, 0.5);
  EXPECT_DOUBLE_EQ(*r.points[1].efficiency, 0.9);
  EXPECT_DOUBLE_EQ(*r.efficiency, 0.9);
  EXPECT_FALSE(r.efficiency_vs_cpu_ceiling);  // no in-process point measured CPU time
  BenchReport cpu = r;
  cpu.in_process[0].cpu_ceiling_ips = 1800;
  ComputeEfficiency(&cpu);
  ASSERT_TRUE(cpu.best_in_process_cpu_ceiling_ips);
  EXPECT_DOUBLE_EQ(*cpu.best_in_process_cpu_ceiling_ips, 1800);
  ASSERT_TRUE(cpu.efficiency_vs_cpu_ceiling);
  EXPECT_DOUBLE_EQ(*cpu.efficiency_vs_cpu_ceiling, 0.5);
  auto back = ReadReportsJson(ReportsToJson({cpu}), "cpu.json");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ((*back)[0].in_process[0].cpu_ceiling_ips, std::optional<double>(1800));
  EXPECT_EQ((*back)[0].efficiency_vs_cpu_ceiling, std::optional<double>(0.5));
  BenchReport no_ceiling = r;
  no_ceiling.in_process.clear();
  ComputeEfficiency(&no_ceiling);
  EXPECT_FALSE(no_ceiling.efficiency);
  EXPECT_FALSE(no_ceiling.points[0].efficiency);
}

BenchPoint InProcess(int64_t threads, int64_t batch, double ips) {
  BenchPoint p = Point(1, ips / batch, 900, 1100);
  p.mode = "in_process";
  p.batch_size = batch;
  p.throughput_ips = ips;
  p.intra_op_threads = threads;
  return p;
}

// A report with in-process points at the model's own setting (1 thread) and at 2 threads.
BenchReport ThreadSweepReport() {
  BenchReport r = SampleReport();  // server points at 500 and 900 infer/s
  r.in_process_own_threads = 1;
  r.in_process = {InProcess(1, 1, 800), InProcess(1, 8, 1000), InProcess(2, 1, 1500),
                  InProcess(2, 8, 1400)};
  r.in_process[0].cpu_ceiling_ips = 950;  // one thread: CPU time measured
  r.in_process[1].cpu_ceiling_ips = 1200;
  ComputeEfficiency(&r);
  return r;
}

TEST(EfficiencyTest, TheCeilingIsTheBestOverEveryThreadCountAndBatchSize) {
  const BenchReport r = ThreadSweepReport();
  ASSERT_TRUE(r.best_in_process_ips);
  EXPECT_DOUBLE_EQ(*r.best_in_process_ips, 1500);
  EXPECT_EQ(r.best_in_process_threads, std::optional<int64_t>(2));
  EXPECT_EQ(r.best_in_process_batch_size, std::optional<int64_t>(1));
  ASSERT_TRUE(r.efficiency);
  EXPECT_DOUBLE_EQ(*r.efficiency, 900.0 / 1500);
  EXPECT_DOUBLE_EQ(*r.points[0].efficiency, 500.0 / 1500);
  // The model's own setting: the best of the 1-thread points, and the server over it.
  ASSERT_TRUE(r.in_process_own_ips);
  EXPECT_DOUBLE_EQ(*r.in_process_own_ips, 1000);
  ASSERT_TRUE(r.efficiency_vs_own_setting);
  EXPECT_DOUBLE_EQ(*r.efficiency_vs_own_setting, 0.9);
  // The CPU-time ceiling is as before: the best of the points that measured it.
  EXPECT_EQ(r.best_in_process_cpu_ceiling_ips, std::optional<double>(1200));
  EXPECT_EQ(r.efficiency_vs_cpu_ceiling, std::optional<double>(0.75));

  // The best at the own setting: both ceilings are the same point.
  BenchReport own_best = r;
  own_best.in_process[1].throughput_ips = 2000;
  ComputeEfficiency(&own_best);
  EXPECT_EQ(own_best.best_in_process_ips, std::optional<double>(2000));
  EXPECT_EQ(own_best.best_in_process_threads, std::optional<int64_t>(1));
  EXPECT_EQ(own_best.best_in_process_batch_size, std::optional<int64_t>(8));
  EXPECT_EQ(own_best.in_process_own_ips, std::optional<double>(2000));
  EXPECT_EQ(own_best.efficiency, own_best.efficiency_vs_own_setting);

  // A tie keeps the point measured first (the own setting); a point that completed no
  // request is never the ceiling, however fast it says it is.
  BenchReport tie = r;
  tie.in_process[1].throughput_ips = 1500;
  tie.in_process.push_back(InProcess(3, 1, 9000));
  tie.in_process.back().requests = 0;
  ComputeEfficiency(&tie);
  EXPECT_EQ(tie.best_in_process_ips, std::optional<double>(1500));
  EXPECT_EQ(tie.best_in_process_threads, std::optional<int64_t>(1));
  EXPECT_EQ(tie.best_in_process_batch_size, std::optional<int64_t>(8));

  // The own setting among the sweep's counts (a config with 2 threads): its points are the
  // 2-thread ones.
  BenchReport two = r;
  two.in_process_own_threads = 2;
  ComputeEfficiency(&two);
  EXPECT_EQ(two.in_process_own_ips, std::optional<double>(1500));
  EXPECT_DOUBLE_EQ(*two.efficiency_vs_own_setting, 0.6);

  // A report from before the sweep: no point has a thread count and neither has the report,
  // so every point is the own setting and both ceilings are the same.
  BenchReport old = SampleReport();
  ASSERT_FALSE(old.in_process[0].intra_op_threads);
  EXPECT_FALSE(old.best_in_process_threads);
  EXPECT_EQ(old.best_in_process_batch_size, std::optional<int64_t>(8));
  EXPECT_EQ(old.in_process_own_ips, std::optional<double>(1000));
  EXPECT_EQ(old.efficiency_vs_own_setting, old.efficiency);

  // No in-process point: nothing to compare with.
  BenchReport none = r;
  none.in_process.clear();
  ComputeEfficiency(&none);
  EXPECT_FALSE(none.best_in_process_ips);
  EXPECT_FALSE(none.best_in_process_threads);
  EXPECT_FALSE(none.best_in_process_batch_size);
  EXPECT_FALSE(none.in_process_own_ips);
  EXPECT_FALSE(none.efficiency_vs_own_setting);
  EXPECT_FALSE(none.efficiency);
}

TEST(JsonTest, RoundTripsTheThreadSweep) {
  const BenchReport r = ThreadSweepReport();
  const std::string json = ReportsToJson({r});
  EXPECT_NE(json.find("\"intra_op_threads\": 2"), std::string::npos) << json;
  EXPECT_NE(json.find("\"efficiency_vs_own_setting\": 0.9"), std::string::npos) << json;
  auto back = ReadReportsJson(json, "sweep.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  const BenchReport& b = (*back)[0];
  ASSERT_EQ(b.in_process.size(), 4u);
  for (size_t i = 0; i < b.in_process.size(); ++i) {
    EXPECT_EQ(b.in_process[i].intra_op_threads, r.in_process[i].intra_op_threads) << i;
    EXPECT_EQ(b.in_process[i].batch_size, r.in_process[i].batch_size) << i;
  }
  EXPECT_FALSE(b.points[0].intra_op_threads);  // server points have none
  EXPECT_EQ(b.in_process_own_threads, std::optional<int64_t>(1));
  EXPECT_EQ(b.best_in_process_ips, std::optional<double>(1500));
  EXPECT_EQ(b.best_in_process_threads, std::optional<int64_t>(2));
  EXPECT_EQ(b.best_in_process_batch_size, std::optional<int64_t>(1));
  EXPECT_EQ(b.in_process_own_ips, std::optional<double>(1000));
  EXPECT_EQ(b.efficiency_vs_own_setting, std::optional<double>(0.9));
  EXPECT_EQ(b.efficiency, std::optional<double>(0.6));
  EXPECT_EQ(b.efficiency_vs_cpu_ceiling, std::optional<double>(0.75));
  // Recomputed from what was read back: the same choice.
  BenchReport again = b;
  ComputeEfficiency(&again);
  EXPECT_EQ(again.best_in_process_threads, std::optional<int64_t>(2));
  EXPECT_EQ(again.in_process_own_ips, std::optional<double>(1000));

  // A file from before the sweep has none of the new fields: they stay absent.
  auto old = ReadReportsJson(R"({"runs": [{"label": "old", "points": [],
      "in_process": [{"mode": "in_process", "batch_size": 4, "throughput_ips": 10,
                      "requests": 5, "cpu_ceiling_ips": null}],
      "best_in_process_ips": 10, "efficiency": null}]})",
                             "old.json");
  ASSERT_TRUE(old.ok()) << old.status().message();
  const BenchReport& o = (*old)[0];
  ASSERT_EQ(o.in_process.size(), 1u);
  EXPECT_FALSE(o.in_process[0].intra_op_threads);
  EXPECT_FALSE(o.in_process_own_threads);
  EXPECT_FALSE(o.best_in_process_threads);
  EXPECT_FALSE(o.best_in_process_batch_size);
  EXPECT_FALSE(o.in_process_own_ips);
  EXPECT_FALSE(o.efficiency_vs_own_setting);
  EXPECT_EQ(o.best_in_process_ips, std::optional<double>(10));
  // ... and written again they are null, not 0.
  const std::string rewritten = ReportsToJson(*old);
  EXPECT_NE(rewritten.find("\"intra_op_threads\": null"), std::string::npos) << rewritten;
  EXPECT_NE(rewritten.find("\"best_in_process_threads\": null"), std::string::npos);
  EXPECT_EQ(rewritten.find("\"intra_op_threads\": 0"), std::string::npos) << rewritten;
}

TEST(JsonTest, RoundTripsEveryField) {
  BenchReport r = SampleReport();
  CalibrationResult cal;
  cal.slo_p99_ms = 40;
  cal.concurrency = 32;
  CalibrationCandidate c;
  c.max_batch_size = 16;
  c.max_queue_delay_us = 2000;
  c.ran = true;
  c.point = Point(32, 1800, 15000, 30000);
  cal.candidates.push_back(c);
  cal.chosen = 0;
  r.calibration = cal;
  const std::string json = ReportsToJson({r, r});
  auto back = ReadReportsJson(json, "test.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), 2u);
  const BenchReport& b = (*back)[1];
  EXPECT_EQ(b.label, r.label);
  EXPECT_EQ(b.model, "cnn_classifier");
  EXPECT_EQ(b.command, r.command);
  EXPECT_EQ(b.seed, 7u);
  ASSERT_EQ(b.points.size(), 2u);
  EXPECT_EQ(b.points[1].concurrency, 16);
  EXPECT_DOUBLE_EQ(b.points[1].latency.p99_us, 25000);
  EXPECT_EQ(b.points[1].errors, 3u);
  EXPECT_EQ(b.points[1].errors_by_kind, r.points[1].errors_by_kind);
  EXPECT_EQ(b.points[1].error_samples, r.points[1].error_samples);
  EXPECT_TRUE(b.points[1].server.available);
  EXPECT_FALSE(b.points[0].server.available);
  EXPECT_DOUBLE_EQ(b.points[1].server.average_batch, 9);
  EXPECT_EQ(b.points[1].server.batch_histogram, r.points[1].server.batch_histogram);
  ASSERT_EQ(b.in_process.size(), 1u);
  EXPECT_EQ(b.in_process[0].batch_size, 8);
  ASSERT_TRUE(b.efficiency);
  EXPECT_DOUBLE_EQ(*b.efficiency, 0.9);
  ASSERT_TRUE(b.calibration);
  ASSERT_EQ(b.calibration->candidates.size(), 1u);
  EXPECT_EQ(b.calibration->candidates[0].max_queue_delay_us, 2000);
  EXPECT_EQ(b.calibration->chosen, std::optional<size_t>(0));
  EXPECT_FALSE(b.points[0].gpu_metrics) << "not collected: absent";
}

TEST(JsonTest, RoundTripsTheGpuMetrics) {
  const BenchReport r = GpuMetricsReport();
  auto back = ReadReportsJson(ReportsToJson({r}), "gpu.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  const BenchReport& b = (*back)[0];
  ASSERT_TRUE(b.points[0].gpu_metrics);
  const PointGpuMetrics& m = *b.points[0].gpu_metrics;
  EXPECT_EQ(m.scrapes, 4);
  EXPECT_EQ(m.failed, 0);
  ASSERT_EQ(m.gpus.size(), 2u);
  EXPECT_EQ(m.gpus[0].uuid, "GPU-aa");
  EXPECT_EQ(m.gpus[0].utilization_avg, 0.87);
  EXPECT_EQ(m.gpus[0].power_avg_w, 312.5);
  EXPECT_EQ(m.gpus[0].memory_used_max_bytes, 2.5 * 1024 * 1024 * 1024);
  EXPECT_EQ(m.gpus[0].memory_total_bytes, 80.0 * 1024 * 1024 * 1024);
  EXPECT_EQ(m.gpus[1].gpu, "1");
  EXPECT_FALSE(m.gpus[1].power_avg_w) << "absent stays absent, not 0";
  ASSERT_TRUE(b.points[1].gpu_metrics);
  EXPECT_EQ(b.points[1].gpu_metrics->failed, 1);
  EXPECT_EQ(b.points[1].gpu_metrics->error, r.points[1].gpu_metrics->error);
  EXPECT_TRUE(b.points[1].gpu_metrics->gpus.empty());
  EXPECT_FALSE(b.in_process[0].gpu_metrics);
}

TEST(JsonTest, RejectsWhatIsNotAReport) {
  EXPECT_FALSE(ReadReportsJson("{", "a.json").ok());
  EXPECT_FALSE(ReadReportsJson("[]", "a.json").ok());
  EXPECT_FALSE(ReadReportsJson("{\"runs\": [1]}", "a.json").ok());
  auto r = ReadReportsJson("{\"runs\": 3}", "a.json");
  EXPECT_NE(r.status().message().find("a.json"), std::string::npos);
}

TEST(CsvTest, AppendingToAFileWithoutTheLastColumnsGivesItTodaysHeader) {
  BenchReport r = SampleReport();
  const std::string header = CsvHeader();
  const std::string old_header = header.substr(0, header.rfind(",intra_op_threads"));
  const std::string old_file = old_header + "\nold,row\n";
  auto appended = AppendCsvRows(old_file, r);
  ASSERT_TRUE(appended.ok()) << appended.status().message();
  EXPECT_EQ(*appended, header + "old,row\n" + ReportCsvRows(r));
  // A file bench wrote today keeps what it has, and an empty one gets the header.
  auto again = AppendCsvRows(*appended, r);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *appended + ReportCsvRows(r));
  EXPECT_EQ(*AppendCsvRows("", r), header + ReportCsvRows(r));
  // Another table is refused, never mixed in.
  auto other = AppendCsvRows("time,temperature\n1,2\n", r);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("not fastpath bench's"), std::string::npos);
  EXPECT_FALSE(AppendCsvRows("label,model,transport,encod\n", r).ok());
}

TEST(CsvTest, HeaderAndOneRowPerPointWithQuoting) {
  BenchReport r = SampleReport();
  const std::string header = CsvHeader();
  const size_t columns = std::count(header.begin(), header.end(), ',') + 1;
  const std::string rows = ReportCsvRows(r);
  std::vector<std::string> lines;
  std::stringstream ss(rows);
  for (std::string line; std::getline(ss, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u);  // in-process + 2 server points
  EXPECT_EQ(lines[0].rfind("cnn http binary,cnn_classifier,http,binary,in_process,", 0), 0u) << lines[0];
  for (const auto& line : lines) {
    // Count commas outside quotes.
    size_t commas = 0;
    bool quoted = false;
    for (char c : line) {
      if (c == '"') quoted = !quoted;
      if (c == ',' && !quoted) ++commas;
    }
    EXPECT_EQ(commas + 1, columns) << line;
  }
  EXPECT_NE(lines[2].find(",http_503:2 io:1,"), std::string::npos) << lines[2];
  // A field with a comma or a quote is quoted, quotes doubled.
  r.label = "cnn, \"fast\"";
  EXPECT_EQ(ReportCsvRows(r).rfind("\"cnn, \"\"fast\"\"\",cnn_classifier,", 0), 0u) << ReportCsvRows(r);
  EXPECT_NE(lines[2].find(",0.900,"), std::string::npos) << lines[2];
  // The last columns: an in-process point's intra-op threads, empty elsewhere; then the
  // --collect-metrics figures, empty when not collected.
  const std::string last =
      ",intra_op_threads,gpu_utilization_avg,gpu_power_avg_w,gpu_memory_used_max_bytes\n";
  EXPECT_EQ(header.substr(header.size() - last.size()), last);
  EXPECT_EQ(lines[0].substr(lines[0].size() - 4), ",,,,") << lines[0];  // no thread count
  EXPECT_EQ(lines[2].substr(lines[2].size() - 4), ",,,,") << lines[2];
  const std::string sweep = ReportCsvRows(ThreadSweepReport());
  EXPECT_NE(sweep.find(",true,2,,,\n"), std::string::npos) << sweep;
  EXPECT_NE(sweep.find(",true,1,,,\n"), std::string::npos) << sweep;
  // Each GPU's figure as GPU:value, joined by ';'; a GPU without the reading is left out.
  const std::string gpus = ReportCsvRows(GpuMetricsReport());
  EXPECT_NE(gpus.find(",,0:0.870;1:0.500,0:312.5,0:2684354560\n"), std::string::npos) << gpus;
}

TEST(SvgTest, WellFormedWithOneSeriesPerLabelAndBothPercentiles) {
  BenchReport a = SampleReport();
  BenchReport b = SampleReport();
  b.label = "cnn grpc <raw> & \"quoted\"";
  b.in_process.clear();
  const std::string svg = RenderLatencyThroughputSvg({a, b}, "cnn: latency vs throughput");
  std::vector<std::string> elements;
  ASSERT_TRUE(WellFormedXml(svg, &elements)) << svg;
  EXPECT_EQ(elements.front(), "svg");
  // Series: a's server curve, a's in-process curve, b's server curve.
  std::regex series(R"re(<g class="series" data-label="([^"]*)">)re");
  std::vector<std::string> labels;
  for (std::sregex_iterator it(svg.begin(), svg.end(), series), end; it != end; ++it) labels.push_back((*it)[1]);
  EXPECT_EQ(labels, (std::vector<std::string>{"cnn http binary", "cnn http binary (in-process)",
                                              "cnn grpc &lt;raw&gt; &amp; &quot;quoted&quot;"}));
  // Each series has a p50 and a p99 polyline; the server series have two points each.
  std::regex p50(R"(<polyline class="p50")");
  std::regex p99(R"(<polyline class="p99")");
  EXPECT_EQ(std::distance(std::sregex_iterator(svg.begin(), svg.end(), p50), std::sregex_iterator()), 3);
  EXPECT_EQ(std::distance(std::sregex_iterator(svg.begin(), svg.end(), p99), std::sregex_iterator()), 3);
  EXPECT_NE(svg.find("throughput (inferences/s)"), std::string::npos);
  EXPECT_NE(svg.find("latency (ms)"), std::string::npos);
  EXPECT_NE(svg.find(">p99 latency<"), std::string::npos);
}

TEST(SvgTest, EachInProcessThreadCountIsACurveOfItsOwn) {
  const std::string svg = RenderLatencyThroughputSvg({ThreadSweepReport()}, "sweep");
  std::regex series(R"re(<g class="series" data-label="([^"]*)">)re");
  std::vector<std::string> labels;
  for (std::sregex_iterator it(svg.begin(), svg.end(), series), end; it != end; ++it) {
    labels.push_back((*it)[1]);
  }
  EXPECT_EQ(labels, (std::vector<std::string>{"cnn http binary",
                                              "cnn http binary (in-process, 1 intra-op thread)",
                                              "cnn http binary (in-process, 2 intra-op threads)"}));
}

TEST(SvgTest, EmptyReportsStillGiveAValidPicture) {
  std::vector<std::string> elements;
  const std::string svg = RenderLatencyThroughputSvg({}, "nothing");
  EXPECT_TRUE(WellFormedXml(svg, &elements)) << svg;
  EXPECT_NE(svg.find("no completed requests"), std::string::npos);
}

TEST(TableTest, ShowsPointsSplitErrorsAndEfficiency) {
  const std::string table = RenderTable(SampleReport());
  EXPECT_NE(table.find("in-process ONNX Runtime"), std::string::npos) << table;
  EXPECT_NE(table.find("c=16"), std::string::npos);
  EXPECT_NE(table.find("http_503:2 io:1"), std::string::npos);
  EXPECT_NE(table.find("8:100 10:100"), std::string::npos);
  EXPECT_NE(table.find("efficiency"), std::string::npos);
  EXPECT_NE(table.find("0.900"), std::string::npos);
  // Before the sweep (no thread counts): no thread headings, the best's batch size.
  EXPECT_EQ(table.find("intra-op threads"), std::string::npos) << table;
  EXPECT_NE(
      table.find("in-process ceiling (the best in-process point): 1000.0 infer/s at batch 8\n"),
      std::string::npos)
      << table;
  EXPECT_EQ(table.find("own setting"), std::string::npos) << table;
}

// Behind its schedule, a rate point says the rate was not reached, not "raise
// --max-threads": more threads do not make a slow server keep the rate.
TEST(TableTest, ARatePointBehindItsScheduleSaysTheRateWasNotReached) {
  BenchReport r;
  r.model = "m";
  BenchPoint behind = Point(64, 1662, 20'000, 55'800);
  behind.mode = "request_rate";
  behind.request_rate = 3000;
  behind.late_sends = 4989;
  BenchPoint kept = behind;
  kept.request_rate = 1700;  // reached within 5%: only some sends were late
  kept.late_sends = 3;
  r.points = {behind, kept};
  const std::string table = RenderTable(r);
  EXPECT_NE(table.find("(the rate was not reached: 4989 sends late; latencies omit the backlog's "
                       "wait)"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("(3 sends late: raise --max-threads)"), std::string::npos) << table;
}

TEST(TableTest, ShowsEachGpuOfAPointAndWhyAPointHasNone) {
  const std::string table = RenderTable(GpuMetricsReport());
  EXPECT_NE(table.find("  c=1 GPU 0 (GPU-aa): utilization 0.87 avg, power 312.5 W avg, memory "
                       "used 2.50 of 80.00 GiB at most (4 scrapes)\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("  c=1 GPU 1: utilization 0.50 avg, power - avg, memory used - of - GiB at "
                       "most (4 scrapes)\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("  c=16 GPU metrics: the server exports no GPU series (3 scrapes)\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("  c=16 GPU metrics: 1 of 3 scrapes failed: GET http://h:8002/metrics: "
                       "connection refused\n"),
            std::string::npos)
      << table;
  EXPECT_EQ(RenderTable(SampleReport()).find("GPU"), std::string::npos) << "not collected";
}

TEST(TableTest, ShowsTheThreadCountsAndBothCeilings) {
  const std::string table = RenderTable(ThreadSweepReport());
  EXPECT_NE(table.find("intra-op threads 1 (the model's own setting):\n"), std::string::npos)
      << table;
  EXPECT_NE(table.find("intra-op threads 2:\n"), std::string::npos) << table;
  EXPECT_LT(table.find("intra-op threads 1"), table.find("intra-op threads 2"));
  EXPECT_NE(table.find("in-process ceiling (the best in-process point): 1500.0 infer/s at 2 "
                       "intra-op threads, batch 1\n"),
            std::string::npos)
      << table;
  EXPECT_NE(
      table.find("in-process at the model's own setting (1 intra-op thread): 1000.0 infer/s\n"),
      std::string::npos)
      << table;
  EXPECT_NE(table.find("efficiency (best server infer/s / the in-process ceiling): 0.600\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("efficiency vs the model's own setting: 0.900\n"), std::string::npos)
      << table;
  // Without a server: the ceilings, no efficiency.
  BenchReport alone = ThreadSweepReport();
  alone.points.clear();
  ComputeEfficiency(&alone);
  const std::string in_process_only = RenderTable(alone);
  EXPECT_NE(in_process_only.find("in-process ceiling"), std::string::npos) << in_process_only;
  EXPECT_EQ(in_process_only.find("efficiency"), std::string::npos) << in_process_only;
  EXPECT_NE(table.find("efficiency vs the in-process CPU-time ceiling: 0.750"), std::string::npos)
      << table;
}

CalibrationCandidate Candidate(bool dynamic, int64_t mbs, int64_t delay, double ips, double p99_ms,
                               uint64_t errors = 0, bool ran = true) {
  CalibrationCandidate c;
  c.dynamic_batching = dynamic;
  c.max_batch_size = mbs;
  c.max_queue_delay_us = delay;
  c.ran = ran;
  c.point = Point(32, ips, p99_ms * 500, p99_ms * 1000);
  c.point.errors = errors;
  return c;
}

TEST(CalibrationTest, PicksTheFastestWithinTheSlo) {
  std::vector<CalibrationCandidate> cands = {
      Candidate(false, 0, 0, 5000, 5),          // baseline: never chosen
      Candidate(true, 8, 0, 900, 10),
      Candidate(true, 16, 2000, 1800, 38),      // best within 40 ms
      Candidate(true, 32, 5000, 1900, 55),      // faster but over the SLO
      Candidate(true, 32, 1000, 2500, 20, 4),   // errors disqualify
      Candidate(true, 32, 0, 3000, 1, 0, false) // did not run
  };
  EXPECT_EQ(ChooseCalibration(cands, 40), std::optional<size_t>(2));
  EXPECT_EQ(ChooseCalibration(cands, 60), std::optional<size_t>(3));
  EXPECT_EQ(ChooseCalibration(cands, 5), std::nullopt);
  // Equal throughput: the lower p99 wins.
  std::vector<CalibrationCandidate> tie = {Candidate(true, 8, 500, 1000, 30), Candidate(true, 8, 0, 1000, 20)};
  EXPECT_EQ(ChooseCalibration(tie, 40), std::optional<size_t>(1));
}

TEST(CalibrationTest, SnippetAndConfigRewrite) {
  const CalibrationCandidate best = Candidate(true, 16, 2000, 1800, 38);
  EXPECT_EQ(BatchingConfigSnippet(best),
            "max_batch_size: 16\ndynamic_batching {\n  max_queue_delay_microseconds: 2000\n}\n");
  const std::string config = R"(name: "cnn"
max_batch_size: 32
input [ { name: "image" data_type: TYPE_FP32 dims: [ 3, 32, 32 ] } ]
output [ { name: "logits" data_type: TYPE_FP32 dims: [ 10 ] } ]
dynamic_batching { preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 100 }
instance_group [ { kind: KIND_CPU count: 2 } ]
)";
  auto rewritten = RewriteBatchingConfig(config, "cnn/config.pbtxt", best);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().message();
  EXPECT_NE(rewritten->find("max_batch_size: 16"), std::string::npos) << *rewritten;
  EXPECT_NE(rewritten->find("max_queue_delay_microseconds: 2000"), std::string::npos) << *rewritten;
  EXPECT_EQ(rewritten->find("preferred_batch_size"), std::string::npos) << *rewritten;
  EXPECT_NE(rewritten->find("count: 2"), std::string::npos) << *rewritten;
  auto baseline = RewriteBatchingConfig(config, "cnn/config.pbtxt", Candidate(false, 0, 0, 0, 0));
  ASSERT_TRUE(baseline.ok());
  EXPECT_EQ(baseline->find("dynamic_batching"), std::string::npos) << *baseline;
  EXPECT_NE(baseline->find("max_batch_size: 32"), std::string::npos) << *baseline;
  auto broken = RewriteBatchingConfig("max_batch_size: [", "cnn/config.pbtxt", best);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("cnn/config.pbtxt"), std::string::npos);
}

ModelMetadata Mlp() {
  ModelMetadata m;
  m.name = "mlp";
  m.inputs = {{"input", DataType::kFp32, {-1, 64}, {}}, {"ids", DataType::kInt64, {-1, -1}, {}}};
  m.outputs = {{"probabilities", DataType::kFp32, {-1, 10}, {}}};
  return m;
}

TEST(InputsTest, DeterministicFromTheSeedWithShapesFromMetadataAndOverrides) {
  const std::map<std::string, std::vector<int64_t>> shapes = {{"ids", {5}}};
  auto a = MakeInputs(Mlp(), shapes, 4, 1, 0);
  ASSERT_TRUE(a.ok()) << a.status().message();
  auto again = MakeInputs(Mlp(), shapes, 4, 1, 0);
  auto other_request = MakeInputs(Mlp(), shapes, 4, 1, 1);
  auto other_seed = MakeInputs(Mlp(), shapes, 4, 2, 0);
  ASSERT_EQ(a->size(), 2u);
  EXPECT_EQ((*a)[0].shape, (std::vector<int64_t>{4, 64}));
  EXPECT_EQ((*a)[1].shape, (std::vector<int64_t>{4, 5}));
  EXPECT_EQ((*a)[0].data.size(), 4u * 64 * sizeof(float));
  EXPECT_EQ((*a)[1].data.size(), 4u * 5 * sizeof(int64_t));
  EXPECT_EQ((*a)[0].data, (*again)[0].data);
  EXPECT_NE((*a)[0].data, (*other_request)[0].data);
  EXPECT_NE((*a)[0].data, (*other_seed)[0].data);
  // FP32 values lie in [-1, 1).
  for (size_t i = 0; i < (*a)[0].data.size(); i += 4) {
    float v;
    std::memcpy(&v, (*a)[0].data.data() + i, 4);
    EXPECT_GE(v, -1.0f);
    EXPECT_LT(v, 1.0f);
  }
  // Full-rank override: its batch dim must be the batch size, which -b sets; another value
  // would be replaced without a word.
  auto full = MakeInputs(Mlp(), {{"ids", {3, 7}}}, 3, 1, 0);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ((*full)[1].shape, (std::vector<int64_t>{3, 7}));
  auto other_batch = MakeInputs(Mlp(), {{"ids", {5, 7}}}, 3, 1, 0);
  ASSERT_FALSE(other_batch.ok());
  EXPECT_NE(
      other_batch.status().message().find("is the batch, which -b sets (3), not 5: give -b 5"),
      std::string::npos)
      << other_batch.status().message();
}

TEST(InputsTest, ClearErrors) {
  auto missing = MakeInputs(Mlp(), {}, 1, 0, 0);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--shape ids"), std::string::npos) << missing.status().message();
  auto unknown = MakeInputs(Mlp(), {{"nope", {1}}}, 1, 0, 0);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("nope"), std::string::npos);
  auto fixed = MakeInputs(Mlp(), {{"input", {65}}, {"ids", {1}}}, 1, 0, 0);
  ASSERT_FALSE(fixed.ok());
  EXPECT_NE(fixed.status().message().find("fixed at 64"), std::string::npos) << fixed.status().message();
}

// A model that does not batch (max_batch_size 0): its leading -1 is a dim of its own, which
// --shape must give in full; -b does not fill it.
TEST(InputsTest, ALeadingDynamicDimOfAModelThatDoesNotBatchIsNotTheBatch) {
  ModelMetadata m;
  m.name = "tokens";
  m.inputs = {{"ids", DataType::kInt64, {-1, 8}, {}}};
  m.max_batch_size = 0;
  auto missing = MakeInputs(m, {}, 1, 0, 0);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--shape ids"), std::string::npos)
      << missing.status().message();
  auto full = MakeInputs(m, {{"ids", {5, 8}}}, 1, 0, 0);
  ASSERT_TRUE(full.ok()) << full.status().message();
  EXPECT_EQ((*full)[0].shape, (std::vector<int64_t>{5, 8}));
  auto short_shape = MakeInputs(m, {{"ids", {8}}}, 1, 0, 0);
  ASSERT_FALSE(short_shape.ok());
  EXPECT_NE(short_shape.status().message().find("give 2 dims"), std::string::npos)
      << short_shape.status().message();
  // Unknown (a server that does not give its config): as before, the batch.
  m.max_batch_size.reset();
  auto unknown = MakeInputs(m, {}, 3, 0, 0);
  ASSERT_TRUE(unknown.ok()) << unknown.status().message();
  EXPECT_EQ((*unknown)[0].shape, (std::vector<int64_t>{3, 8}));
}

TEST(FlagsTest, AddressesAndShapes) {
  auto a = ParseAddress("localhost", 8000);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "localhost");
  EXPECT_EQ(a->port, 8000);
  a = ParseAddress("http://127.0.0.1:9000/", 8000);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 9000);
  a = ParseAddress("[::1]:8001", 8000);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->port, 8001);
  EXPECT_FALSE(ParseAddress("host:0", 8000).ok());
  EXPECT_FALSE(ParseAddress("host:99999", 8000).ok());
  EXPECT_FALSE(ParseAddress(":8000", 8000).ok());
  EXPECT_FALSE(ParseAddress("host:", 8000).ok());
  a = ParseAddress("grpc://h:8001", 8000);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->port, 8001);
  // Another scheme, or a path, is named as such (they read as "cannot resolve", or as a
  // bad port).
  EXPECT_EQ(ParseAddress("ftp://h:8000", 8000).status().message(),
            "--url 'ftp://h:8000': 'ftp://' is not spoken here (plain http:// or grpc://, or no "
            "scheme)");
  EXPECT_NE(ParseAddress("https://h", 8000).status().message().find("'https://' is not spoken"),
            std::string::npos);
  EXPECT_EQ(ParseAddress("http://h:8000/v2/models", 8000).status().message(),
            "--url 'http://h:8000/v2/models': a server's address has no path ('/v2/models'); "
            "give HOST:PORT");
  auto s = ParseShapeOverride("image:3,224,224");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->first, "image");
  EXPECT_EQ(s->second, (std::vector<int64_t>{3, 224, 224}));
  EXPECT_FALSE(ParseShapeOverride("image").ok());
  EXPECT_FALSE(ParseShapeOverride("image:3,,2").ok());
  EXPECT_FALSE(ParseShapeOverride("image:0").ok());
  EXPECT_FALSE(ParseShapeOverride(":3").ok());
}

}  // namespace
}  // namespace fastpath::bench
