// What a KServe request may ask, decided once for HTTP and gRPC. The front ends decode
// their protocol (and consume their own encoding parameters: binary_data_size,
// binary_data, binary_data_output); everything else a client sent is judged here, so both
// protocols accept, ignore and refuse alike, with the same message.
//
//   parameter                              on                 outcome
//   priority, timeout                      request            used by the dynamic batcher;
//                                                             non-negative integers (Server)
//   sequence_id, sequence_start,           request            Unimplemented: fastpath has no
//   sequence_end                                              sequence batcher, and a stateful
//                                                             request must not run as stateless;
//                                                             but Triton's "not in a sequence"
//                                                             (id 0 or "", start/end false) is
//                                                             accepted
//   shared_memory_region, _byte_size,      input, output      Unimplemented: the shared-memory
//   _offset                                                   extensions
//   classification                         output             Unimplemented: the
//                                                             classification extension
//   binary_data, binary_data_output        output, request    accepted; HTTP's encoding, and
//                                                             meaningless over gRPC (raw)
//   anything else                          request, input,    accepted and not used, as Triton,
//                                          output             which hands unknown parameters to
//                                                             backends (fastpath's take none)
//
// Model repository control:
//   load   "config" (string)          the model configuration as JSON, used instead of
//                                     config.pbtxt (Triton's load API)
//   load   "file:<path>" (string,     the model folder's files, which then replace the
//          base64 over HTTP, bytes    repository's folder; only with "config". The path
//          over gRPC)                 stays inside the folder (no '..', not absolute)
//   load   anything else              InvalidArgument naming it
//   unload "unload_dependents" (bool) also unloads the step models an ensemble's load brought
//                                     in, unless the user loaded them or a loaded model uses them
//   unload anything else              InvalidArgument naming it
#pragma once

#include <string_view>

#include "fastpath/common/load_override.h"
#include "fastpath/common/status.h"
#include "fastpath/common/tensor.h"

namespace fastpath::protocol {

// Each part as a front end decodes it: before it reads a tensor's data (a shared-memory
// input has none), and before the request reaches the facade.
[[nodiscard]] Status CheckRequestParameters(const Parameters& parameters);
[[nodiscard]] Status CheckInputParameters(const std::string& input, const Parameters& parameters);
[[nodiscard]] Status CheckOutputParameters(const std::string& output, const Parameters& parameters);
// How a front end carries a load's "file:<path>" contents: HTTP's JSON in base64, gRPC
// as bytes.
enum class FileEncoding { kBase64, kRaw };
// Decodes a load's parameters into `*load` (empty when there are none).
[[nodiscard]] Status CheckLoadParameters(const Parameters& parameters, FileEncoding encoding,
                                         LoadOverride* load);
// Sets *unload_dependents (false when the parameter is absent).
[[nodiscard]] Status CheckUnloadParameters(const Parameters& parameters, bool* unload_dependents);

// Triton's extensions that fastpath does not implement, answered alike over HTTP and gRPC.
// No shared-memory region is ever registered: a status lists none and an unregister has
// nothing to do (client clean-up code calls both), so both succeed; a region asked for by
// name is NotFound, a register Unimplemented. Trace and log settings are Unimplemented.
enum class SharedMemory { kSystem, kCuda };
[[nodiscard]] Status SharedMemoryRegionNotFound(SharedMemory kind, std::string_view region);
[[nodiscard]] Status SharedMemoryRegisterRefused(SharedMemory kind);
enum class Settings { kTrace, kLog };
[[nodiscard]] Status SettingsRefused(Settings which);

}  // namespace fastpath::protocol
