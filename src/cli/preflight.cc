// `fastpath preflight` (issue 12 §5): the production checklist, each item verified on this
// node against a model repository, PASS / FAIL / NOT CHECKED with the reason and what to
// do. It gathers what the checks need (preflight_checks.h judges): the capability snapshot
// as `doctor` takes it, the repository loaded as `budget` loads it (the dev profile, so a
// model over its budget is reported rather than refused; only the models that ask for a
// budget are measured, as `serve` measures them), the soak report, the alert rules and,
// when asked, Prometheus.
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli.h"
#include "command_line.h"
#include "fastpath/bench/soak.h"
#include "fastpath/common/log.h"
#include "fastpath/gpu/node_snapshot.h"
#include "fastpath/onnxruntime/ort_backend.h"
#include "fastpath/server/server_impl.h"
#include "preflight_checks.h"
#include "runtime_options.h"

namespace fastpath::cli {
namespace {

namespace fs = std::filesystem;
using preflight::Item;
using preflight::Verdict;

// The shipped rules, relative to an install's (or a bundle's) root and to a checkout.
constexpr const char* kInstalledRules = "share/fastpath/prometheus/fastpath-rules.yaml";
constexpr const char* kCheckoutRules = "deploy/prometheus/fastpath-rules.yaml";
constexpr int kPrometheusTimeoutMs = 5000;

constexpr const char* kPreflightExitCodes =
    "Exit codes: 0 every item passes (NOT CHECKED items do not fail the run unless --strict), "
    "1 an item fails (named on stderr), 2 bad command line.";

struct PreflightFlags {
  fs::path repository;
  std::string soak_report;
  std::string alert_rules;
  std::string prometheus;
  bool json = false;
  bool strict = false;
  config::ThreadPoolMode thread_pool = config::ThreadPoolMode::kPerSession;
  log::Options logging;
};

void DefinePreflightOptions(CLI::App& app, PreflightFlags& flags) {
  OnlyOnce(AddValue(app, "--model-repository", "DIR", "Triton-layout model repository to check", "",
                    [&flags](const std::string& value) -> Status {
                      if (value.empty()) return InvalidArgument("--model-repository needs a value");
                      flags.repository = value;
                      return Status::Ok();
                    }))
      ->required();
  AddText(app, "--soak-report", "FILE", &flags.soak_report,
          "the JSON report of `fastpath bench --soak 30m --json FILE` (item 4: a soak of at "
          "least 30 minutes, complete, without failed requests or drift)");
  AddText(app, "--alert-rules", "FILE", &flags.alert_rules,
          "the Prometheus rule file deployed (default: the shipped one, " +
              std::string(kInstalledRules) + " of the install, else " + kCheckoutRules +
              " of the checkout)");
  AddText(app, "--prometheus", "URL", &flags.prometheus,
          "the Prometheus that scrapes the servers, http://HOST[:9090][/PREFIX]: asked whether "
          "it has fastpath_server_ready (item 5b; without it, NOT CHECKED)");
  AddSwitch(app, "--json", &flags.json, "print JSON instead of a table");
  AddSwitch(app, "--strict", &flags.strict,
            "a NOT CHECKED item fails the run too (for a CI gate that must prove every item)");
  AddThreadPoolOption(app, &flags.thread_pool);  // as the servers run: it shapes the budget
  flags.logging.level = log::Level::kWarn;  // the checklist is the output; loads stay quiet
  AddLogOptions(app, &flags.logging);
}

// The shipped rule file: beside the executable's install (bin/../share/fastpath/...), else in
// the checkout the executable was built in (a build tree under it), else in the current
// directory's checkout. Empty when none is there; `looked_in` lists where it looked.
std::string FindShippedRules(std::vector<std::string>* looked_in) {
  std::vector<fs::path> candidates;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path().parent_path() / kInstalledRules);
    // build/src/cli/fastpath: the checkout is a few folders up.
    fs::path dir = exe.parent_path();
    for (int up = 0; up < 4 && dir.has_parent_path() && dir != dir.root_path(); ++up) {
      dir = dir.parent_path();
      candidates.push_back(dir / kCheckoutRules);
    }
  }
  candidates.push_back(fs::current_path(ec) / kCheckoutRules);
  for (const fs::path& candidate : candidates) {
    const fs::path normal = candidate.lexically_normal();
    looked_in->push_back(normal.string());
    if (fs::is_regular_file(normal, ec)) return normal.string();
  }
  return "";
}

