#include "preflight_checks.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "fastpath/admission/memory_budget.h"
#include "fastpath/admission/rollout_gate.h"
#include "fastpath/admission/self_test.h"
#include "fastpath/bench/report.h"
#include "fastpath/bench/soak.h"
#include "fastpath/common/duration.h"
#include "fastpath/common/json.h"
#include "fastpath/config/ensemble_config.h"
#include "fastpath/config/model_config.h"
#include "rules_yaml.h"

namespace fastpath::cli::preflight {

// The rollout gate's key (issue 12 §2): parameters { key: "fastpath.rollout.gate" value {
// string_value: "true" } } turns the gate on. The gate itself reads admission::kRolloutGate;
// this says which key item 8 looks for, and fails the build if the two ever part.
constexpr std::string_view kRolloutGateKey = "fastpath.rollout.gate";
static_assert(kRolloutGateKey == std::string_view(admission::kRolloutGate));

namespace {

namespace fs = std::filesystem;
using admission::FormatBytes;

std::string Join(const std::vector<std::string>& words, const std::string& separator = ", ") {
  std::string out;
  for (const std::string& word : words) out += (out.empty() ? "" : separator) + word;
  return out;
}

std::string Fixed(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

std::string Plural(size_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// The item's verdict from its models': any failure fails it; otherwise any model not
// checked leaves it not checked; otherwise it passes (N/A models count for nothing).
Verdict Combine(const std::vector<ModelFinding>& models) {
  Verdict verdict = Verdict::kPass;
  for (const ModelFinding& m : models) {
    if (m.verdict == Verdict::kFail) return Verdict::kFail;
    if (m.verdict == Verdict::kNotChecked) verdict = Verdict::kNotChecked;
  }
  return verdict;
}

std::vector<std::string> NamesWith(const std::vector<ModelFinding>& models, Verdict verdict) {
  std::vector<std::string> names;
  for (const ModelFinding& m : models) {
    if (m.verdict == verdict) names.push_back(m.model);
  }
  return names;
}

// "3 models: 2 pass, 1 fails" over the models of an item (their rows name them).
std::string CountSummary(const std::vector<ModelFinding>& models) {
  size_t counts[4] = {0, 0, 0, 0};
  for (const ModelFinding& m : models) ++counts[static_cast<int>(m.verdict)];
  std::vector<std::string> parts;
  if (counts[0] > 0) parts.push_back(std::to_string(counts[0]) + " pass");
  if (counts[1] > 0)
    parts.push_back(std::to_string(counts[1]) + (counts[1] == 1 ? " fails" : " fail"));
  if (counts[2] > 0) parts.push_back(std::to_string(counts[2]) + " not checked");
  if (counts[3] > 0) parts.push_back(std::to_string(counts[3]) + " not applicable");
  return Plural(models.size(), "model") + ": " + Join(parts);
}

Item NewItem(std::string id, std::string title) {
  Item item;
  item.id = std::move(id);
  item.title = std::move(title);
  return item;
}

const char* const kEnsembleNote =
    "an ensemble: no instances of its own (its steps are checked as the models they are)";

// The model's instance cap: fastpath.memory.limit_bytes, else the cuda accelerator's
// gpu_mem_limit for a GPU model; with where it comes from.
struct Cap {
  std::optional<uint64_t> bytes;
  std::string source;
  std::string error;      // a value that does not parse
  bool tensorrt = false;  // a GPU model that lists the tensorrt accelerator
  std::map<std::string, std::string> cuda_options;
};

Cap CapOf(const RepositoryModel& m, const inference::ModelConfig& config) {
  Cap cap;
  auto limit = config::MemoryLimitFor(config);
  if (!limit.ok()) {
    cap.error = limit.status().message();
    return cap;
  }
  if (*limit) {
    cap.bytes = *limit;
    cap.source = "parameters fastpath.memory.limit_bytes";
  }
  if (!m.gpu()) return cap;
  auto providers = config::GpuExecutionProviders(config);
  if (!providers.ok()) {
    cap.error = providers.status().message();
    return cap;
  }
  for (const config::ProviderChoice& p : *providers) {
    if (p.provider == backend::ExecutionProvider::kTensorRt) cap.tensorrt = true;
    if (p.provider != backend::ExecutionProvider::kCuda) continue;
    cap.cuda_options = p.options;
    if (const auto it = p.options.find("gpu_mem_limit"); it != p.options.end() && !cap.bytes) {
      uint64_t bytes = 0;
      const auto [end, ec] =
          std::from_chars(it->second.data(), it->second.data() + it->second.size(), bytes);
      if (ec == std::errc() && end == it->second.data() + it->second.size() && bytes > 0) {
        cap.bytes = bytes;
        cap.source = "the cuda accelerator's gpu_mem_limit";
      } else {
        cap.error =
            "the cuda accelerator's gpu_mem_limit is '" + it->second + "', not a number of bytes";
      }
    }
  }
  return cap;
}

// The rows of `item`, one a model in the repository's order, and its verdict and count:
// what keeps a model from being judged is written here once (an unreadable config: NOT
// CHECKED; an ensemble, which has no instances of its own: N/A with `ensemble_note`; with
// `needs_cap`, a cap that does not parse: FAIL), and `judge(model, config, cap)` gives the
// row of each other model (`cap` is empty without `needs_cap`).
template <typename Judge>
void JudgeEachModel(const std::vector<RepositoryModel>& models, const char* ensemble_note,
                    bool needs_cap, Item& item, Judge judge) {
  for (const RepositoryModel& m : models) {
    const inference::ModelConfig* config = m.best_config();
    if (config == nullptr) {
      item.models.push_back(
          {m.name, Verdict::kNotChecked, "config.pbtxt unreadable: " + m.config_error});
      continue;
    }
    if (m.ensemble()) {
      item.models.push_back({m.name, Verdict::kNotApplicable, ensemble_note});
      continue;
    }
    const Cap cap = needs_cap ? CapOf(m, *config) : Cap{};
    item.models.push_back(cap.error.empty() ? judge(m, *config, cap)
                                            : ModelFinding{m.name, Verdict::kFail, cap.error});
  }
  item.verdict = Combine(item.models);
  item.summary = CountSummary(item.models);
}

}  // namespace

const char* VerdictLabel(Verdict verdict) {
  switch (verdict) {
    case Verdict::kPass:
      return "PASS";
    case Verdict::kFail:
      return "FAIL";
    case Verdict::kNotChecked:
      return "NOT CHECKED";
    case Verdict::kNotApplicable:
      return "N/A";
  }
  return "?";
}

const char* VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kPass:
      return "pass";
    case Verdict::kFail:
      return "fail";
    case Verdict::kNotChecked:
      return "not_checked";
    case Verdict::kNotApplicable:
      return "not_applicable";
  }
  return "?";
}

// ---- the repository ----

bool RepositoryModel::ensemble() const {
  const inference::ModelConfig* c = best_config();
  return c != nullptr && config::IsEnsemble(*c);
}

bool RepositoryModel::gpu() const {
  const inference::ModelConfig* c = best_config();
  if (c == nullptr) return false;
  for (const auto& group : c->instance_group()) {
    if (group.kind() == inference::ModelInstanceGroup::KIND_GPU) return true;
  }
  return false;
}

std::vector<int> RepositoryModel::gpus() const {
  std::set<int> ordinals;
  if (const inference::ModelConfig* c = best_config()) {
    for (const auto& group : c->instance_group()) {
      if (group.kind() != inference::ModelInstanceGroup::KIND_GPU) continue;
      if (group.gpus_size() == 0) ordinals.insert(0);
      ordinals.insert(group.gpus().begin(), group.gpus().end());
    }
  }
  return {ordinals.begin(), ordinals.end()};
}

const inference::ModelConfig* RepositoryModel::best_config() const {
  if (completed) return &*completed;
  if (config) return &*config;
  return nullptr;
}

StatusOr<std::vector<RepositoryModel>> ReadRepository(const fs::path& root) {
  std::error_code ec;
  fs::directory_iterator it(root, ec);
  if (ec) {
    return NotFound("cannot read the model repository '" + root.string() + "': " + ec.message());
  }
  std::vector<RepositoryModel> models;
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory(ec) || name.empty() || name[0] == '.') continue;
    RepositoryModel m;
    m.name = name;
    m.dir = entry.path();
    for (const auto& version : fs::directory_iterator(m.dir, ec)) {
      const std::string folder = version.path().filename().string();
      int64_t number = 0;
      const auto [end, parse_ec] =
          std::from_chars(folder.data(), folder.data() + folder.size(), number);
      if (version.is_directory(ec) && parse_ec == std::errc() &&
          end == folder.data() + folder.size() && number >= 0) {
        m.version_folders.push_back(number);
      }
    }
    std::sort(m.version_folders.begin(), m.version_folders.end());
    std::ifstream in(m.dir / "config.pbtxt", std::ios::binary);
    if (!in) {
      m.config_error = "no config.pbtxt in " + m.dir.string();
    } else {
      std::ostringstream text;
      text << in.rdbuf();
      auto parsed = config::ParseModelConfig(text.str(), (m.dir / "config.pbtxt").string());
      if (parsed.ok()) {
        m.config = *std::move(parsed);
      } else {
        m.config_error = parsed.status().message();
      }
    }
    models.push_back(std::move(m));
  }
  std::sort(models.begin(), models.end(),
            [](const RepositoryModel& a, const RepositoryModel& b) { return a.name < b.name; });
  return models;
}

