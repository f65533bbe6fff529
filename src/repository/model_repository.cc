#include "fastpath/repository/model_repository.h"

#include <stdlib.h>  // mkdtemp

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "fastpath/backend/placement.h"
#include "fastpath/common/log.h"
#include "fastpath/common/thread_start.h"
#include "fastpath/common/utf8.h"
#include "fastpath/config/ensemble_config.h"
#include "fastpath/config/model_config.h"
#include "fastpath/scheduler/dynamic_batch_scheduler.h"

namespace fastpath::repository {
namespace fs = std::filesystem;

namespace {

constexpr const char* kConfigFile = "config.pbtxt";
constexpr const char* kDefaultModelFile = "model.onnx";

// Ok when the version serves: READY, and some instance of it can run (none may, each out
// of service after running out of memory). Otherwise why not (empty when unknown).
Status Serving(const VersionStatus& v) {
  if (!v.runtime) return Unavailable(v.reason);
  return v.runtime->scheduler ? v.runtime->scheduler->Health() : Status::Ok();
}

StatusOr<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path.string() + ": " + std::strerror(errno));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Numeric folder names only: Triton ignores anything else in a model folder. A name that
// looks meant as a version but is not one ("02", which would be version 2 beside a "2";
// "1.0", "-1", "+5", one past int64) is ignored too, and logged. A folder that cannot be
// listed (its permissions) is an error naming the cause, not a model without versions.
StatusOr<std::vector<int64_t>> VersionFolders(const fs::path& dir) {
  std::vector<int64_t> versions;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return FailedPrecondition("cannot list " + dir.string() + ": " + ec.message());
  for (const auto& entry : it) {
    if (!entry.is_directory(ec)) continue;
    const std::string name = entry.path().filename().string();
    if (name.empty()) continue;
    int64_t v = 0;
    auto [ptr, err] = std::from_chars(name.data(), name.data() + name.size(), v);
    const bool leading_zero = name.size() > 1 && name[0] == '0';
    if (err == std::errc() && ptr == name.data() + name.size() && v >= 0 && !leading_zero) {
      versions.push_back(v);
    } else if (std::isdigit(static_cast<unsigned char>(name[0])) || name[0] == '-' ||
               name[0] == '+') {
      log::Warn("version folder " + ToValidUtf8(entry.path().string()) +
                " is ignored: a version is a whole number from 0 to " +
                std::to_string(std::numeric_limits<int64_t>::max()) +
                " written with no sign or leading zero (as Triton)");
    }
  }
  std::sort(versions.begin(), versions.end());
  return versions;
}

// Whether a GPU instance computes on its GPU: some node placed on a provider other than the
// CPU's. Unknown (a backend that does not audit): taken at its config's word.
bool RunsOnItsGpu(const backend::PlacementAudit* placement) {
  return placement == nullptr ||
         placement->NodesOn(backend::kCpuProviderName) < placement->total_nodes;
}

}  // namespace

class LoadFolder {
 public:
  // Writes `files` into a new folder under `parent` (empty: the system's temporary folder).
  static StatusOr<std::shared_ptr<const LoadFolder>> Write(
      fs::path parent, const std::string& model, const std::map<std::string, std::string>& files) {
    std::error_code ec;
    if (parent.empty()) parent = fs::temp_directory_path(ec);
    if (ec) {
      const char* tmpdir = std::getenv("TMPDIR");
      return Internal("no temporary folder for the load's files (TMPDIR is " +
                      (tmpdir != nullptr ? "'" + std::string(tmpdir) + "'" : std::string("unset")) +
                      "): " + ec.message());
    }
    // The model's name helps whoever lists the folder; cut (at a character's end), so that
    // it fits a file name.
    const std::string cut = model.substr(0, 64);
    std::string pattern =
        (parent / ("fastpath-load-" + cut.substr(0, Utf8ValidPrefix(cut)) + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      return Internal("cannot make a folder for the load's files in " + parent.string() + ": " +
                      std::strerror(errno));
    }
    std::shared_ptr<const LoadFolder> folder(new LoadFolder(pattern));
    for (const auto& [path, contents] : files) {
      const fs::path file = folder->path_ / path;
      fs::create_directories(file.parent_path(), ec);
      std::ofstream out(file, std::ios::binary | std::ios::trunc);
      out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
      out.close();
      if (ec || !out) {
        return Internal("cannot write the load's file '" + path + "' into " + pattern +
                        (ec ? ": " + ec.message() : std::string(" (disk full?)")));
      }
    }
    return folder;
  }
  ~LoadFolder() {
    std::error_code ec;
    fs::remove_all(path_, ec);
    if (ec) log::Warn("cannot remove " + path_.string() + ", a load's files: " + ec.message());
  }
  LoadFolder(const LoadFolder&) = delete;
  LoadFolder& operator=(const LoadFolder&) = delete;

  const fs::path& path() const { return path_; }

 private:
  explicit LoadFolder(fs::path path) : path_(std::move(path)) {}
  fs::path path_;
};

namespace {

// Whether `name` can be a folder of the root at all (its bytes aside).
bool NamesAFolder(std::string_view name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string_view("/\0", 2)) == std::string_view::npos;
}

}  // namespace

Status CheckModelName(std::string_view name) {
  if (!NamesAFolder(name)) {
    return InvalidArgument("'" + std::string(name) +
                           "' is not a model name (the name of a folder in the repository)");
  }
  if (!IsValidUtf8(name)) {
    return InvalidArgument("'" + ToValidUtf8(name) +
                           "' is not a model name: it is not valid UTF-8 (a model's name goes into "
                           "JSON, Prometheus labels and protobuf strings, which must be UTF-8)");
  }
  return Status::Ok();
}

StatusOr<ControlMode> ParseControlMode(const std::string& text) {
  if (text == "none") return ControlMode::kNone;
  if (text == "explicit") return ControlMode::kExplicit;
  if (text == "poll") return ControlMode::kPoll;
  return InvalidArgument("--model-control-mode must be none, explicit or poll, not '" + text + "'");
}

ModelVersion::~ModelVersion() {
  if (scheduler) scheduler->Stop();
}

ModelRepository::ModelRepository(RepositoryOptions options, backend::Backend* backend,
                                 scheduler::StepBinder step_binder)
    : options_(std::move(options)), backend_(backend), step_binder_(std::move(step_binder)) {
  if (!step_binder_) {
    step_binder_ = [](const std::string& model,
                      const std::string&) -> StatusOr<scheduler::StepRunner> {
      return FailedPrecondition("cannot run model '" + model +
                                "' as an ensemble step: the repository has no step binder");
    };
  }
}

ModelRepository::~ModelRepository() { StopAll(); }

std::vector<std::string> ModelRepository::ModelFolders(std::vector<std::string>* unreadable) const {
  std::set<std::string> names;
  for (const fs::path& root : options_.roots) {
    std::error_code ec;
    fs::directory_iterator it(root, ec);
    for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
      std::error_code entry_ec;
      if (it->is_directory(entry_ec) && it->path().filename().string()[0] != '.') {
        names.insert(it->path().filename().string());
      }
    }
    if (ec && unreadable != nullptr) unreadable->push_back(root.string() + ": " + ec.message());
  }
  return {names.begin(), names.end()};
}

