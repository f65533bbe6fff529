# Debian's rapidjson-dev ships a config file with variables only; wrap it in a target.
find_path(RapidJSON_INCLUDE_DIR rapidjson/document.h)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(RapidJSON REQUIRED_VARS RapidJSON_INCLUDE_DIR
  REASON_FAILURE_MESSAGE "apt-get install rapidjson-dev")
if(RapidJSON_FOUND AND NOT TARGET RapidJSON::RapidJSON)
  add_library(RapidJSON::RapidJSON INTERFACE IMPORTED)
  set_target_properties(RapidJSON::RapidJSON PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${RapidJSON_INCLUDE_DIR})
endif()
