#include "fastpath/bench/load_generator.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

namespace fastpath::bench {
namespace {

using Clock = std::chrono::steady_clock;

// What the workers recorded since the last collection. One per worker, so that the
// workers never contend with each other, only (briefly) with the collecting thread.
struct WorkerLog {
  std::mutex mu;
  std::vector<int64_t> latencies_ns;
  std::map<std::string, uint64_t> errors;
  std::map<std::string, std::string> samples;
  uint64_t late = 0;
  int64_t cpu_ns = 0;
  uint64_t cpu_runs = 0;
};

struct Window {
  std::vector<int64_t> latencies_ns;
  std::map<std::string, uint64_t> errors;
  std::map<std::string, std::string> samples;
  uint64_t late = 0;
  double seconds = 0;
  int64_t cpu_ns = 0;
  uint64_t cpu_runs = 0;
};

void Record(WorkerLog& log, const InferOutcome& outcome, int64_t latency_ns) {
  std::lock_guard<std::mutex> lock(log.mu);
  if (outcome.ok) {
    log.latencies_ns.push_back(latency_ns);
    if (outcome.cpu_ns > 0) {
      log.cpu_ns += outcome.cpu_ns;
      log.cpu_runs += outcome.cpu_runs;
    }
  } else {
    ++log.errors[outcome.kind];
    log.samples.emplace(outcome.kind, outcome.message);
  }
}

class LoadRun {
 public:
  LoadRun(Target& target, const MeasureOptions& options) : target_(target), options_(options) {}
  ~LoadRun() { Stop(); }

  Status StartConcurrency(int64_t concurrency) {
    FASTPATH_ASSIGN_OR_RETURN(loop_, target_.NewClosedLoop(concurrency));
    if (loop_) {
      logs_.push_back(std::make_unique<WorkerLog>());
      threads_.emplace_back([this] {
        loop_->Run(stop_, [this](const InferOutcome& outcome, int64_t latency_ns) {
          Record(*logs_[0], outcome, latency_ns);
        });
      });
      return Status::Ok();
    }
    FASTPATH_RETURN_IF_ERROR(OpenSessions(concurrency));
    for (size_t w = 0; w < sessions_.size(); ++w) {
      threads_.emplace_back([this, w] {
        size_t index = w;
        while (!stop_.load(std::memory_order_relaxed)) {
          const auto t0 = Clock::now();
          const InferOutcome outcome = sessions_[w]->Infer(index++);
          const auto t1 = Clock::now();
          Record(*logs_[w], outcome, std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
          if (!outcome.ok && outcome.kind == "connect") PauseAfterConnectError();
        }
      });
    }
    return Status::Ok();
  }

  Status StartRate(double rate) {
    FASTPATH_RETURN_IF_ERROR(OpenSessions(std::max(1, options_.max_threads)));
    schedule_ = std::make_unique<RequestSchedule>(options_.distribution, rate, options_.seed);
    next_send_ = Clock::now();
    for (size_t w = 0; w < sessions_.size(); ++w) {
      threads_.emplace_back([this, w] {
        while (true) {
          Clock::time_point slot;
          size_t index = 0;
          {
            std::unique_lock<std::mutex> lock(schedule_mu_);
            if (stop_) break;
            slot = next_send_;
            next_send_ += schedule_->NextGap();
            index = next_index_++;
            // Wait for the slot, but wake at once when stopping.
            if (stop_cv_.wait_until(lock, slot, [this] { return stop_.load(); })) break;
          }
          const auto t0 = Clock::now();
          if (t0 - slot > std::chrono::milliseconds(1)) {
            std::lock_guard<std::mutex> lock(logs_[w]->mu);
            ++logs_[w]->late;
          }
          const InferOutcome outcome = sessions_[w]->Infer(index);
          const auto t1 = Clock::now();
          Record(*logs_[w], outcome, std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
          if (!outcome.ok && outcome.kind == "connect") PauseAfterConnectError();
        }
      });
    }
    return Status::Ok();
  }

  Window Collect() {
    Window w;
    for (auto& log : logs_) {
      std::lock_guard<std::mutex> lock(log->mu);
      w.latencies_ns.insert(w.latencies_ns.end(), log->latencies_ns.begin(), log->latencies_ns.end());
      log->latencies_ns.clear();
      for (const auto& [k, n] : log->errors) w.errors[k] += n;
      log->errors.clear();
      for (const auto& [k, m] : log->samples) w.samples.emplace(k, m);
      log->samples.clear();
      w.late += log->late;
      log->late = 0;
      w.cpu_ns += log->cpu_ns;
      w.cpu_runs += log->cpu_runs;
      log->cpu_ns = 0;
      log->cpu_runs = 0;
    }
    return w;
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(schedule_mu_);
      stop_ = true;
    }
    stop_cv_.notify_all();
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
    threads_.clear();
  }

  // Sleeps for `d` unless stopped first.
  void PauseAfterConnectError() {
    std::unique_lock<std::mutex> lock(schedule_mu_);
    stop_cv_.wait_for(lock, std::chrono::milliseconds(20), [this] { return stop_.load(); });
  }

 private:
  Status OpenSessions(int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      auto session = target_.NewSession();
      if (!session.ok()) return session.status().WithContext("opening session " + std::to_string(i + 1));
      sessions_.push_back(std::move(session).value());
      logs_.push_back(std::make_unique<WorkerLog>());
    }
    return Status::Ok();
  }