std::vector<fs::path> ModelRepository::FoldersOf(const std::string& name) const {
  std::vector<fs::path> folders;
  for (const fs::path& root : options_.roots) {
    std::error_code ec;
    if (fs::is_directory(root / name, ec)) folders.push_back(root / name);
  }
  return folders;
}

std::string ModelRepository::NoFolder(const std::string& name) const {
  std::string where;
  std::string unreadable;  // a folder that may be there, behind a permission
  for (const fs::path& root : options_.roots) {
    where += (where.empty() ? "" : ", ") + root.string();
    std::error_code ec;
    (void)fs::status(root / name, ec);
    if (ec && ec != std::errc::no_such_file_or_directory) {
      unreadable += "; " + (root / name).string() + ": " + ec.message();
    }
  }
  return "no model folder '" + name + "' in " + (options_.roots.size() > 1 ? "any of " : "") +
         where + unreadable;
}

scheduler::OutputShaper ModelRepository::OutputShaperFor(const inference::ModelConfig& config) {
  const auto& outputs = config.output();
  if (std::none_of(outputs.begin(), outputs.end(), [](const auto& o) { return o.has_reshape(); })) {
    return nullptr;
  }
  // Outputs with a reshape reach clients in their `dims`.
  return [config = &config](std::vector<Tensor>* tensors) {
    // The model's answer and its config disagree: the server's fault, not the request's.
    const Status shaped = config::ReshapeOutputsForClient(*config, tensors);
    return shaped.ok() ? shaped : Internal(shaped.message());
  };
}

std::string ModelRepository::Fingerprint(const std::string& name) const {
  // Names, permissions, sizes and modification times of everything under the model folder:
  // cheap, and any copy of a new model file or config changes it, and so does a chmod that
  // makes an unreadable file readable (its failed load is then tried again). Symbolic links are
  // followed, and where each one points is part of it: a version folder that is a link swapped to
  // another checkout (git-sync, a ConfigMap's ..data) is a change even when the files look alike.
  // Bounded, so that a link loop cannot make a poll endless. With several roots, the
  // folder of each that has one: a second folder of the name appearing is a change too.
  constexpr int kMaxDepth = 8;
  constexpr int kMaxEntries = 100000;
  std::ostringstream out;
  for (const fs::path& folder : FoldersOf(name)) {
    std::error_code ec;
    // The model folder itself may be the link that was swapped.
    if (fs::is_symlink(folder, ec)) out << "->" << fs::read_symlink(folder, ec).string() << '\n';
    int entries = 0;
    for (auto it =
             fs::recursive_directory_iterator(folder,
                                              fs::directory_options::follow_directory_symlink |
                                                  fs::directory_options::skip_permission_denied,
                                              ec);
         !ec && it != fs::recursive_directory_iterator() && ++entries <= kMaxEntries;
         it.increment(ec)) {
      // An entry's own failure (a dangling link) is written as it is, and never ends the walk.
      std::error_code entry_ec;
      out << it->path().string() << ':' << static_cast<unsigned>(it->status(entry_ec).permissions())
          << ':';
      if (it->is_symlink(entry_ec)) {
        out << "->" << fs::read_symlink(it->path(), entry_ec).string() << ':';
      }
      if (it->is_regular_file(entry_ec)) {
        out << it->file_size(entry_ec) << ':'
            << it->last_write_time(entry_ec).time_since_epoch().count();
      }
      out << '\n';
      if (it.depth() >= kMaxDepth) it.disable_recursion_pending();
    }
  }
  return out.str();
}

namespace {

// What auto-complete filled in that changes how the model is served, as Triton's backend
// logs the max_batch_size it fills in.
void LogCompletion(const std::string& name, int64_t version, const inference::ModelConfig& config,
                   const config::CompletionNotes& notes) {
  const std::string model = "model '" + name + "' v" + std::to_string(version) + ": ";
  const std::string batch = std::to_string(config.max_batch_size());
  if (notes.dynamic_batching_added) {
    log::Info(model + "its config leaves its tensors to the model, so it batches as Triton " +
              "completes it: " +
              (notes.max_batch_size_filled ? "max_batch_size " + batch + " and " : "") +
              "dynamic_batching {} (list the inputs and outputs in config.pbtxt to choose)");
  } else if (!notes.dynamic_batching_withheld.empty()) {
    log::Warn(model + "each request runs alone, without the dynamic_batching {} Triton would " +
              "add: " + notes.dynamic_batching_withheld + ", and batched requests could get " +
              "each other's rows (write dynamic_batching in config.pbtxt if every first dim " +
              "is the batch)");
  } else if (notes.max_batch_size_filled) {
    log::Info(model + "max_batch_size " + batch + " filled in from the model (write " +
              "max_batch_size in config.pbtxt to choose)");
  }
}

}  // namespace