// "http://host:9090/prefix" -> host, port (9090 by default), the path prefix.
StatusOr<bench::MetricsUrl> ParsePrometheusUrl(std::string text) {
  const auto bad = [&text](const std::string& why) {
    return InvalidArgument("--prometheus must be http://HOST[:PORT][/PREFIX], not '" + text +
                           "': " + why);
  };
  std::string rest = text;
  if (rest.rfind("https://", 0) == 0) return bad("only plain http is supported");
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  bench::MetricsUrl url;
  url.port = 9090;
  const size_t slash = rest.find('/');
  url.path = slash == std::string::npos ? "" : rest.substr(slash);
  while (!url.path.empty() && url.path.back() == '/') url.path.pop_back();
  std::string hostport = rest.substr(0, slash);
  if (!hostport.empty() && hostport[0] == '[') {  // [::1]:9090
    const size_t close = hostport.find(']');
    if (close == std::string::npos) return bad("an IPv6 address without its ']'");
    url.host = hostport.substr(1, close - 1);
    hostport = hostport.substr(close + 1);
    if (!hostport.empty() && hostport[0] != ':') return bad("text after the address");
  } else {
    const size_t colon = hostport.find(':');
    url.host = hostport.substr(0, colon);
    hostport = colon == std::string::npos ? "" : hostport.substr(colon);
  }
  if (url.host.empty()) return bad("no host");
  if (!hostport.empty()) {
    FASTPATH_ASSIGN_OR_RETURN(const int64_t port,
                              ParseInt("--prometheus's port", hostport.substr(1), 1, 65535));
    url.port = static_cast<int>(port);
  }
  url.path += std::string("/api/v1/query?query=") + preflight::kMetricsQuery;
  return url;
}