  Target& target_;
  const MeasureOptions& options_;
  std::vector<std::unique_ptr<InferSession>> sessions_;
  std::unique_ptr<ClosedLoop> loop_;  // instead of sessions_, where the target has one
  std::vector<std::unique_ptr<WorkerLog>> logs_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::mutex schedule_mu_;
  std::condition_variable stop_cv_;
  std::unique_ptr<RequestSchedule> schedule_;
  Clock::time_point next_send_;
  size_t next_index_ = 0;
};

std::string Progress(const std::string& name, int trial, int max_trials, const Window& w, int64_t batch) {
  std::vector<int64_t> l = w.latencies_ns;
  LatencySummary s = Summarize(std::move(l));
  uint64_t errors = 0;
  for (const auto& [k, n] : w.errors) errors += n;
  char line[256];
  std::snprintf(line, sizeof(line), "%s window %d/%d: %.1f infer/s  p50 %.3f ms  p99 %.3f ms  errors %llu",
                name.c_str(), trial, max_trials, w.seconds > 0 ? s.count / w.seconds * batch : 0.0,
                s.p50_us / 1000, s.p99_us / 1000, static_cast<unsigned long long>(errors));
  return line;
}

// The numbers of windows[first..] as one point: latencies, errors, time, throughput and the
// CPU-time ceiling. The server split is the caller's (it needs the statistics read at the
// windows' ends).
void FillPoint(const std::vector<Window>& windows, size_t first, int64_t batch_size,
               BenchPoint* point) {
  std::vector<int64_t> latencies;
  int64_t cpu_ns = 0;
  uint64_t cpu_runs = 0;
  for (size_t i = first; i < windows.size(); ++i) {
    const Window& w = windows[i];
    latencies.insert(latencies.end(), w.latencies_ns.begin(), w.latencies_ns.end());
    for (const auto& [k, n] : w.errors) {
      point->errors_by_kind[k] += n;
      point->errors += n;
    }
    for (const auto& [k, m] : w.samples) point->error_samples.emplace(k, m);
    point->late_sends += w.late;
    point->measured_seconds += w.seconds;
    cpu_ns += w.cpu_ns;
    cpu_runs += w.cpu_runs;
  }
  if (cpu_runs > 0 && cpu_ns > 0) {
    // Every session computes on its own thread: `concurrency` runs at a time.
    const double mean_cpu_s = static_cast<double>(cpu_ns) / cpu_runs / 1e9;
    point->cpu_ceiling_ips = static_cast<double>(point->concurrency) * batch_size / mean_cpu_s;
  }
  point->latency = Summarize(std::move(latencies));
  point->requests = point->latency.count;
  point->throughput_rps =
      point->measured_seconds > 0 ? point->requests / point->measured_seconds : 0;
  point->throughput_ips = point->throughput_rps * batch_size;
}

StatusOr<BenchPoint> Measure(Target& target, const MeasureOptions& options, bool rate_mode, int64_t concurrency,
                             double rate) {
  BenchPoint point;
  point.mode = rate_mode ? "request_rate" : "concurrency";
  point.concurrency = rate_mode ? options.max_threads : concurrency;
  point.request_rate = rate_mode ? rate : 0;
  point.batch_size = options.batch_size;
  const std::string name = rate_mode ? "rate=" + std::to_string(static_cast<int64_t>(rate))
                                     : "c=" + std::to_string(concurrency);

  LoadRun run(target, options);
  FASTPATH_RETURN_IF_ERROR(rate_mode ? run.StartRate(rate) : run.StartConcurrency(concurrency));
  std::this_thread::sleep_for(options.warmup);
  (void)run.Collect();  // warm-up results are dropped

  std::vector<std::optional<ModelStatsSnapshot>> boundaries;
  std::vector<Clock::time_point> boundary_at;  // when each window began, and the last ended
  auto read_stats = [&] {
    auto stats = target.Stats();
    boundaries.push_back(stats.ok() ? *stats : std::nullopt);
  };
  read_stats();
  auto window_start = Clock::now();
  boundary_at.push_back(window_start);
  std::vector<Window> windows;
  std::vector<WindowSample> samples;
  const int max_trials = std::max(1, options.max_trials);
  for (int trial = 1; trial <= max_trials; ++trial) {
    std::this_thread::sleep_until(window_start + options.window);
    Window w = run.Collect();
    const auto now = Clock::now();
    w.seconds = std::chrono::duration<double>(now - window_start).count();
    window_start = now;
    boundary_at.push_back(now);
    read_stats();
    std::vector<int64_t> copy = w.latencies_ns;
    const LatencySummary s = Summarize(std::move(copy));
    samples.push_back({w.seconds > 0 ? s.count / w.seconds : 0.0, s.p95_us});
    if (options.progress) options.progress(Progress(name, trial, max_trials, w, options.batch_size));
    windows.push_back(std::move(w));
    if (IsStable(samples, options.stability_percentage)) {
      point.stable = true;
      break;
    }
  }
  run.Stop();
  // What failed after the last window, while the run stopped: chiefly requests a stuck server
  // never answered (kUnanswered), which no window saw end. They count against the point, so
  // that a server that stopped answering does not read as a quiet one. Latencies that came
  // back late are not the windows' and stay out.
  Window tail = run.Collect();
  for (const auto& [k, n] : tail.errors) windows.back().errors[k] += n;
  for (const auto& [k, m] : tail.samples) windows.back().samples.emplace(k, m);

  point.trials = static_cast<int>(windows.size());
  const size_t used = std::min<size_t>(3, windows.size());
  FillPoint(windows, windows.size() - used, options.batch_size, &point);
  const auto& before = boundaries[boundaries.size() - 1 - used];
  const auto& after = boundaries.back();
  if (before && after) point.server = DiffStats(*before, *after);
  if (options.on_measured) {
    options.on_measured(boundary_at[boundary_at.size() - 1 - used], boundary_at.back(), &point);
  }
  return point;
}

}  // namespace

StatusOr<BenchPoint> MeasureConcurrency(Target& target, int64_t concurrency, const MeasureOptions& options) {
  if (concurrency < 1) return InvalidArgument("concurrency must be at least 1");
  return Measure(target, options, false, concurrency, 0);
}

StatusOr<BenchPoint> MeasureRequestRate(Target& target, double rate, const MeasureOptions& options) {
  if (!(rate > 0)) return InvalidArgument("--request-rate must be positive");
  return Measure(target, options, true, 0, rate);
}

Status MeasureSoak(Target& target, int64_t concurrency, const MeasureOptions& options,
                   const SoakSchedule& schedule, const SoakBoundary& on_boundary) {
  if (concurrency < 1) return InvalidArgument("concurrency must be at least 1");
  if (schedule.window.count() <= 0 || schedule.duration < schedule.window) {
    return InvalidArgument("a soak needs a positive window no longer than its duration");
  }
  auto stopped = [&] { return schedule.stop != nullptr && schedule.stop->load(); };
  LoadRun run(target, options);
  FASTPATH_RETURN_IF_ERROR(run.StartConcurrency(concurrency));
  std::this_thread::sleep_for(options.warmup);
  (void)run.Collect();  // warm-up results are dropped; the load itself goes on

  auto read_stats = [&]() -> std::optional<ModelStatsSnapshot> {
    auto stats = target.Stats();
    return stats.ok() ? *stats : std::nullopt;
  };
  std::optional<ModelStatsSnapshot> before = read_stats();
  const auto start = Clock::now();
  auto window_start = start;
  on_boundary(0, nullptr);
  const std::string name = "soak c=" + std::to_string(concurrency);
  const int64_t windows =
      (schedule.duration.count() + schedule.window.count() - 1) / schedule.window.count();
  for (int64_t i = 1; i <= windows && !stopped(); ++i) {
    // The ends are fixed from the start, so that what a boundary does (statistics, a scrape)
    // shortens no window and the last one ends at the duration.
    const auto end = start + std::min(schedule.window * i, schedule.duration);
    while (!stopped()) {
      const auto now = Clock::now();
      if (now >= end) break;
      std::this_thread::sleep_for(
          std::min<Clock::duration>(end - now, std::chrono::milliseconds(100)));
    }
    std::vector<Window> w(1, run.Collect());
    const auto now = Clock::now();
    w[0].seconds = std::chrono::duration<double>(now - window_start).count();
    window_start = now;
    std::optional<ModelStatsSnapshot> after = read_stats();
    BenchPoint point;
    point.mode = "soak";
    point.concurrency = concurrency;
    point.batch_size = options.batch_size;
    point.trials = 1;
    FillPoint(w, 0, options.batch_size, &point);
    if (before && after) point.server = DiffStats(*before, *after);
    before = std::move(after);
    if (options.progress) {
      options.progress(
          Progress(name, static_cast<int>(i), static_cast<int>(windows), w[0], options.batch_size));
    }
    on_boundary(static_cast<int>(i), &point);
  }
  run.Stop();
  return Status::Ok();
}

}  // namespace fastpath::bench
