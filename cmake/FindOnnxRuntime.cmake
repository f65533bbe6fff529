# Finds ONNX Runtime: headers (onnxruntime_cxx_api.h) and libonnxruntime.so.
# Looks in ONNXRUNTIME_ROOT (cache or environment variable; the layout of Microsoft's
# release archives: include/ and lib/), then in the folder tools/fetch_onnxruntime.sh fills.
# Defines the imported target OnnxRuntime::onnxruntime and OnnxRuntime_LIBRARY_DIR (where
# the execution-provider plugin libraries are looked for at run time).
set(ONNXRUNTIME_ROOT "$ENV{ONNXRUNTIME_ROOT}" CACHE PATH "ONNX Runtime install (include/ and lib/)")
set(_ort_hints ${ONNXRUNTIME_ROOT} ${CMAKE_SOURCE_DIR}/.deps/onnxruntime-1.29.0)

find_path(OnnxRuntime_INCLUDE_DIR onnxruntime_cxx_api.h
  HINTS ${_ort_hints} PATH_SUFFIXES include include/onnxruntime NO_DEFAULT_PATH)
find_library(OnnxRuntime_LIBRARY onnxruntime HINTS ${_ort_hints} PATH_SUFFIXES lib lib64 NO_DEFAULT_PATH)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(OnnxRuntime
  REQUIRED_VARS OnnxRuntime_LIBRARY OnnxRuntime_INCLUDE_DIR
  REASON_FAILURE_MESSAGE "run tools/fetch_onnxruntime.sh, or pass -DONNXRUNTIME_ROOT=<dir with include/ and lib/>")

if(OnnxRuntime_FOUND AND NOT TARGET OnnxRuntime::onnxruntime)
  get_filename_component(OnnxRuntime_LIBRARY_DIR ${OnnxRuntime_LIBRARY} DIRECTORY)
  add_library(OnnxRuntime::onnxruntime SHARED IMPORTED)
  set_target_properties(OnnxRuntime::onnxruntime PROPERTIES
    IMPORTED_LOCATION ${OnnxRuntime_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${OnnxRuntime_INCLUDE_DIR})
endif()