preflight::PartitionEnvironment PartitionFromEnvironment() {
  preflight::PartitionEnvironment env;
  const auto get = [](const char* name) -> std::optional<std::string> {
    const char* value = std::getenv(name);
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
  env.mps_pipe_directory = get("CUDA_MPS_PIPE_DIRECTORY");
  env.mps_active_thread_percentage = get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
  // nvidia-cuda-mps-control -d listens on <pipe directory>/control (default /tmp/nvidia-mps).
  env.mps_control_path =
      (fs::path(env.mps_pipe_directory.value_or("/tmp/nvidia-mps")) / "control").string();
  std::error_code ec;
  env.mps_control_present = fs::exists(env.mps_control_path, ec);
  return env;
}

// Greedy word wrap at `width` columns, every line after the first indented by `indent`.
std::string Wrap(const std::string& text, size_t indent, size_t width = 100) {
  std::string out;
  size_t column = indent;
  std::istringstream words(text);
  bool first = true;
  for (std::string word; words >> word;) {
    if (!first && column + 1 + word.size() > width) {
      out += "\n" + std::string(indent, ' ');
      column = indent;
    } else if (!first) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
    first = false;
  }
  return out;
}

std::string Pad(std::string text, size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

// The checklist numbers: item 5 is two rows, the rules (checked) and the collection.
const char* NumberOf(const std::string& id) {
  static const std::map<std::string, const char*> numbers = {
      {"driver", "1"},    {"memory_budget", "2"}, {"arena", "3"},
      {"soak", "4"},      {"alert_rules", "5a"},  {"metrics_collected", "5b"},
      {"partition", "6"}, {"oom_behaviour", "7"}, {"rollback", "8"}};
  const auto it = numbers.find(id);
  return it == numbers.end() ? "?" : it->second;
}

std::vector<std::string> IdsWith(const std::vector<Item>& items, Verdict verdict) {
  std::vector<std::string> ids;
  for (const Item& item : items) {
    if (item.verdict == verdict) ids.push_back(item.id);
  }
  return ids;
}

std::string JoinIds(const std::vector<std::string>& ids) {
  std::string out;
  for (const std::string& id : ids) out += (out.empty() ? "" : ", ") + id;
  return out;
}

void PrintTable(const std::string& repository, size_t model_count, const std::vector<Item>& items,
                bool strict, bool passed) {
  std::cout << "fastpath preflight: " << repository << " (" << model_count << " model"
            << (model_count == 1 ? "" : "s") << ") on this node\n\n";
  for (const Item& item : items) {
    const std::string head = std::string(NumberOf(item.id)) + ". " + item.title + " ";
    std::string dots = Pad(head, 60);
    for (size_t i = head.size(); i < dots.size(); ++i) dots[i] = '.';
    std::cout << dots << " " << preflight::VerdictLabel(item.verdict) << "\n";
    std::cout << "    " << Wrap(item.summary, 4) << "\n";
    // Models with the same verdict and detail share a row: a repository of many models
    // configured alike reads as one finding, not as many.
    std::vector<std::pair<const preflight::ModelFinding*, std::string>> rows;
    for (const auto& m : item.models) {
      auto same = std::find_if(rows.begin(), rows.end(), [&m](const auto& row) {
        return row.first->verdict == m.verdict && row.first->detail == m.detail;
      });
      if (same == rows.end()) {
        rows.emplace_back(&m, m.model);
      } else {
        same->second += ", " + m.model;
      }
    }
    for (const auto& [m, names] : rows) {
      const std::string lead = "      " + Pad(preflight::VerdictLabel(m->verdict), 12);
      std::cout << lead << Wrap(names + ": " + m->detail, lead.size()) << "\n";
    }
    if (!item.action.empty()) std::cout << "    to do: " << Wrap(item.action, 11) << "\n";
    std::cout << "\n";
  }
  const auto failed = IdsWith(items, Verdict::kFail);
  const auto unchecked = IdsWith(items, Verdict::kNotChecked);
  std::cout << "preflight: " << (passed ? "PASS" : "FAIL");
  if (!failed.empty()) std::cout << "; failing: " << JoinIds(failed);
  if (!unchecked.empty()) {
    std::cout << "; not checked" << (strict ? " (failing under --strict)" : "") << ": "
              << JoinIds(unchecked);
  }
  std::cout << "\n";
}

void PrintJson(const std::string& repository, const std::vector<std::string>& model_names,
               const std::vector<Item>& items, bool strict, bool passed) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  const auto str = [&w](const std::string& text) {
    w.String(text.c_str(), static_cast<rapidjson::SizeType>(text.size()));
  };
  const auto ids = [&](Verdict verdict) {
    w.StartArray();
    for (const std::string& id : IdsWith(items, verdict)) str(id);
    w.EndArray();
  };
  w.StartObject();
  w.Key("passed");
  w.Bool(passed);
  w.Key("strict");
  w.Bool(strict);
  w.Key("repository");
  str(repository);
  w.Key("models");
  w.StartArray();
  for (const std::string& name : model_names) str(name);
  w.EndArray();
  w.Key("failed");
  ids(Verdict::kFail);
  w.Key("not_checked");
  ids(Verdict::kNotChecked);
  w.Key("items");
  w.StartArray();
  for (const Item& item : items) {
    w.StartObject();
    w.Key("number");
    w.String(NumberOf(item.id));
    w.Key("id");
    str(item.id);
    w.Key("title");
    str(item.title);
    w.Key("verdict");
    w.String(preflight::VerdictName(item.verdict));
    w.Key("summary");
    str(item.summary);
    w.Key("action");
    if (item.action.empty()) {
      w.Null();
    } else {
      str(item.action);
    }
    w.Key("models");
    w.StartArray();
    for (const auto& m : item.models) {
      w.StartObject();
      w.Key("name");
      str(m.model);
      w.Key("verdict");
      w.String(preflight::VerdictName(m.verdict));
      w.Key("detail");
      str(m.detail);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  std::cout << std::string(buffer.GetString(), buffer.GetSize()) << "\n";
}

}  // namespace

int Preflight(const std::vector<std::string>& args) {
  PreflightFlags flags;
  CLI::App app{
      "Checks the production checklist on this node against a model repository: the driver "
      "against the runtime, the memory budget with its margin, the arena configuration, a "
      "soak of at least 30 minutes, alert rules and metrics collection, the partition (MIG, "
      "MPS or whole GPU) against the config, out-of-memory behaviour, and a rollback plan. "
      "Each item is PASS, FAIL or NOT CHECKED, with the reason and what to do. The models "
      "are loaded as `fastpath budget` loads them, without serving.",
      "fastpath preflight"};
  UseHelpLayout(app, "usage: fastpath preflight --model-repository DIR [options]");
  app.footer(kPreflightExitCodes);
  DefinePreflightOptions(app, flags);
  if (auto exit_code = ParseCommandLine(app, args)) return *exit_code;
  std::optional<bench::MetricsUrl> prometheus;
  if (!flags.prometheus.empty()) {
    auto url = ParsePrometheusUrl(flags.prometheus);
    if (!url.ok()) return UsageError(app, url.status().message());
    prometheus = *url;
  }
  flags.logging.name = "fastpath preflight";
  log::Configure(flags.logging);
  std::error_code ec;
  if (!fs::is_directory(flags.repository, ec)) {
    return UsageError(app,
                      "model repository '" + flags.repository.string() + "' is not a directory");
  }
  auto read = preflight::ReadRepository(flags.repository);
  if (!read.ok()) {
    std::cerr << "fastpath preflight: " << read.status().message() << "\n";
    return kExitPreflightFailed;
  }
  std::vector<preflight::RepositoryModel> models = *std::move(read);
  if (models.empty()) {
    std::cerr << "fastpath preflight: the model repository '" << flags.repository.string()
              << "' holds no model folder: nothing to check\n";
    return kExitPreflightFailed;
  }

  const gpu::CapabilitySnapshot snapshot = gpu::TakeNodeSnapshot(FASTPATH_VERSION);

  // Load the repository as `budget` does, but measure only the models that ask for a
  // budget, as `serve` would: a model that asks for none is "not checked", by name.
  std::optional<Item> load_failure;
  admission::AdmissionReport report;
  {
    server::ServerOptions options;
    options.repository.roots = {flags.repository};
    options.repository.mode = repository::ControlMode::kExplicit;
    options.startup_models = {"*"};
    options.policy.profile = admission::Profile::kDev;
    options.device_memory_bytes = DeviceMemoryTotals(snapshot);
    options.measure_all_memory_budgets = false;
    SetEngineCacheFromSnapshot(snapshot, flags.repository, fs::path(), &options.repository);
    options.repository.usable_cpu_cores = gpu::UsableCores(snapshot.container);
    options.repository.thread_pool = flags.thread_pool;
    Status failure;
    std::unique_ptr<server::Server> server;
    if (auto backend = onnxruntime::CreateOrtBackend(
            OrtOptionsFor(flags.thread_pool, options.repository.usable_cpu_cores));
        !backend.ok()) {
      failure = backend.status().WithContext("ONNX Runtime is unusable");
    } else if (auto created = server::Server::Create(
                   options, std::shared_ptr<backend::Backend>(std::move(backend).value()));
               !created.ok()) {
      failure = created.status();
    } else {
      server = std::move(created).value();
    }
    if (!server) {
      Item item;
      item.id = "memory_budget";
      item.title = "memory budget with its margin";
      item.verdict = Verdict::kFail;
      item.summary = "the repository could not be loaded: " + failure.message();
      item.action =
          "`fastpath budget --model-repository DIR` shows the same failure; `fastpath doctor` "
          "for ONNX Runtime itself";
      load_failure = std::move(item);
    } else {
      report = server->Admission();
      for (preflight::RepositoryModel& m : models) {
        auto completed = server->GetModelConfig(m.name, "");
        if (completed.ok()) m.completed = *std::move(completed);
      }
      server->Shutdown(std::chrono::milliseconds(0));
    }
  }

  StatusOr<std::string> soak_text = std::string();
  if (!flags.soak_report.empty()) soak_text = ReadTextFile(flags.soak_report);
  std::vector<std::string> looked_in;
  std::string rules = flags.alert_rules;
  if (rules.empty()) rules = FindShippedRules(&looked_in);
  StatusOr<std::string> rules_text = std::string();
  if (!rules.empty()) rules_text = ReadTextFile(rules);
  StatusOr<std::string> answer = std::string();
  if (prometheus) {
    answer =
        bench::MakeHttpMetricsSource(*prometheus, std::chrono::milliseconds(kPrometheusTimeoutMs))
            ->Scrape();
  }

  std::vector<Item> items;
  items.push_back(preflight::CheckDriver(snapshot, models));
  items.push_back(load_failure ? *load_failure : preflight::CheckMemoryBudget(report, models));
  items.push_back(preflight::CheckArena(models));
  items.push_back(preflight::CheckSoak(flags.soak_report, soak_text, models));
  items.push_back(preflight::CheckAlertRules(rules, rules_text, looked_in, models));
  items.push_back(preflight::CheckMetricsCollected(flags.prometheus, answer));
  items.push_back(preflight::CheckPartition(snapshot, PartitionFromEnvironment(), models));
  items.push_back(preflight::CheckOutOfMemory(models));
  items.push_back(preflight::CheckRollback(models));

  const bool passed = preflight::Passed(items, flags.strict);
  std::vector<std::string> names;
  for (const auto& m : models) names.push_back(m.name);
  if (flags.json) {
    PrintJson(flags.repository.string(), names, items, flags.strict, passed);
  } else {
    PrintTable(flags.repository.string(), models.size(), items, flags.strict, passed);
  }
  if (!passed) {
    std::vector<std::string> failing;
    for (const Item& item : items) {
      if (item.verdict == Verdict::kFail ||
          (flags.strict && item.verdict == Verdict::kNotChecked)) {
        failing.push_back(std::string(NumberOf(item.id)) + " " + item.id + " (" +
                          preflight::VerdictLabel(item.verdict) + ")");
      }
    }
    std::cerr << "fastpath preflight: failing: " << JoinIds(failing) << "\n";
    return kExitPreflightFailed;
  }
  return kExitOk;
}

}  // namespace fastpath::cli