StatusOr<std::shared_ptr<ModelVersion>> ModelRepository::LoadVersion(
    const std::string& name, const fs::path& dir, int64_t version,
    const inference::ModelConfig& base, const config::CompletionOptions& completion) const {
  const std::string file_name =
      base.default_model_filename().empty() ? kDefaultModelFile : base.default_model_filename();
  fs::path file = dir / std::to_string(version) / file_name;
  std::error_code ec;
  // As Triton's ONNX Runtime backend: a model file that is a folder (a model with its
  // weights in external data files beside it) is the model.onnx inside it.
  if (fs::is_directory(file, ec)) file /= kDefaultModelFile;
  if (!fs::is_regular_file(file, ec)) {
    if (ec && ec != std::errc::no_such_file_or_directory) {  // its folder's permissions
      return FailedPrecondition("model file " + file.string() + " cannot be read: " + ec.message());
    }
    return NotFound("model file " + file.string() +
                    (fs::exists(file, ec) ? " is not a regular file" : " is missing"));
  }

  auto runtime = std::make_shared<ModelVersion>();
  runtime->model_name = name;
  runtime->version = version;
  runtime->config = base;
  runtime->folder = dir / std::to_string(version);
  FASTPATH_ASSIGN_OR_RETURN(const backend::ModelSignature signature, backend_->Inspect(file));
  config::CompletionNotes notes;
  FASTPATH_RETURN_IF_ERROR(
      config::CompleteAndValidate(signature, &runtime->config, completion, &notes));
  LogCompletion(name, version, runtime->config, notes);
  if (const auto unread = config::UnreadParameters(runtime->config); !unread.empty()) {
    std::string keys;
    for (const std::string& key : unread) keys += (keys.empty() ? "" : ", ") + key;
    log::Info("model '" + name + "' v" + std::to_string(version) +
              ": parameters fastpath does not read, accepted as Triton hands them to its " +
              "backend: " + keys);
  }

  // What an instance answers after it runs out of memory before it serves again.
  std::optional<scheduler::RecoveryProbe> probe;
  if (options_.recovery_probe) {
    auto made = options_.recovery_probe(dir, runtime->config);
    if (made.ok()) {
      probe = std::move(made).value();
    } else {
      log::Info("model '" + name + "' v" + std::to_string(version) +
                ": its instances are trusted after running out of memory, without a check: " +
                made.status().message());
    }
  }
  // Threads: what the config says, else the usable cores, shared by the CPU instances
  // (--ort-thread-pool per-session) or by every session in one pool (global).
  if (const auto threads =
          config::DefaultIntraOpThreads(runtime->config, options_.usable_cpu_cores)) {
    const bool global = config::UsesGlobalThreadPool(runtime->config, options_.thread_pool);
    // Under --ort-thread-pool global, a model that sets inter_op_thread_count keeps pools of
    // its own (UsesGlobalThreadPool).
    const std::string why = options_.thread_pool == config::ThreadPoolMode::kGlobal
                                ? "pools of its own, as it sets inter_op_thread_count; "
                                : "--ort-thread-pool per-session; ";
    log::Info("model '" + name + "' v" + std::to_string(version) + ": " +
              (global ? std::string("its CPU instances run on the process-wide intra-op thread "
                                    "pool (--ort-thread-pool global; ")
                      : std::to_string(*threads) + " intra-op thread" + (*threads == 1 ? "" : "s") +
                            " per CPU instance (" + why) +
              std::to_string(options_.usable_cpu_cores) +
              " usable cores from the affinity mask and the cgroup quota, shared by " +
              (global ? "the sessions of every model that sets no thread count"
                      : "the model's CPU instances") +
              "); set parameters intra_op_thread_count to choose");
  }
  std::vector<std::unique_ptr<backend::ModelInstance>> instances;
  for (const auto& group : runtime->config.instance_group()) {
    std::vector<int> devices = {0};
    const bool on_gpu = group.kind() == inference::ModelInstanceGroup::KIND_GPU;
    if (on_gpu && group.gpus_size() > 0) devices.assign(group.gpus().begin(), group.gpus().end());
    for (int device : devices) {
      FASTPATH_ASSIGN_OR_RETURN(
          backend::InstanceOptions options,
          config::InstanceOptionsFor(runtime->config, group, device, options_.usable_cpu_cores,
                                     options_.thread_pool));
      options.allow_cpu_fallback_for_gpu = options_.allow_cpu_fallback_for_gpu;
      options.engine_cache = options_.trt_engine_cache;
      options.engine_cache.model_name = name;
      options.engine_cache.model_version = version;
      if (auto cc = options_.compute_capabilities.find(device);
          cc != options_.compute_capabilities.end()) {
        options.engine_cache.compute_capability = cc->second;
      }
      for (int i = 0; i < std::max(1, group.count()); ++i) {
        FASTPATH_ASSIGN_OR_RETURN(auto created, backend_->CreateInstance(file, options));
        auto instance = std::make_unique<scheduler::RecoveringInstance>(
            std::move(created),
            "instance " + std::to_string(instances.size()) + " of model '" + name +
                "' version " + std::to_string(version),
            probe, [backend = backend_, file, options] {
              return backend->CreateInstance(file, options);
            });
        if (const backend::PlacementAudit* placement = instance->placement()) {
          // Default-visible on purpose: where the nodes run is the first thing to know
          // when a model is slow, and ORT itself says it only at verbose level.
          log::Info("model '" + name + "' v" + std::to_string(version) + " instance " +
                    std::to_string(instances.size()) + ": placement " +
                    backend::PlacementSummary(*placement));
          runtime->placements.push_back(*placement);
          runtime->audited_instances.push_back(instance.get());
        }
        // A GPU instance whose every node fell back to the CPU (served DEGRADED in the dev
        // profile) computes nothing on its GPU: that GPU's health is not this model's.
        if (on_gpu && RunsOnItsGpu(instance->placement())) {
          auto at = std::lower_bound(runtime->gpus.begin(), runtime->gpus.end(), device);
          if (at == runtime->gpus.end() || *at != device) runtime->gpus.insert(at, device);
        }
        instances.push_back(std::move(instance));
      }
    }
  }
  if (instances.empty()) return InvalidArgument("the config declares no model instance");
  runtime->instance_count = instances.size();
  scheduler::OutputShaper shape_outputs = OutputShaperFor(runtime->config);
  if (runtime->config.has_dynamic_batching() && runtime->config.max_batch_size() > 0) {
    // --max-queue-size bounds every queue whose policy sets no max_queue_size.
    FASTPATH_ASSIGN_OR_RETURN(
        auto batching,
        scheduler::DynamicBatchOptionsFromConfig(runtime->config, options_.max_queue_size));
    batching.clock = options_.clock;
    batching.shape_outputs = std::move(shape_outputs);
    FASTPATH_ASSIGN_OR_RETURN(runtime->scheduler,
                              scheduler::DynamicBatchScheduler::Create(
                                  std::move(instances), &runtime->stats, std::move(batching)));
    return runtime;
  }
  scheduler::InstancePoolOptions pool;
  pool.max_queue_size = options_.max_queue_size;
  pool.clock = options_.clock;
  pool.shape_outputs = std::move(shape_outputs);
  FASTPATH_ASSIGN_OR_RETURN(runtime->scheduler, scheduler::InstancePoolScheduler::Create(
                                                    std::move(instances), &runtime->stats, pool));
  return runtime;
}

StatusOr<ModelRepository::Override> ModelRepository::ReadOverride(const std::string& name,
                                                                  const LoadOverride& load) const {
  FASTPATH_RETURN_IF_ERROR(CheckModelName(name));
  Override out;
  FASTPATH_ASSIGN_OR_RETURN(
      out.config, config::ParseModelConfigJson(load.config_json, "load parameter 'config'",
                                               &out.parse_details));
  if (!load.files.empty()) {
    FASTPATH_ASSIGN_OR_RETURN(out.folder,
                              LoadFolder::Write(options_.load_files_root, name, load.files));
  }
  return out;
}

ModelRepository::Unchanged ModelRepository::UnchangedCandidates(const ModelState& serving) {
  Unchanged out;
  if (serving.canary) return out;  // its phase ends with the next load
  for (const VersionStatus& v : serving.versions) {
    // One with an instance out of service (a run out of memory) is loaded again, as a
    // reload is asked to.
    if (!v.runtime || v.runtime->files.empty() || !v.runtime->scheduler ||
        v.runtime->scheduler->InstancesOutOfService() > 0) {
      continue;
    }
    out.emplace(v.version, v.runtime);
  }
  return out;
}