// ---- 1. the driver against the runtime ----

Item CheckDriver(const gpu::CapabilitySnapshot& snapshot,
                 const std::vector<RepositoryModel>& models) {
  Item item = NewItem("driver", "driver against the runtime");
  const std::vector<gpu::Finding> findings = gpu::Assess(snapshot);
  std::vector<std::string> gpu_models;
  for (const RepositoryModel& m : models) {
    if (m.gpu()) gpu_models.push_back(m.name);
    // Its config does not parse: whether it needs the GPU is unknown, never "CPU".
    if (m.best_config() == nullptr) {
      item.models.push_back(
          {m.name, Verdict::kNotChecked,
           "config.pbtxt unreadable, so whether it runs on a GPU is unknown: " + m.config_error});
    }
  }
  std::string node;
  if (findings.empty()) {
    node = "driver " +
           (snapshot.nvml.driver_version.empty() ? "(version unknown)"
                                                 : snapshot.nvml.driver_version) +
           " supports CUDA " + snapshot.driver.cuda_version.ToString() +
           "; the CUDA libraries and ONNX Runtime's CUDA execution provider are usable";
  } else {
    node = std::string("[") + gpu::FailureClassName(findings.front().failure) + "] " +
           findings.front().message;
  }
  if (gpu_models.empty() && !item.models.empty()) {
    item.verdict = Verdict::kNotChecked;
    item.summary = "no model asks for a GPU, but " +
                   Join(NamesWith(item.models, Verdict::kNotChecked)) +
                   " could not be read; this node's " + node;
    return item;
  }
  if (gpu_models.empty()) {
    item.verdict = Verdict::kPass;
    item.summary = findings.empty()
                       ? "no GPU model (every model runs on the CPU); this node's " + node
                       : "no GPU model: every model runs on the CPU (KIND_CPU), so the node's "
                         "GPU is not needed. This node has no usable GPU: " +
                             node;
    return item;
  }
  for (const std::string& name : gpu_models) {
    item.models.push_back({name, findings.empty() ? Verdict::kPass : Verdict::kFail,
                           findings.empty() ? "KIND_GPU: the GPU fast path is usable"
                                            : "KIND_GPU on a node without a usable GPU"});
  }
  if (findings.empty()) {
    item.verdict = Combine(item.models);  // a model whose config does not parse: not checked
    item.summary = node;
    return item;
  }
  item.verdict = Verdict::kFail;
  std::vector<std::string> problems;
  for (const gpu::Finding& f : findings) {
    problems.push_back(std::string("[") + gpu::FailureClassName(f.failure) + "] " + f.message);
  }
  item.summary = "GPU models (" + Join(gpu_models) + ") cannot run here: " + Join(problems, "; ");
  item.action =
      "fix what `fastpath doctor` names (with --require-gpu it exits with the class), see "
      "docs/runbooks/gpu.md; or run these models as KIND_CPU";
  return item;
}

