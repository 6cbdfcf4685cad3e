# `gpu-bundle`: build/partrain-gpu-bundle.tar.gz, what a GPU machine with no internet needs to run
# the GPU tests and benchmarks (scripts/make-gpu-bundle.sh); `gpu-validate`: run them from this
# build tree (scripts/gpu-validate.sh). Both build only what they use: partrain, the injection
# library and the GPU test executables, as tests/CMakeLists.txt made them (gpu_*, CUDA builds only).
set(gpu_bundle_targets partrain partrain_inject)
if(PARTRAIN_BUILD_TESTS)
  get_directory_property(test_targets DIRECTORY ${PROJECT_SOURCE_DIR}/tests BUILDSYSTEM_TARGETS)
  list(FILTER test_targets INCLUDE REGEX "^gpu_")
  list(APPEND gpu_bundle_targets ${test_targets})
endif()

add_custom_target(gpu-bundle
  COMMAND ${PROJECT_SOURCE_DIR}/scripts/make-gpu-bundle.sh --build-dir ${PROJECT_BINARY_DIR}
          --output ${PROJECT_BINARY_DIR}/partrain-gpu-bundle.tar.gz
  USES_TERMINAL VERBATIM)
add_dependencies(gpu-bundle ${gpu_bundle_targets})

add_custom_target(gpu-validate
  COMMAND ${PROJECT_SOURCE_DIR}/scripts/gpu-validate.sh --build-dir ${PROJECT_BINARY_DIR}
          --out ${PROJECT_BINARY_DIR}/gpu-validate
  USES_TERMINAL VERBATIM)
add_dependencies(gpu-validate ${gpu_bundle_targets})

# tests/integration/gpu_bundle_test.cpp packs these as built.
if(TARGET integration_gpu_bundle_test)
  add_dependencies(integration_gpu_bundle_test ${gpu_bundle_targets})
endif()