std::string ModelRepository::VersionFingerprint(const std::string& fingerprint, const fs::path& dir,
                                                int64_t version) {
  const std::string prefix = dir.string() + "/";
  const std::string own = std::to_string(version);
  std::string out;
  std::istringstream lines(fingerprint);
  for (std::string line; std::getline(lines, line);) {
    if (line.compare(0, prefix.size(), prefix) == 0) {
      // The first name under the model folder: another version's folder is left out.
      const size_t end = line.find_first_of("/:", prefix.size());
      const std::string first = line.substr(prefix.size(), end - prefix.size());
      if (!first.empty() && first != own &&
          std::all_of(first.begin(), first.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        continue;
      }
    }
    out += line;
    out += '\n';
  }
  return out;
}

ModelRepository::ModelState ModelRepository::LoadFromDisk(const std::string& name,
                                                          const Override* override,
                                                          const Unchanged& unchanged) const {
  ModelState state;
  if (override != nullptr) state.folder = override->folder;
  state.overridden = override != nullptr;
  const std::vector<fs::path> folders = state.folder ? std::vector<fs::path>{} : FoldersOf(name);
  state.dir = state.folder ? state.folder->path() : folders.empty() ? fs::path() : folders[0];
  // A load's own files are the server's: nothing else writes them while they are read.
  if (!state.folder) state.fingerprint = Fingerprint(name);
  const fs::path& dir = state.dir;

  auto fail = [&](const Status& status) {
    state.reason = status.message();
    state.failure = status.code();
    state.folder.reset();  // nothing was loaded from it
    log::Error("model '" + ToValidUtf8(name) + "' failed to load: " + state.reason);
    return state;
  };
  // Listed UNAVAILABLE with the reason, never served: its name could not be quoted.
  if (Status valid = CheckModelName(name); !valid.ok()) return fail(valid);
  // Gone since the load looked (moved away while its steps loaded): never a relative path.
  if (!state.folder && folders.empty()) return fail(NotFound(NoFolder(name)));
  if (folders.size() > 1) {
    std::string where;
    for (const fs::path& folder : folders) where += (where.empty() ? "" : ", ") + folder.string();
    return fail(FailedPrecondition("the model name is not unique across the repositories: " +
                                   where + " (rename or remove all but one)"));
  }

  inference::ModelConfig config;
  config::ParseDetails details;
  std::error_code ec;
  if (override != nullptr) {
    config = override->config;
    details = override->parse_details;
  } else if (const fs::path file = dir / kConfigFile; fs::exists(fs::symlink_status(file, ec)) ||
                                                      ec != std::errc::no_such_file_or_directory) {
    // There, whatever it points to: a link to nothing (a ConfigMap mounted elsewhere) or a
    // file that cannot be read is an error, never a model served on a config completed from
    // the model alone, without its instance groups, limits and policies.
    if (ec) return fail(FailedPrecondition("cannot read " + file.string() + ": " + ec.message()));
    if (!fs::is_regular_file(file, ec)) {
      std::error_code target;  // what the name leads to, through a link
      (void)fs::status(file, target);
      std::error_code link_ec;
      std::string why = " is not a file";
      if (target == std::errc::no_such_file_or_directory) {
        why = " is a symbolic link to " + fs::read_symlink(file, link_ec).string() +
              ", which does not exist";
      } else if (target) {
        why = " cannot be read: " + target.message();
      }
      return fail(InvalidArgument(file.string() + why));
    }
    auto text = ReadFile(file);
    if (!text.ok()) return fail(text.status());
    auto parsed = config::ParseModelConfig(*text, file.string(), &details);
    if (!parsed.ok()) return fail(parsed.status());
    config = std::move(parsed).value();
  }
  for (const auto& step : config.ensemble_scheduling().step()) {
    state.step_models.push_back(step.model_name());
  }
  if (!config.name().empty() && config.name() != name) {
    return fail(InvalidArgument((override != nullptr
                                     ? "the load's config names the model '" + config.name() +
                                           "' but the request loads '" + name + "'"
                                     : "config.pbtxt names the model '" + config.name() +
                                           "' but its folder is '" + name + "'")));
  }
  config.set_name(name);
  if (Status s = config::ValidateModelConfig(config); !s.ok()) return fail(s);
  // As Triton, which reads them at load: a label file named but absent is a typo to fix now,
  // not at the first classification.
  for (const auto& output : config.output()) {
    if (output.label_filename().empty()) continue;
    if (!fs::is_regular_file(dir / output.label_filename(), ec)) {
      return fail(NotFound("output '" + output.name() + "': label_filename '" +
                           output.label_filename() + "' is not a file in " +
                           (state.folder ? std::string("the load's files") : dir.string())));
    }
  }

  auto listed = VersionFolders(dir);
  if (!listed.ok()) return fail(listed.status());
  const std::vector<int64_t>& available = *listed;
  if (available.empty()) {
    const bool ensemble = config::IsEnsemble(config);
    return fail(NotFound(
        state.folder
            ? "no numeric version folder among the load's files (give e.g. " +
                  std::string(ensemble ? "'file:1/.keep': an ensemble's may hold anything"
                                       : "'file:1/model.onnx'") +
                  ")"
            : "no numeric version folder in " + dir.string() +
                  (ensemble ? " (an ensemble needs an empty one, e.g. " + name + "/1/)" : "")));
  }
  auto selected = config::SelectVersions(config.version_policy(), available);
  if (!selected.ok()) return fail(selected.status());
  if (selected->empty()) return fail(NotFound("the version policy selects no version"));

  state.config = config;
  state.parse_details = details;
  LoadVersions(name, *selected, state, unchanged);
  // A load's files that nothing loaded from go now, not with the failed state: every load
  // with files writes a folder of its own, so none is read again.
  if (std::none_of(state.versions.begin(), state.versions.end(),
                   [](const VersionStatus& v) { return v.runtime != nullptr; })) {
    state.folder.reset();
  }
  return state;
}

void ModelRepository::LoadVersions(const std::string& name, const std::vector<int64_t>& selected,
                                   ModelState& state, const Unchanged& unchanged) const {
  const inference::ModelConfig& config = *state.config;
  const fs::path& dir = state.dir;
  for (int64_t v : selected) {
    VersionStatus vs;
    vs.version = v;
    // As Triton: a version whose files (and the model's config and shared files) are as
    // when it was loaded keeps serving as it is, its statistics and baselines with it. A
    // version added or removed beside it no longer reloads it, twice its memory for a while.
    const std::string files =
        state.fingerprint.empty() || state.overridden || state.folder || config::IsEnsemble(config)
            ? std::string()
            : VersionFingerprint(state.fingerprint, dir, v);
    if (auto it = unchanged.find(v);
        it != unchanged.end() && !files.empty() && it->second->files == files) {
      vs.state = server::ModelState::kReady;
      vs.runtime = it->second;
      vs.kept = true;
      log::Info("model '" + name + "' version " + std::to_string(v) +
                " is unchanged: it serves on as loaded");
      state.versions.push_back(std::move(vs));
      continue;
    }
    auto runtime =
        config::IsEnsemble(config)
            ? LoadEnsembleVersion(name, v, config)
            : LoadVersion(name, dir, v, config,
                          {.max_batch_size_set = state.parse_details.max_batch_size_set});
    if (runtime.ok()) {
      (*runtime)->load_folder = state.folder;
      (*runtime)->files = files;
    }
    if (runtime.ok() && options_.admit) {
      // Admission before publication: a refused version is never READY, not even briefly.
      if (Status s = options_.admit(dir, **runtime); !s.ok()) runtime = s;
      // Admission's own runs (warm-up, self-test, memory budget) are not clients'
      // inferences: the statistics start at publication.
      if (runtime.ok()) (*runtime)->stats.Reset();
    }
    if (runtime.ok()) {
      vs.state = server::ModelState::kReady;
      vs.runtime = std::move(runtime).value();
      log::Info("model '" + name + "' version " + std::to_string(v) + " is READY");
    } else {
      vs.state = server::ModelState::kUnavailable;
      vs.reason = runtime.status().message();
      vs.failure = runtime.status().code();
      log::Error("model '" + name + "' version " + std::to_string(v) +
                 " failed to load: " + vs.reason);
    }
    state.versions.push_back(std::move(vs));
  }
}

std::string ModelRepository::KeepServing(ModelState& serving, ModelState& fresh) {
  const auto ready = [](const VersionStatus& v) { return v.runtime != nullptr; };
  if (std::none_of(serving.versions.begin(), serving.versions.end(), ready)) {
    // Nothing served before (a new model): one whose failure may pass when tried again
    // keeps no fingerprint, so that the next poll reads it again.
    if (ReadAgain(fresh)) fresh.fingerprint.clear();
    return "";
  }
  if (!fresh.reason.empty() || std::none_of(fresh.versions.begin(), fresh.versions.end(), ready)) {
    // Nothing new serves: the model stays as it was. The fingerprint is the new one, so
    // that a poll does not reload the same broken files again, unless the failure may pass
    // when tried again (UNAVAILABLE: the rollout gate found the serving version too busy to
    // time, or the folder changed while it was read): then the next poll reads it again.
    std::string why = fresh.reason;
    for (const auto& v : fresh.versions) {
      why += (why.empty() ? "" : "; ") + std::string("version ") + std::to_string(v.version) +
             ": " + v.reason;
    }
    why = "the reload failed, and the previous load keeps serving: " + why;
    ModelState kept = std::move(serving);
    kept.reload_failure = why;
    if (!fresh.fingerprint.empty() && !ReadAgain(fresh)) kept.fingerprint = fresh.fingerprint;
    serving = std::move(fresh);
    fresh = std::move(kept);
    return why;
  }
  // Some new versions serve: each one that failed keeps its previous load, if it had one.
  // One that may pass when read again is: the old fingerprint stays.
  if (ReadAgain(fresh)) fresh.fingerprint = serving.fingerprint;
  std::string why;
  for (VersionStatus& v : fresh.versions) {
    if (v.runtime) continue;
    for (VersionStatus& before : serving.versions) {
      if (before.version != v.version || !before.runtime) continue;
      const std::string failure = "version " + std::to_string(v.version) +
                                  " failed to reload, and its previous load keeps serving: " +
                                  v.reason;
      why += (why.empty() ? "" : "; ") + failure;
      v.state = server::ModelState::kReady;
      v.reason = failure;
      v.runtime = std::move(before.runtime);
    }
  }
  return why;
}

bool ModelRepository::ReadAgain(const ModelState& fresh) {
  // UNAVAILABLE (busy, the folder changed while read) and RESOURCE_EXHAUSTED (out of memory,
  // the thread limit): what other models hold may be given back.
  const auto may_pass = [](StatusCode code) {
    return code == StatusCode::kUnavailable || code == StatusCode::kResourceExhausted;
  };
  if (!fresh.reason.empty()) return may_pass(fresh.failure);
  return std::any_of(fresh.versions.begin(), fresh.versions.end(), [&](const VersionStatus& v) {
    return v.runtime == nullptr && may_pass(v.failure);
  });
}

void ModelRepository::Retire(const ModelState& state) {
  std::vector<std::shared_ptr<ModelVersion>> versions;
  for (const auto& v : state.versions) {
    if (v.runtime) versions.push_back(v.runtime);
  }
  if (state.canary) {
    log::Info("model '" + state.canary->phase.model +
              "': its canary phase ends with this reload or unload; the load it replaced goes");
    versions.push_back(state.canary->phase.stable);
  }
  Retire(std::move(versions));
}

void ModelRepository::Retire(std::vector<std::shared_ptr<ModelVersion>> versions) {
  versions.erase(std::remove_if(versions.begin(), versions.end(),
                                [](const auto& v) { return !v || !v->scheduler; }),
                 versions.end());
  // A canary phase's stable load may also be one of its state's versions.
  std::sort(versions.begin(), versions.end());
  versions.erase(std::unique(versions.begin(), versions.end()), versions.end());
  if (versions.empty()) return;
  Clock* clock = OrSteadyClock(options_.clock);
  std::unique_lock lock(retire_mu_);
  if (retire_stop_) {
    // StopAll has flushed the retiring versions and joined the thread: stop these here.
    lock.unlock();
    for (auto& version : versions) version->scheduler->Stop();
    return;
  }
  if (!retire_thread_.joinable()) {
    Status started = StartThreads([&] { retire_thread_ = std::thread([this] { RetireLoop(); }); },
                                  [] {}, "the thread that retires replaced versions");
    if (!started.ok()) {
      // Stopped now, draining what they accepted, without the grace: an ensemble request
      // that bound one of them and has not reached it yet fails that step.
      lock.unlock();
      log::Warn(started.message() + "; the replaced versions are stopped now");
      for (auto& version : versions) version->scheduler->Stop();
      return;
    }
  }
  for (auto& version : versions) retiring_.emplace_back(clock->Now() + kRetireGrace, version);
  retire_cv_.notify_all();
}

void ModelRepository::RetireLoop() {
  Clock* clock = OrSteadyClock(options_.clock);
  std::unique_lock lock(retire_mu_);
  for (;;) {
    if (retiring_.empty()) {
      if (retire_stop_) return;
      retire_cv_.wait(lock);
      continue;
    }
    if (!retire_stop_ && clock->Now() < retiring_.front().first) {
      clock->WaitUntil(lock, retire_cv_, retiring_.front().first);
      continue;
    }
    std::shared_ptr<ModelVersion> version = std::move(retiring_.front().second);
    retiring_.pop_front();
    if (!retire_stop_ && version->ensemble_holds.load(std::memory_order_acquire) > 0) {
      // An ensemble request accepted before still has a step to run on it: look again later.
      retiring_.emplace_back(clock->Now() + kRetireGrace, std::move(version));
      continue;
    }
    lock.unlock();
    version->scheduler->Stop();  // drains what it accepted
    version.reset();
    lock.lock();
  }
}

void ModelRepository::StopVersions(const ModelState& state) {
  for (const auto& v : state.versions) {
    if (v.runtime && v.runtime->scheduler && !v.kept) v.runtime->scheduler->Stop();
  }
  if (state.canary && state.canary->phase.stable->scheduler) {
    state.canary->phase.stable->scheduler->Stop();
  }
}

Status ModelRepository::LoadStartupModels(const std::vector<std::string>& explicit_models) {
  std::vector<std::string> names;
  const bool all = options_.mode != ControlMode::kExplicit ||
                   std::find(explicit_models.begin(), explicit_models.end(), "*") !=
                       explicit_models.end();
  names = all ? ModelFolders() : explicit_models;
  // The poll thread starts before the models: under a thread limit (a pod's pids limit)
  // the models that do not fit fail, not the server's own thread. Its first poll waits
  // for the start-up loads.
  if (options_.mode == ControlMode::kPoll && !poll_thread_.joinable()) {
    FASTPATH_RETURN_IF_ERROR(
        StartThreads([&] { poll_thread_ = std::thread([this] { PollLoop(); }); }, [] {},
                     "the repository's poll thread"));
  }
  for (const auto& name : names) {
    {
      // Already loaded as the step of an ensemble loaded before it: named here, it is the
      // user's too (unload_dependents leaves it).
      std::lock_guard lock(mu_);
      if (auto it = models_.find(name); it != models_.end()) {
        it->second.loaded_as_step = false;
        continue;
      }
    }
    // A model that fails to load is logged with its reason and never stops the others;
    // one that failed before it was read (no folder, a bad name) is logged here.
    if (Status s = Load(name); !s.ok()) {
      std::lock_guard lock(mu_);
      if (models_.count(name) == 0) {
        log::Error("model '" + ToValidUtf8(name) + "' is not loaded: " + s.message());
      }
    }
  }
  {
    std::lock_guard lock(poll_mu_);
    startup_loaded_ = true;
  }
  poll_cv_.notify_all();
  return Status::Ok();
}

Status ModelRepository::Load(const std::string& name, const LoadOverride& load) {
  // Not a folder's name at all; one that is not UTF-8 fails in LoadFromDisk, listed with
  // the reason.
  if (!NamesAFolder(name)) return CheckModelName(name);
  // Read and written before anything changes: a config that does not parse is refused
  // with the model as it was.
  std::optional<Override> override;
  if (!load.empty()) {
    auto read = ReadOverride(name, load);
    if (!read.ok()) return read.status();
    override = std::move(read).value();
  }
  std::lock_guard load_lock(load_mu_);
  std::set<std::string> touched;
  return LoadLocked(name, /*load_missing_steps=*/true, &touched, /*as_step=*/false,
                    override ? &*override : nullptr);
}

Status ModelRepository::LoadLocked(const std::string& name, bool load_missing_steps,
                                   std::set<std::string>* touched, bool as_step,
                                   const Override* override) {
  touched->insert(name);
  const bool own_files = override != nullptr && override->folder;
  if (!own_files && FoldersOf(name).empty()) {
    return NotFound(NoFolder(name) + (override != nullptr
                                          ? " (a load's config without files uses the folder's "
                                            "version folders)"
                                          : ""));
  }
  if (load_missing_steps) {
    std::vector<std::string> steps;
    if (override != nullptr) {
      for (const auto& step : override->config.ensemble_scheduling().step()) {
        steps.push_back(step.model_name());
      }
    } else {
      steps = StepModelsOnDisk(name);
    }
    for (const auto& step : steps) {
      if (touched->count(step) > 0 || FoldersOf(step).empty()) continue;
      // Loaded and serving what its folder holds: nothing to do. A step that failed to load,
      // or whose files changed since, is loaded again, as Triton does (its old failure was
      // quoted to every later load of the ensemble, even after the file was repaired).
      const std::string on_disk = Fingerprint(step);
      bool current = false;
      {
        std::lock_guard lock(mu_);
        auto it = models_.find(step);
        current = it != models_.end() &&
                  std::any_of(it->second.versions.begin(), it->second.versions.end(),
                              [](const VersionStatus& v) { return v.runtime != nullptr; }) &&
                  (it->second.folder != nullptr || it->second.fingerprint == on_disk);
      }
      // Its failure shows in its state.
      if (!current) (void)LoadLocked(step, true, touched, /*as_step=*/true);
    }
  }
  Unchanged unchanged;
  if (override == nullptr) {
    std::lock_guard lock(mu_);
    if (auto it = models_.find(name); it != models_.end()) {
      unchanged = UnchangedCandidates(it->second);
    }
  }
  ModelState fresh = LoadFromDisk(name, override, unchanged);
  if (!own_files && fresh.fingerprint != Fingerprint(name)) {
    // Written while it was read (a copy in progress): nothing of it is published, and the
    // old fingerprint stays, so that the next poll reads the folder again.
    StopVersions(fresh);
    ModelState changed;
    changed.reason = "the model folder changed while it was read (a copy in progress?); it is "
                     "read again at the next poll or load";
    changed.failure = StatusCode::kUnavailable;  // worth trying again
    log::Warn("model '" + name + "': " + changed.reason);
    changed.step_models = std::move(fresh.step_models);
    fresh = std::move(changed);
  }
  fresh.loaded_as_step = as_step;
  return Publish(name, std::move(fresh), /*keep_serving=*/true, touched);
}

StatusCode ModelRepository::LoadFailureCode(const ModelState& fresh) {
  std::vector<StatusCode> codes;
  if (!fresh.reason.empty()) codes.push_back(fresh.failure);
  for (const VersionStatus& v : fresh.versions) {
    if (v.runtime == nullptr) codes.push_back(v.failure);
  }
  for (StatusCode code : codes) {
    if (code == StatusCode::kUnavailable || code == StatusCode::kResourceExhausted ||
        code == StatusCode::kDeadlineExceeded) {
      return code;
    }
  }
  return StatusCode::kInvalidArgument;
}

Status ModelRepository::Publish(const std::string& name, ModelState fresh, bool keep_serving,
                                std::set<std::string>* touched) {
  Status result = Status::Ok();
  const StatusCode failure = LoadFailureCode(fresh);
  if (!fresh.reason.empty()) {
    result = Status(failure, "model '" + name + "' failed to load: " + fresh.reason);
  } else if (std::none_of(fresh.versions.begin(), fresh.versions.end(),
                          [](const VersionStatus& v) { return v.runtime != nullptr; })) {
    std::string reasons;
    for (const auto& v : fresh.versions) {
      reasons += (reasons.empty() ? "" : "; ") + std::string("version ") +
                 std::to_string(v.version) + ": " + v.reason;
    }
    result = Status(failure, "model '" + name + "' failed to load: " + reasons);
  }
  ModelState old;
  bool unchanged = false;
  {
    std::lock_guard lock(mu_);
    if (stopped_) {
      StopVersions(fresh);
      return Unavailable("the server is shutting down");
    }
    // A model loaded for itself once stays so when an ensemble's load loads it again.
    const auto loaded = models_.find(name);
    const bool as_step =
        fresh.loaded_as_step && (loaded == models_.end() || loaded->second.loaded_as_step);
    auto& slot = models_[name];
    old = std::move(slot);
    const std::string kept = keep_serving ? KeepServing(old, fresh) : "";
    if (!kept.empty()) {
      log::Error("model '" + name + "': " + kept);
      result = Status(failure, "model '" + name + "': " + kept);
    }
    unchanged = !kept.empty() && !fresh.reload_failure.empty();  // kept whole: as it was
    if (!unchanged) StartCanary(name, old, fresh);
    slot = std::move(fresh);
    slot.loaded_as_step = as_step;
    IndexSteps(name, old.step_models, slot.step_models);
    // A load that serves in both (a version kept unchanged) is not retired with what the
    // new state replaced. Every version kept and nothing given up: nothing changed.
    bool all_kept = slot.reason.empty() && !slot.versions.empty();
    for (VersionStatus& v : slot.versions) {
      all_kept = all_kept && v.kept;
      v.kept = false;  // published: from now on stopped with the others
    }
    for (VersionStatus& given_up : old.versions) {
      if (!given_up.runtime) continue;
      const auto same = [&](const VersionStatus& v) { return v.runtime == given_up.runtime; };
      const auto number = [&](const VersionStatus& v) {
        return v.runtime && v.version == given_up.version;
      };
      if (std::any_of(slot.versions.begin(), slot.versions.end(), same)) {
        given_up.runtime.reset();
        continue;
      }
      all_kept = false;
      if (std::none_of(slot.versions.begin(), slot.versions.end(), number)) {
        log::Info("model '" + name + "' version " + std::to_string(given_up.version) +
                  " unloaded: its folder is gone, or the version policy no longer selects it");
      }
    }
    unchanged = unchanged || all_kept;
  }
  Retire(old);  // outside the lock
  // Nothing changed for the ensembles that use it when it was kept whole or unchanged.
  if (!unchanged) ReloadDependents(name, touched);
  return result;
}

Status ModelRepository::Unload(const std::string& name, bool unload_dependents) {
  // As Load: a name that is not UTF-8 may be a folder's, listed with its failure.
  if (!NamesAFolder(name)) return CheckModelName(name);
  std::lock_guard load_lock(load_mu_);
  return UnloadLocked(name, unload_dependents);
}

Status ModelRepository::UnloadLocked(const std::string& name, bool unload_dependents) {
  ModelState old;
  {
    std::lock_guard lock(mu_);
    auto it = models_.find(name);
    if (it == models_.end()) {
      // As Triton: unloading what is not loaded changes nothing and succeeds.
      if (!FoldersOf(name).empty()) return Status::Ok();
      return NotFound(NoFolder(name));
    }
    old = std::move(it->second);
    models_.erase(it);
    IndexSteps(name, old.step_models, {});
  }
  Retire(old);
  log::Info("model '" + name + "' unloaded");
  std::set<std::string> touched = {name};
  ReloadDependents(name, &touched);
  if (!unload_dependents) return Status::Ok();
  // Triton's unload_dependents: the step models that were loaded only as steps, and that no
  // loaded model needs any more, go too (and theirs, in turn).
  for (const std::string& step : old.step_models) {
    bool needed = false;
    {
      std::lock_guard lock(mu_);
      auto it = models_.find(step);
      if (it == models_.end() || !it->second.loaded_as_step) continue;
      for (const auto& [model, state] : models_) {
        needed = needed || std::find(state.step_models.begin(), state.step_models.end(), step) !=
                               state.step_models.end();
      }
    }
    if (!needed) (void)UnloadLocked(step, /*unload_dependents=*/true);
  }
  return Status::Ok();
}

void ModelRepository::Poll() {
  std::vector<std::string> unreadable;
  const std::vector<std::string> on_disk = ModelFolders(&unreadable);
  for (const std::string& why : unreadable) {
    log::Warn("cannot list the model repository " + why +
              "; its models keep serving as they were loaded until it can be read");
  }
  // Read the disk before taking the lock: lookups on the request path wait on it.
  std::map<std::string, std::string> fingerprints;
  for (const auto& name : on_disk) fingerprints[name] = Fingerprint(name);
  std::vector<std::string> to_load, to_unload;
  const Clock::time_point now = OrSteadyClock(options_.clock)->Now();
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, fingerprint] : fingerprints) {
      auto it = models_.find(name);
      if (it != models_.end() && it->second.fingerprint == fingerprint) continue;
      if (auto retry = poll_retries_.find(name); retry != poll_retries_.end() &&
                                                 retry->second.fingerprint == fingerprint &&
                                                 now < retry->second.next) {
        continue;  // to be read again, later
      }
      to_load.push_back(name);
    }
    for (const auto& [name, state] : models_) {
      if (std::find(on_disk.begin(), on_disk.end(), name) == on_disk.end()) to_unload.push_back(name);
    }
  }
  // A root that cannot be listed (a volume that went away) is no sign that its models were
  // removed: none is unloaded until every root reads again.
  if (unreadable.empty()) {
    for (const auto& name : to_unload) (void)Unload(name, /*unload_dependents=*/false);
  }
  for (const auto& name : to_load) {
    {
      // Loaded meanwhile, from these files, as the step of an ensemble loaded before it in
      // this pass: not a second time (a second admission, twice the memory for a while).
      std::lock_guard lock(mu_);
      auto it = models_.find(name);
      if (it != models_.end() && it->second.fingerprint == fingerprints[name]) continue;
    }
    (void)Load(name);
    std::lock_guard lock(mu_);
    auto it = models_.find(name);
    if (it == models_.end() || it->second.fingerprint == fingerprints[name]) {
      poll_retries_.erase(name);
      continue;
    }
    PollRetry& retry = poll_retries_[name];  // to be read again (ReadAgain)
    retry.tries = retry.fingerprint == fingerprints[name] ? retry.tries + 1 : 1;
    retry.fingerprint = fingerprints[name];
    retry.next = now + options_.poll_interval * ((1 << std::min(retry.tries, 5)) - 1);
  }
}