// ---- 2. the memory budget ----

Item CheckMemoryBudget(const admission::AdmissionReport& report,
                       const std::vector<RepositoryModel>& models) {
  Item item = NewItem("memory_budget", "memory budget with its margin");
  std::set<std::string> ensembles;
  for (const RepositoryModel& m : models) {
    if (m.ensemble()) ensembles.insert(m.name);
  }
  // What each device's measured instances need together, as `fastpath budget` adds it up.
  struct DeviceTotal {
    uint64_t bytes = 0;
    std::optional<uint64_t> total;
    std::vector<std::string> models;
  };
  std::map<std::string, DeviceTotal> devices;
  for (const admission::ModelAdmission& a : report.models) {
    const std::string name = a.version.empty() ? a.name : a.name + " v" + a.version;
    if (a.state == admission::AdmissionState::kUnavailable) {
      item.models.push_back({name, Verdict::kFail,
                             "did not load: " + (a.reasons.empty() ? "" : Join(a.reasons, "; "))});
      continue;
    }
    if (a.memory_budget) {
      const admission::MemoryBudget& b = *a.memory_budget;
      item.models.push_back(
          {name, b.fits() ? Verdict::kPass : Verdict::kFail,
           (b.fits() ? "fits: " : "DOES NOT FIT: ") + admission::DescribeBudget(b)});
      DeviceTotal& total = devices[b.device];
      // Out of memory while measured: no figure of its is a budget (its row fails).
      if (!b.ran_out_of_memory) total.bytes += b.instances_bytes();
      total.total = b.device_total_bytes;
      total.models.push_back(name);
      continue;
    }
    if (ensembles.count(a.name) != 0) {
      item.models.push_back({name, Verdict::kNotApplicable, kEnsembleNote});
      continue;
    }
    item.models.push_back(
        {name, Verdict::kNotChecked,
         "not measured: " +
             (a.memory_budget_note.empty() ? std::string("no budget") : a.memory_budget_note)});
  }
  std::vector<std::string> device_lines;
  bool devices_fit = true;
  for (const auto& [device, total] : devices) {
    const bool fits = !total.total || total.bytes <= *total.total;
    devices_fit = devices_fit && fits;
    device_lines.push_back(device + ": " + FormatBytes(total.bytes) + " of " +
                           (total.total ? FormatBytes(*total.total) : "unknown") +
                           (fits ? "" : " (DOES NOT FIT)"));
  }
  item.verdict = Combine(item.models);
  if (!devices_fit) item.verdict = Verdict::kFail;
  item.summary = CountSummary(item.models);
  if (!device_lines.empty()) {
    item.summary += "; the measured models' instances need " + Join(device_lines, ", ");
  }
  if (item.verdict == Verdict::kFail) {
    item.action =
        "lower max_batch_size or the instance count, or raise parameters "
        "fastpath.memory.limit_bytes where the device has room; a model that did not load "
        "names why (docs/runbooks/memory.md, `fastpath budget` for the figures)";
  } else if (item.verdict == Verdict::kNotChecked) {
    item.action =
        "set parameters fastpath.memory.limit_bytes (the instance's cap) on each model not "
        "measured, so that its budget is measured at load and refused when it cannot fit; a "
        "dynamic dim needs a model_warmup at the largest shape served";
  }
  return item;
}

