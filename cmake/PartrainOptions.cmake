# Compiler options shared by every partrain target, carried by one INTERFACE target.
add_library(partrain_options INTERFACE)
add_library(partrain::options ALIAS partrain_options)
target_compile_options(partrain_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wconversion
    -Wno-sign-conversion -Wimplicit-fallthrough>)
target_compile_definitions(partrain_options INTERFACE
  PARTRAIN_VERSION="${PROJECT_VERSION}")
target_include_directories(partrain_options INTERFACE ${PROJECT_SOURCE_DIR})

# partrain_add_library(NAME SOURCES... [DEPS ...]): one layer = one target, partrain::NAME.
function(partrain_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(partrain_${name} STATIC ${ARG_SOURCES})
  add_library(partrain::${name} ALIAS partrain_${name})
  set_target_properties(partrain_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_link_libraries(partrain_${name} PUBLIC partrain::options ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
endfunction()