void ModelRepository::PollLoop() {
  std::unique_lock lock(poll_mu_);
  poll_cv_.wait(lock, [&] { return startup_loaded_ || poll_stop_; });
  while (!poll_cv_.wait_for(lock, options_.poll_interval, [&] { return poll_stop_; })) {
    lock.unlock();
    // The poll thread's safety net: what a load did not turn into its model's failure ends
    // this poll, not the serving process.
    try {
      Poll();
    } catch (const std::exception& e) {
      log::Error(std::string("model repository poll: ") + e.what());
    }
    lock.lock();
  }
}

void ModelRepository::StopAll() {
  {
    std::lock_guard lock(poll_mu_);
    poll_stop_ = true;
  }
  poll_cv_.notify_all();
  if (poll_thread_.joinable()) poll_thread_.join();
  // Ensembles first, retired ones too: the requests they have in flight still run steps on
  // the other models (a retired step version stays while one holds it, StepHold), which
  // must stay running until the ensembles have drained.
  std::vector<std::shared_ptr<ModelVersion>> ensembles;
  {
    std::lock_guard lock(retire_mu_);
    for (const auto& [at, version] : retiring_) {
      if (config::IsEnsemble(version->config)) ensembles.push_back(version);
    }
  }
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, state] : models_) {
      for (const auto& v : state.versions) {
        if (v.runtime && v.runtime->scheduler && config::IsEnsemble(v.runtime->config)) {
          ensembles.push_back(v.runtime);
        }
      }
    }
  }
  // Outer ensembles before those they run as a step: an outer request in flight still
  // runs its inner ensemble's step.
  auto runs_as_step = [&ensembles](const ModelVersion& inner) {
    for (const auto& outer : ensembles) {
      for (const auto& step : outer->config.ensemble_scheduling().step()) {
        if (outer.get() != &inner && step.model_name() == inner.model_name) return true;
      }
    }
    return false;
  };
  while (!ensembles.empty()) {
    auto next = std::find_if(ensembles.begin(), ensembles.end(),
                             [&](const auto& version) { return !runs_as_step(*version); });
    if (next == ensembles.end()) next = ensembles.begin();  // a cycle, refused at load
    (*next)->scheduler->Stop();
    ensembles.erase(next);
  }
  // The retired versions next, at once.
  {
    std::lock_guard lock(retire_mu_);
    retire_stop_ = true;
  }
  retire_cv_.notify_all();
  if (retire_thread_.joinable()) retire_thread_.join();
  std::map<std::string, ModelState> models;
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    models.swap(models_);
  }
  // Every model's workers are told first, so that their threads end together; a stop one
  // model after another took 19 s for 8,000 models.
  for (const auto& [name, state] : models) {
    for (const auto& v : state.versions) {
      if (v.runtime && v.runtime->scheduler) v.runtime->scheduler->BeginStop();
    }
    if (state.canary && state.canary->phase.stable->scheduler) {
      state.canary->phase.stable->scheduler->BeginStop();
    }
  }
  for (const auto& [name, state] : models) StopVersions(state);
}