// ---- 3. the arena configuration ----

Item CheckArena(const std::vector<RepositoryModel>& models) {
  Item item = NewItem("arena", "arena configuration");
  JudgeEachModel(
      models, kEnsembleNote, /*needs_cap=*/true, item,
      [](const RepositoryModel& m, const inference::ModelConfig&, const Cap& cap) -> ModelFinding {
        std::string strategy;
        if (const auto it = cap.cuda_options.find("arena_extend_strategy");
            it != cap.cuda_options.end()) {
          strategy = ", arena_extend_strategy " + it->second;
        }
        if (!m.gpu() && cap.bytes) {
          return {m.name, Verdict::kPass,
                  "CPU: an arena of its own per instance, capped at " + FormatBytes(*cap.bytes) +
                      " (" + cap.source + "), growing by what is asked"};
        }
        if (!m.gpu()) {
          return {m.name, Verdict::kFail,
                  "CPU: ONNX Runtime's default CPU arena, no cap: it grows by powers of two with "
                  "the largest batches and keeps what it took, and running out is the kernel's "
                  "OOM killer ending the whole server"};
        }
        if (cap.tensorrt) {
          return {
              m.name, Verdict::kNotChecked,
              "GPU, TensorRT: its engines allocate outside any arena fastpath can cap "
              "(fastpath.memory.limit_bytes is refused with it)" +
                  (cap.bytes ? "; the CUDA fallback's arena is capped at " + FormatBytes(*cap.bytes)
                             : std::string())};
        }
        if (cap.bytes) {
          return {m.name, Verdict::kPass,
                  "GPU: the CUDA arena per instance capped at " + FormatBytes(*cap.bytes) + " (" +
                      cap.source + ")" + strategy};
        }
        return {
            m.name, Verdict::kFail,
            "GPU: the CUDA arena has no cap (ONNX Runtime's gpu_mem_limit defaults to the whole "
            "device)" +
                strategy + ": one model's largest batches can take the memory the others need"};
      });
  if (item.verdict != Verdict::kPass) {
    item.action =
        "give each model's instances a cap: parameters { key: \"fastpath.memory.limit_bytes\" "
        "value { string_value: \"512Mi\" } } (at least the budget `fastpath budget` measures); "
        "docs/runbooks/memory.md";
  }
  return item;
}

// ---- 4. the soak ----

