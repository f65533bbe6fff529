// `fastpath budget`: the memory budget of every model of a repository, without serving
// (issue 13 §2). It loads the models as serve does (the dev profile, so that a model over
// its budget still loads and is reported), lets admission measure each version's seeded
// request at max_batch_size (admission/memory_budget.h), and prints per model: where its
// instances run, weights, the peak at max batch, the margin, the budget, the cap, the
// device's memory and whether it fits; then the total per device.
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <map>

#include "cli.h"
#include "command_line.h"
#include "fastpath/admission/memory_budget.h"
#include "fastpath/common/log.h"
#include "fastpath/gpu/node_snapshot.h"
#include "fastpath/onnxruntime/ort_backend.h"
#include "fastpath/server/server_impl.h"
#include "runtime_options.h"

namespace fastpath::cli {
namespace {

namespace fs = std::filesystem;
using admission::FormatBytes;

struct BudgetFlags {
  fs::path repository;
  std::vector<std::string> models;
  bool json = false;
  config::ThreadPoolMode thread_pool = config::ThreadPoolMode::kPerSession;
  log::Options logging;
};

void DefineBudgetOptions(CLI::App& app, BudgetFlags& flags) {
  OnlyOnce(AddValue(app, "--model-repository", "DIR", "Triton-layout model repository", "",
                    [&flags](const std::string& value) -> Status {
                      if (value.empty()) return InvalidArgument("--model-repository needs a value");
                      flags.repository = value;
                      return Status::Ok();
                    }))
      ->required();
  AddRepeatedValue(app, "--model", "NAME", "only this model (repeatable; default: every model)",
                   [&flags](const std::string& value) -> Status {
                     if (value.empty()) return InvalidArgument("--model needs a value");
                     flags.models.push_back(value);
                     return Status::Ok();
                   });
  AddSwitch(app, "--json", &flags.json, "print JSON instead of a table");
  AddThreadPoolOption(app, &flags.thread_pool);  // as serve: the pools are part of the host memory
  flags.logging.level = log::Level::kWarn;  // the table is the output; loads stay quiet
  AddLogOptions(app, &flags.logging);
}

// What one device's instances need together, over every model.
struct DeviceTotal {
  uint64_t budget_bytes = 0;
  std::optional<uint64_t> total_bytes;
  // Models whose measurement ran out of memory: no budget of theirs is in budget_bytes.
  std::vector<std::string> unmeasured;
  bool fits() const { return unmeasured.empty() && (!total_bytes || budget_bytes <= *total_bytes); }
};

// A model of the repository that was not among --model's: explicit mode leaves it unloaded.
bool NotAsked(const admission::ModelAdmission& m) { return m.unloaded; }

std::string Pad(std::string text, size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

void PrintTable(const admission::AdmissionReport& report,
                const std::map<std::string, DeviceTotal>& devices) {
  const std::vector<std::pair<std::string, size_t>> columns = {
      {"MODEL", 26},  {"VERSION", 8},  {"DEVICE", 7},  {"INSTANCES", 10},
      {"WEIGHTS", 11}, {"PEAK", 11},    {"AT BATCH", 9}, {"MARGIN", 7},
      {"BUDGET", 11},  {"LIMIT", 11},   {"DEVICE TOTAL", 13}, {"FITS", 4}};
  std::string header;
  for (const auto& [name, width] : columns) header += Pad(name, width) + " ";
  std::cout << header.substr(0, header.find_last_not_of(' ') + 1) << "\n";
  for (const admission::ModelAdmission& m : report.models) {
    if (NotAsked(m)) continue;
    std::vector<std::string> cells = {m.name, m.version.empty() ? "-" : m.version};
    if (m.memory_budget) {
      const admission::MemoryBudget& b = *m.memory_budget;
      char margin[16];
      std::snprintf(margin, sizeof margin, "%g%%", b.margin * 100);
      cells.insert(cells.end(),
                   {b.device, std::to_string(b.instances), FormatBytes(b.weights_bytes),
                    FormatBytes(b.peak_bytes), std::to_string(b.rows), margin,
                    b.ran_out_of_memory ? "ran out" : FormatBytes(b.budget_bytes),
                    b.limit_bytes ? FormatBytes(*b.limit_bytes) : "none",
                    b.device_total_bytes ? FormatBytes(*b.device_total_bytes) : "unknown",
                    b.fits() ? "yes" : "no"});
    } else {
      const std::string why = m.state == admission::AdmissionState::kUnavailable
                                  ? "not loaded: " + (m.reasons.empty() ? "" : m.reasons.front())
                                  : "not measured: " + m.memory_budget_note;
      cells.push_back(why);
    }
    std::string line;
    for (size_t i = 0; i < cells.size(); ++i) {
      line += i + 1 < cells.size() && i < columns.size() ? Pad(cells[i], columns[i].second) + " "
                                                         : cells[i];
    }
    std::cout << line << "\n";
  }
  for (const auto& [device, total] : devices) {
    std::cout << "device " << device << ": the instances need " << FormatBytes(total.budget_bytes)
              << " of " << (total.total_bytes ? FormatBytes(*total.total_bytes) : "unknown");
    if (!total.unmeasured.empty()) {
      std::cout << " and an unknown amount more for";
      for (const std::string& model : total.unmeasured) std::cout << " " << model;
      std::cout << " (measured, it ran out of memory): DOES NOT FIT\n";
    } else {
      std::cout << (total.fits() ? "" : ": DOES NOT FIT") << "\n";
    }
  }
}

void PrintJson(const admission::AdmissionReport& report,
               const std::map<std::string, DeviceTotal>& devices, bool fits) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  const auto str = [&w](const std::string& text) {
    w.String(text.c_str(), static_cast<rapidjson::SizeType>(text.size()));
  };
  w.StartObject();
  w.Key("fits");
  w.Bool(fits);
  w.Key("models");
  w.StartArray();
  for (const admission::ModelAdmission& m : report.models) {
    if (NotAsked(m)) continue;
    w.StartObject();
    w.Key("name");
    str(m.name);
    w.Key("version");
    str(m.version);
    w.Key("state");
    w.String(admission::AdmissionStateName(m.state));
    w.Key("reasons");
    w.StartArray();
    for (const std::string& reason : m.reasons) str(reason);
    w.EndArray();
    w.Key("memory_budget");
    if (m.memory_budget) {
      const std::string budget = admission::MemoryBudgetToJson(*m.memory_budget);
      w.RawValue(budget.c_str(), budget.size(), rapidjson::kObjectType);
    } else {
      w.Null();
    }
    w.Key("note");
    str(m.memory_budget_note);
    w.EndObject();
  }
  w.EndArray();
  w.Key("devices");
  w.StartObject();
  for (const auto& [device, total] : devices) {
    w.Key(device.c_str(), static_cast<rapidjson::SizeType>(device.size()));
    w.StartObject();
    w.Key("budget_bytes");
    w.Uint64(total.budget_bytes);
    w.Key("total_bytes");
    if (total.total_bytes) {
      w.Uint64(*total.total_bytes);
    } else {
      w.Null();
    }
    w.Key("fits");
    w.Bool(total.fits());
    w.EndObject();
  }
  w.EndObject();
  w.EndObject();
  std::cout << std::string(buffer.GetString(), buffer.GetSize()) << "\n";
}

}  // namespace

std::map<std::string, uint64_t> DeviceMemoryTotals(const gpu::CapabilitySnapshot& snapshot) {
  std::map<std::string, uint64_t> totals;
  if (snapshot.container.cgroup_memory_limit_bytes) {
    totals["cpu"] = *snapshot.container.cgroup_memory_limit_bytes;
  } else if (const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
             pages > 0 && page > 0) {
    totals["cpu"] = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
  }
  for (const gpu::DriverDevice& device : snapshot.driver.devices) {
    if (device.total_memory_bytes > 0) {
      totals["gpu" + std::to_string(device.ordinal)] = device.total_memory_bytes;
    }
  }
  return totals;
}

int Budget(const std::vector<std::string>& args) {
  BudgetFlags flags;
  CLI::App app{
      "Loads every model of a repository as serve does, measures each one's memory with a "
      "seeded request at max_batch_size, and prints its budget (peak × (1 + "
      "fastpath.memory.margin)) against its cap (fastpath.memory.limit_bytes) and the "
      "device's memory, without serving.",
      "fastpath budget"};
  UseHelpLayout(app, "usage: fastpath budget --model-repository DIR [options]");
  app.footer(
      "Exit codes: 0 every measured model fits, 1 a model does not fit or did not load, "
      "2 usage.");
  DefineBudgetOptions(app, flags);
  if (auto exit_code = ParseCommandLine(app, args)) return *exit_code;
  flags.logging.name = "fastpath budget";
  log::Configure(flags.logging);
  std::error_code ec;
  if (!fs::is_directory(flags.repository, ec)) {
    return UsageError(app, "model repository '" + flags.repository.string() +
                               "' is not a directory");
  }

  const gpu::CapabilitySnapshot snapshot = gpu::TakeNodeSnapshot(FASTPATH_VERSION);
  server::ServerOptions options;
  options.repository.roots = {flags.repository};
  options.repository.mode = repository::ControlMode::kExplicit;
  options.startup_models = flags.models.empty() ? std::vector<std::string>{"*"} : flags.models;
  options.policy.profile = admission::Profile::kDev;  // report what is over, rather than refuse
  options.device_memory_bytes = DeviceMemoryTotals(snapshot);
  options.measure_all_memory_budgets = true;
  SetEngineCacheFromSnapshot(snapshot, flags.repository, fs::path(), &options.repository);
  options.repository.usable_cpu_cores = gpu::UsableCores(snapshot.container);  // as serve
  options.repository.thread_pool = flags.thread_pool;
  auto backend = onnxruntime::CreateOrtBackend(
      OrtOptionsFor(flags.thread_pool, options.repository.usable_cpu_cores));
  if (!backend.ok()) {
    log::Error("ONNX Runtime is unusable: " + backend.status().ToString());
    return kExitRuntime;
  }
  std::shared_ptr<backend::Backend> shared_backend = std::move(backend).value();
  auto server = server::Server::Create(options, shared_backend);
  if (!server.ok()) {
    log::Error(server.status().ToString());
    return kExitRuntime;
  }
  const admission::AdmissionReport report = (*server)->Admission();
  (*server)->Shutdown(std::chrono::milliseconds(0));

  bool fits = true;
  std::map<std::string, DeviceTotal> devices;
  for (const admission::ModelAdmission& m : report.models) {
    if (NotAsked(m)) continue;
    if (m.state == admission::AdmissionState::kUnavailable) fits = false;
    if (!m.memory_budget) continue;
    const admission::MemoryBudget& b = *m.memory_budget;
    if (!b.fits()) fits = false;
    DeviceTotal& total = devices[b.device];
    if (b.ran_out_of_memory) {
      total.unmeasured.push_back(m.name + " v" + m.version);
    } else {
      total.budget_bytes += b.instances_bytes();
    }
    total.total_bytes = b.device_total_bytes;
  }
  for (const auto& [device, total] : devices) fits = fits && total.fits();
  // A model asked for that the repository does not have (the load logged why) did not load
  // either; and a repository with no model has nothing to fit.
  for (const std::string& asked : flags.models) {
    if (std::none_of(report.models.begin(), report.models.end(),
                     [&](const admission::ModelAdmission& m) { return m.name == asked; })) {
      fits = false;
    }
  }
  if (report.models.empty()) {
    log::Error("no model loaded from " + flags.repository.string());
    fits = false;
  }
  if (flags.json) {
    PrintJson(report, devices, fits);
  } else {
    PrintTable(report, devices);
  }
  return fits ? kExitOk : kExitRuntime;
}

}  // namespace fastpath::cli