size_t ModelRepository::FailQueued(const Status& why) {
  std::vector<std::shared_ptr<ModelVersion>> versions;
  {
    std::lock_guard lock(retire_mu_);
    for (const auto& [at, version] : retiring_) versions.push_back(version);
  }
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, state] : models_) {
      for (const auto& v : state.versions) {
        if (v.runtime) versions.push_back(v.runtime);
      }
      if (state.canary) versions.push_back(state.canary->phase.stable);
    }
  }
  size_t failed = 0;
  for (const auto& version : versions) {
    if (version && version->scheduler) failed += version->scheduler->FailQueued(why);
  }
  return failed;
}

StatusOr<std::shared_ptr<ModelVersion>> ModelRepository::FindReady(const std::string& name,
                                                                  const std::string& version) const {
  {
    std::lock_guard lock(mu_);
    auto it = models_.find(name);
    if (it != models_.end()) return FindLocked(name, it->second, version);
  }
  // A model the repository holds but that is not loaded is not a typo: say which.
  if (NamesAFolder(name) && !FoldersOf(name).empty()) {
    return NotFound("model '" + name +
                    "' is not loaded: its folder is in the repository, and the repository "
                    "index lists it UNAVAILABLE (unloaded)");
  }
  return NotFound("unknown model '" + name + "'");
}