Item CheckSoak(const std::string& path, const StatusOr<std::string>& text,
               const std::vector<RepositoryModel>& models) {
  Item item = NewItem("soak", "soak of at least 30 minutes");
  const std::string how =
      "run `fastpath bench -m MODEL --soak 30m --json FILE` against a server of this "
      "repository on a node like this one, and pass --soak-report FILE";
  item.verdict = Verdict::kFail;
  item.action = how;
  if (path.empty()) {
    item.summary = "no soak report: run fastpath bench --soak ... and pass --soak-report";
    return item;
  }
  if (!text.ok()) {
    item.summary = "cannot read the soak report: " + text.status().message();
    return item;
  }
  auto reports = bench::ReadReportsJson(*text, path);
  if (!reports.ok()) {
    item.summary = "the soak report is not a fastpath bench report: " + reports.status().message();
    return item;
  }
  std::set<std::string> names;
  for (const RepositoryModel& m : models) names.insert(m.name);
  std::vector<std::string> problems_of_runs;
  size_t soaks = 0;
  for (const bench::BenchReport& r : *reports) {
    if (!r.soak) continue;
    ++soaks;
    const bench::SoakResult& soak = *r.soak;
    const double measured = soak.windows.empty() ? 0 : soak.windows.back().end_s;
    uint64_t requests = 0;
    uint64_t errors = 0;
    std::map<std::string, uint64_t> kinds;
    int idle_windows = 0;
    for (const bench::SoakWindow& w : soak.windows) {
      requests += w.load.requests;
      errors += w.load.errors;
      for (const auto& [kind, n] : w.load.errors_by_kind) kinds[kind] += n;
      if (w.load.requests == 0) ++idle_windows;
    }
    std::vector<std::string> problems;
    if (names.count(r.model) == 0) {
      problems.push_back("model '" + r.model + "' is not in this repository");
    }
    if (soak.interrupted) problems.push_back("it was interrupted");
    if (measured < kMinSoakSeconds) {
      problems.push_back("it ran " +
                         FormatDuration(std::chrono::milliseconds(std::llround(measured * 1000))) +
                         ", less than 30m");
    }
    if (errors > 0) {
      std::vector<std::string> by_kind;
      for (const auto& [kind, n] : kinds) by_kind.push_back(kind + " " + std::to_string(n));
      problems.push_back(std::to_string(errors) + " of " + std::to_string(requests) +
                         " requests failed" + (by_kind.empty() ? "" : " (" + Join(by_kind) + ")"));
    }
    if (idle_windows > 0) {
      problems.push_back(Plural(idle_windows, "window") + " completed no request");
    }
    // From the windows' own figures, not the ratios the file states: a report whose ratios
    // were left out (or edited) passed whatever its last window ran at.
    bench::SoakResult measured_drift = soak;
    bench::ComputeSoakDrift(&measured_drift);
    const auto drift = bench::SummarizeSoakDrift(measured_drift);
    std::string drift_text;
    if (drift && drift->last_throughput_ratio) {
      drift_text = "; last window vs first: throughput " +
                   Fixed("%.3f", *drift->last_throughput_ratio) + "x" +
                   (drift->last_p95_ratio ? ", p95 " + Fixed("%.3f", *drift->last_p95_ratio) + "x"
                                          : std::string());
      if (*drift->last_throughput_ratio < 1 / (1 + kSoakMaxDrift)) {
        problems.push_back("the last window ran at " +
                           Fixed("%.3f", *drift->last_throughput_ratio) +
                           "x the first window's throughput (drift beyond serve's default "
                           "--drift-threshold 0.15)");
      }
    }
    const std::string what =
        "soak of '" + r.model + "' at concurrency " + std::to_string(soak.concurrency) + " for " +
        FormatDuration(std::chrono::milliseconds(std::llround(measured * 1000))) + ", " +
        Plural(soak.windows.size(), "window") + ", " + std::to_string(requests) + " requests, " +
        std::to_string(errors) + " failed" + drift_text +
        (r.started_at.empty() ? "" : " (started " + r.started_at + ")");
    if (problems.empty()) {
      item.verdict = Verdict::kPass;
      item.summary = what;
      item.action.clear();
      return item;
    }
    problems_of_runs.push_back(what + ": " + Join(problems, "; "));
  }
  if (soaks == 0) {
    item.summary = path + " holds no soak run (its runs were measured without --soak)";
    return item;
  }
  item.summary = "no clean soak in " + path + ": " + Join(problems_of_runs, " | ");
  return item;
}

// ---- 5. alert rules ----

std::vector<std::string> RequiredAlerts(const std::vector<RepositoryModel>& models) {
  // What docs/runbooks/admission.md, memory.md and connections.md act on: the server not
  // ready, models not served as proven, requests refused or failing, memory or descriptors
  // running out.
  std::vector<std::string> required = {
      "FastpathNotReady",         "FastpathModelUnavailable", "FastpathModelDegraded",
      "FastpathRequestsRejected", "FastpathBackendErrors",    "FastpathOutOfMemory",
      "FastpathMemoryNearLimit",  "FastpathOpenFilesNearLimit",
  };
  bool gpu = false;
  bool canary = false;
  for (const RepositoryModel& m : models) {
    // A config that does not parse may ask for a GPU: its alerts are required too.
    gpu = gpu || m.gpu() || m.best_config() == nullptr;
    if (const inference::ModelConfig* c = m.best_config()) {
      canary = canary || c->parameters().count("fastpath.canary.interval_s") != 0;
    }
  }
  if (gpu) {  // docs/runbooks/gpu.md
    for (const char* name : {"FastpathGpuQuarantined", "FastpathGpuThrottled",
                             "FastpathGpuXidErrors", "FastpathThroughputDrift"}) {
      required.push_back(name);
    }
  }
  if (canary) {
    for (const char* name :
         {"FastpathCanaryFailing", "FastpathCanaryOutputMismatch", "FastpathCanarySlow"}) {
      required.push_back(name);
    }
  }
  return required;
}

