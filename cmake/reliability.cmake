# Reliability (issue 8): libFuzzer harnesses of the config and checkpoint readers
# (tests/fuzz/{config,checkpoint}_fuzz.cc, sub-project tests/fuzz/reliability), run by ctest for
# LOOM_FUZZ_SECONDS each (tests fuzz.config, fuzz.checkpoint; label fuzz). Reuses the clang
# probe of cmake/fuzz.cmake (LOOM_FUZZ_OK, LOOM_FUZZ_CXX).
if(LOOM_FUZZ AND LOOM_TESTS AND LOOM_FUZZ_OK)
  include(ExternalProject)
  set(LOOM_FUZZ_REL_BIN ${CMAKE_BINARY_DIR}/fuzz_reliability)
  ExternalProject_Add(loom_fuzz_reliability
    SOURCE_DIR ${CMAKE_SOURCE_DIR}/tests/fuzz/reliability
    BINARY_DIR ${LOOM_FUZZ_REL_BIN}
    CMAKE_ARGS -DCMAKE_CXX_COMPILER=${LOOM_FUZZ_CXX} -DCMAKE_BUILD_TYPE=RelWithDebInfo
               -DLOOM_SOURCE_DIR=${CMAKE_SOURCE_DIR} -DLOOM_GENERATED_DIR=${CMAKE_BINARY_DIR}/generated
               -G Ninja
    BUILD_ALWAYS TRUE
    INSTALL_COMMAND ""
    BUILD_BYPRODUCTS ${LOOM_FUZZ_REL_BIN}/config_fuzz ${LOOM_FUZZ_REL_BIN}/checkpoint_fuzz)
  foreach(h config checkpoint)
    add_test(NAME fuzz.${h}
             COMMAND sh -c "mkdir -p corpus_${h} && exec ./${h}_fuzz -max_total_time=${LOOM_FUZZ_SECONDS} -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 corpus_${h} ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/${h}"
             WORKING_DIRECTORY ${LOOM_FUZZ_REL_BIN})
    set_tests_properties(fuzz.${h} PROPERTIES TIMEOUT 120 LABELS fuzz)
  endforeach()
endif()