StatusOr<std::shared_ptr<ModelVersion>> ModelRepository::FindLocked(const std::string& name,
                                                                    const ModelState& state,
                                                                    const std::string& version) {
  if (!state.reason.empty()) {
    return Unavailable("model '" + name + "' is not ready: " + state.reason);
  }
  if (version.empty()) {
    std::string reasons;
    for (auto v = state.versions.rbegin(); v != state.versions.rend(); ++v) {
      const Status serving = Serving(*v);
      if (serving.ok()) return v->runtime;
      if (!serving.message().empty()) {
        reasons += (reasons.empty() ? ": " : "; ") + serving.message();
      }
    }
    return Unavailable("model '" + name + "' has no ready version" + reasons);
  }
  for (const auto& v : state.versions) {
    if (std::to_string(v.version) != version) continue;
    const Status serving = Serving(v);
    if (serving.ok()) return v.runtime;
    return Unavailable("version " + version + " of model '" + name +
                       "' is not ready: " + serving.message());
  }
  return NotFound("unknown version '" + version + "' of model '" + name + "'");
}

StatusOr<bool> ModelRepository::IsReady(const std::string& name, const std::string& version) const {
  auto found = FindReady(name, version);
  if (found.ok()) return true;
  if (found.status().code() == StatusCode::kUnavailable) return false;
  return found.status();
}