Item CheckAlertRules(const std::string& path, const StatusOr<std::string>& text,
                     const std::vector<std::string>& looked_in,
                     const std::vector<RepositoryModel>& models) {
  Item item = NewItem("alert_rules", "alert rules present");
  item.verdict = Verdict::kFail;
  item.action =
      "load deploy/prometheus/fastpath-rules.yaml into Prometheus (rule_files, or a "
      "PrometheusRule) and pass the file you deploy as --alert-rules FILE";
  if (path.empty()) {
    item.summary = "no alert rule file found (looked in " + Join(looked_in) + ")";
    return item;
  }
  if (!text.ok()) {
    item.summary = "cannot read " + path + ": " + text.status().message();
    return item;
  }
  auto rules = ParseAlertRules(*text);
  if (!rules.ok()) {
    item.summary = path + " is not a Prometheus rule file: " + rules.status().message();
    return item;
  }
  std::set<std::string> alerts;
  size_t recording = 0;
  std::set<std::string> groups;
  for (const AlertRule& rule : *rules) {
    groups.insert(rule.group);
    if (rule.name.empty()) {
      ++recording;
    } else {
      alerts.insert(rule.name);
    }
  }
  std::vector<std::string> missing;
  const std::vector<std::string> required = RequiredAlerts(models);
  for (const std::string& name : required) {
    if (alerts.count(name) == 0) missing.push_back(name);
  }
  const std::string counts = path + ": " + Plural(groups.size(), "group") + ", " +
                             Plural(alerts.size(), "alert") +
                             (recording > 0 ? ", " + Plural(recording, "recording rule") : "");
  if (!missing.empty()) {
    item.summary = counts + "; missing " + Join(missing) + " (of the " +
                   std::to_string(required.size()) + " the runbooks act on for this repository)";
    return item;
  }
  item.verdict = Verdict::kPass;
  item.action.clear();
  item.summary = counts + "; all " + std::to_string(required.size()) +
                 " alerts the runbooks act on for this repository are there";
  return item;
}

// ---- 5b. metrics collected ----

Item CheckMetricsCollected(const std::string& prometheus, const StatusOr<std::string>& answer) {
  Item item = NewItem("metrics_collected", "metrics collected");
  if (prometheus.empty()) {
    item.verdict = Verdict::kNotChecked;
    item.summary =
        "no --prometheus URL: whether a Prometheus scrapes this server's :8002 "
        "metrics is not known here";
    item.action =
        "pass --prometheus http://HOST:9090 (the Prometheus that holds the alert "
        "rules) to have it asked for the fastpath_server_ready series";
    return item;
  }
  item.verdict = Verdict::kFail;
  item.action =
      "add a scrape job for the fastpath pods' metrics port (8002, /metrics) to "
      "that Prometheus (deploy/kubernetes: the pods carry prometheus.io annotations)";
  if (!answer.ok()) {
    item.summary = "cannot query " + prometheus + ": " + answer.status().message();
    item.action = "check the --prometheus URL: Prometheus' HTTP API answers GET /api/v1/query";
    return item;
  }
  rapidjson::Document doc;
  if (!json::ParseBounded(&doc, *answer).empty() || !doc.IsObject() || !doc.HasMember("data") ||
      !doc["data"].IsObject() || !doc["data"].HasMember("result") ||
      !doc["data"]["result"].IsArray()) {
    item.summary = prometheus +
                   " answered the query without a data.result list: not "
                   "Prometheus' HTTP API";
    item.action = "check the --prometheus URL: Prometheus' HTTP API answers GET /api/v1/query";
    return item;
  }
  std::vector<std::string> targets;
  for (const auto& series : doc["data"]["result"].GetArray()) {
    if (!series.IsObject() || !series.HasMember("metric") || !series["metric"].IsObject()) {
      continue;
    }
    const auto& metric = series["metric"];
    targets.push_back(metric.HasMember("instance") && metric["instance"].IsString()
                          ? metric["instance"].GetString()
                          : "(no instance label)");
  }
  if (targets.empty()) {
    item.summary =
        prometheus + " has no " + kMetricsQuery + " series: it does not scrape any fastpath server";
    return item;
  }
  item.verdict = Verdict::kPass;
  item.action.clear();
  item.summary = prometheus + " has " + kMetricsQuery + " from " +
                 Plural(targets.size(), "target") + ": " + Join(targets);
  return item;
}

// ---- 6. the partition ----

Item CheckPartition(const gpu::CapabilitySnapshot& snapshot, const PartitionEnvironment& env,
                    const std::vector<RepositoryModel>& models) {
  Item item = NewItem("partition", "partition (MIG, MPS or whole GPU) against the config");
  const gpu::DriverInfo& driver = snapshot.driver;
  const int visible = driver.initialized ? driver.device_count : 0;
  std::vector<std::string> mig_without_slice;
  for (const gpu::NvmlDevice& d : snapshot.nvml.devices) {
    if (d.mig_enabled.value_or(false)) mig_without_slice.push_back(std::to_string(d.index));
  }
  const bool mig_slice = snapshot.container.mig_device.has_value();
  if (mig_slice) mig_without_slice.clear();
  const bool mps = env.mps_pipe_directory.has_value() || env.mps_control_present;
  std::string mode;
  if (mig_slice) {
    mode = "MIG slice " + *snapshot.container.mig_device + " (seen as GPU 0 alone)";
  } else if (!mig_without_slice.empty()) {
    mode = "MIG on for GPU " + Join(mig_without_slice) + " but no slice selected";
  } else if (visible == 0) {
    mode = "no GPU visible";
  } else {
    std::vector<std::string> names;
    for (const gpu::DriverDevice& d : driver.devices) {
      names.push_back(std::to_string(d.ordinal) + " (" + d.name + ")");
    }
    mode = "whole GPU" + std::string(visible == 1 ? " " : "s ") + Join(names);
  }
  if (mps) {
    mode += ", shared through MPS (" +
            (env.mps_pipe_directory ? "CUDA_MPS_PIPE_DIRECTORY=" + *env.mps_pipe_directory
                                    : env.mps_control_path) +
            (env.mps_active_thread_percentage
                 ? ", CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=" + *env.mps_active_thread_percentage
                 : ", no CUDA_MPS_ACTIVE_THREAD_PERCENTAGE: this server's share of the SMs is "
                   "not bounded") +
            ")";
  }
  std::vector<const RepositoryModel*> gpu_models;
  for (const RepositoryModel& m : models) {
    if (m.gpu()) gpu_models.push_back(&m);
    if (m.best_config() == nullptr) {
      item.models.push_back(
          {m.name, Verdict::kNotChecked,
           "config.pbtxt unreadable, so which GPUs it asks for is unknown: " + m.config_error});
    }
  }
  if (gpu_models.empty() && !item.models.empty()) {
    item.verdict = Verdict::kNotChecked;
    item.summary = "no model asks for a GPU, but " +
                   Join(NamesWith(item.models, Verdict::kNotChecked)) +
                   " could not be read (this node: " + mode + ")";
    return item;
  }
  if (gpu_models.empty()) {
    item.verdict = Verdict::kPass;
    item.summary = "no GPU model (this node: " + mode + ")";
    return item;
  }
  for (const RepositoryModel* m : gpu_models) {
    std::vector<std::string> asked;
    std::vector<std::string> absent;
    for (const int g : m->gpus()) {
      asked.push_back(std::to_string(g));
      if (g >= visible) absent.push_back(std::to_string(g));
    }
    const std::string gpus = "instance_group gpus [" + Join(asked) + "]";
    if (visible == 0) {
      item.models.push_back({m->name, Verdict::kFail, gpus + ": no GPU is visible here"});
    } else if (!mig_without_slice.empty()) {
      item.models.push_back(
          {m->name, Verdict::kFail,
           gpus + ": MIG is on but CUDA_VISIBLE_DEVICES names no MIG slice, so which slice the "
                  "instances get (and its memory) is not pinned"});
    } else if (!absent.empty()) {
      item.models.push_back({m->name, Verdict::kFail,
                             gpus + ": GPU " + Join(absent) + " is not among the " +
                                 std::to_string(visible) + " this node shows" +
                                 (mig_slice ? " (a MIG slice is GPU 0 alone)" : "")});
    } else {
      item.models.push_back({m->name, Verdict::kPass, gpus + " on " + mode});
    }
  }
  item.verdict = Combine(item.models);
  item.summary = "this node: " + mode + "; " + CountSummary(item.models);
  if (item.verdict == Verdict::kFail) {
    item.action =
        "make the config's gpus name GPUs this node shows (CUDA ordinals, PCI order), or give "
        "the container the GPUs the config names; under MIG select the slice with "
        "CUDA_VISIBLE_DEVICES=MIG-<uuid> and use gpus [0]";
  }
  return item;
}

// ---- 7. out-of-memory behaviour ----