std::vector<std::shared_ptr<ModelVersion>> ModelRepository::ReadyVersions(
    const std::string& name) const {
  std::vector<std::shared_ptr<ModelVersion>> out;
  std::lock_guard lock(mu_);
  for (const auto& [model, state] : models_) {
    if (!name.empty() && model != name) continue;
    for (const auto& v : state.versions) {
      if (v.runtime) out.push_back(v.runtime);
    }
  }
  return out;
}

std::vector<server::RepositoryEntry> ModelRepository::Index(bool ready_only) const {
  std::vector<server::RepositoryEntry> out;
  // Only the full index lists the folders: the watches and the canaries ask for what is
  // ready every second, which must not read the repository (an NFS volume) each time.
  const std::vector<std::string> on_disk = ready_only ? std::vector<std::string>() : ModelFolders();
  std::lock_guard lock(mu_);
  for (const auto& [name, state] : models_) {
    if (!state.reason.empty()) {
      if (!ready_only) out.push_back({name, "", server::ModelState::kUnavailable, state.reason});
      continue;
    }
    for (const auto& v : state.versions) {
      const Status serving = Serving(v);
      if (ready_only && !serving.ok()) continue;
      // A READY version whose instances are all out of service is UNAVAILABLE until one is
      // rebuilt.
      out.push_back({name, std::to_string(v.version),
                     serving.ok() || v.state != server::ModelState::kReady
                         ? v.state
                         : server::ModelState::kUnavailable,
                     !serving.ok()         ? serving.message()
                     : v.reason.empty() ? state.reload_failure
                                        : v.reason});
    }
  }
  if (!ready_only) {
    // Folders that are present but not loaded (explicit mode, or unloaded).
    for (const auto& name : on_disk) {
      if (models_.count(name) == 0) {
        out.push_back({name, "", server::ModelState::kUnavailable, server::kUnloadedReason});
      }
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
      return a.name != b.name ? a.name < b.name : a.version < b.version;
    });
  }
  return out;
}

bool ModelRepository::AllReady() const {
  std::lock_guard lock(mu_);
  if (stopped_) return false;
  for (const auto& [name, state] : models_) {
    if (!state.reason.empty()) return false;
    for (const auto& v : state.versions) {
      if (!Serving(v).ok()) return false;
    }
  }
  return true;
}

}  // namespace fastpath::repository