Item CheckOutOfMemory(const std::vector<RepositoryModel>& models) {
  Item item = NewItem("oom_behaviour", "out-of-memory behaviour defined");
  JudgeEachModel(
      models, kEnsembleNote, /*needs_cap=*/true, item,
      [](const RepositoryModel& m, const inference::ModelConfig&, const Cap& cap) -> ModelFinding {
        if (!m.gpu() && !cap.bytes) {
          return {m.name, Verdict::kNotApplicable,
                  "a CPU model without a cap: out of memory is the container's limit (item arena)"};
        }
        std::vector<std::string> missing;
        std::string defined;
        if (cap.bytes) {
          defined = "capped at " + FormatBytes(*cap.bytes) +
                    ": running out fails that instance's run with a clean 503 and the server "
                    "serves on";
        } else if (cap.tensorrt) {
          missing.push_back("TensorRT takes no cap: running out can take the whole GPU");
        } else {
          missing.push_back(
              "no cap: the CUDA arena can take the whole GPU before anything runs out, and the "
              "other models on it run out instead");
        }
        if (!m.completed) {
          return {m.name, missing.empty() ? Verdict::kNotChecked : Verdict::kFail,
                  Join(missing.empty() ? std::vector<std::string>{defined} : missing, "; ") +
                      "; the recovery check is not known: no version loaded here (item "
                      "memory_budget says why)"};
        }
        auto probe = admission::MakeSeededRequest(*m.completed, m.dir, 1, /*seed=*/0);
        if (probe.ok()) {
          defined += std::string(defined.empty() ? "" : "; ") +
                     "after running out, an instance answers a seeded request before it serves "
                     "again and is rebuilt when it cannot";
        } else {
          missing.push_back("no recovery check after running out (" + probe.status().message() +
                            "): instances are trusted once ONNX Runtime shrank the arena");
        }
        if (missing.empty()) return {m.name, Verdict::kPass, defined};
        return {m.name, Verdict::kFail,
                Join(missing, "; ") + (defined.empty() ? "" : "; " + defined)};
      });
  if (NamesWith(item.models, Verdict::kNotApplicable).size() == item.models.size()) {
    item.summary =
        "no GPU model and no model with a cap: nothing here runs out of memory on "
        "its own (a CPU model without a cap runs out with the container: item 3)";
  }
  if (item.verdict != Verdict::kPass) {
    item.action =
        "give every GPU model a cap (parameters fastpath.memory.limit_bytes) and every capped "
        "model concrete dims or a model_warmup, so that running out is one instance's clean "
        "error that it recovers from; docs/runbooks/memory.md";
  }
  return item;
}

// ---- 8. a rollback plan ----

Item CheckRollback(const std::vector<RepositoryModel>& models) {
  Item item = NewItem("rollback", "rollback plan (gate configured, previous version kept)");
  JudgeEachModel(
      models, "an ensemble: its steps roll back as the models they are",
      /*needs_cap=*/false, item,
      [](const RepositoryModel& m, const inference::ModelConfig& config,
         const Cap&) -> ModelFinding {
        std::vector<std::string> problems;
        std::vector<std::string> plan;
        const auto gate_param = config.parameters().find(std::string(kRolloutGateKey));
        if (gate_param == config.parameters().end() ||
            gate_param->second.string_value() != "true") {
          problems.push_back(gate_param == config.parameters().end()
                                 ? "no rollout gate (parameters " + std::string(kRolloutGateKey) +
                                       " is not set)"
                                 : "the rollout gate is off (" + std::string(kRolloutGateKey) +
                                       " is '" + gate_param->second.string_value() + "')");
        } else if (auto gate = admission::RolloutGateFor(config); !gate.ok()) {
          problems.push_back("the rollout gate is misconfigured: " + gate.status().message());
        } else if (*gate) {
          plan.push_back("gate on (p95 at most " + Fixed("%.2f", (*gate)->max_p95_ratio) +
                         "x, throughput at least " + Fixed("%.2f", (*gate)->min_throughput_ratio) +
                         "x the serving version's)");
        }
        auto selected = config::SelectVersions(config.version_policy(), m.version_folders);
        if (!selected.ok()) {
          problems.push_back("its versions: " + selected.status().message());
        } else if (selected->size() >= 2) {
          std::vector<std::string> numbers;
          for (const int64_t v : *selected) numbers.push_back(std::to_string(v));
          plan.push_back("versions " + Join(numbers) + " loaded by its version_policy");
        } else {
          const int64_t serving = selected->back();
          std::vector<std::string> older;
          for (const int64_t v : m.version_folders) {
            if (v < serving) older.push_back(std::to_string(v));
          }
          if (older.empty()) {
            problems.push_back("only version " + std::to_string(serving) +
                               ": no previous version to roll back to");
          } else {
            plan.push_back("version " + std::to_string(serving) + " serves, version " +
                           older.back() + " kept on disk");
          }
        }
        if (problems.empty()) return {m.name, Verdict::kPass, Join(plan, "; ")};
        problems.insert(problems.end(), plan.begin(), plan.end());
        return {m.name, Verdict::kFail, Join(problems, "; ")};
      });
  if (item.verdict != Verdict::kPass) {
    item.action = "in each model's config.pbtxt: parameters { key: \"" +
                  std::string(kRolloutGateKey) +
                  "\" value { string_value: \"true\" } }, and keep the previous version: "
                  "its folder beside the new one, or version_policy { latest { num_versions: "
                  "2 } }";
  }
  return item;
}

bool Passed(const std::vector<Item>& items, bool strict) {
  for (const Item& item : items) {
    if (item.verdict == Verdict::kFail) return false;
    if (strict && item.verdict == Verdict::kNotChecked) return false;
  }
  return true;
}

}  // namespace fastpath::cli::preflight
