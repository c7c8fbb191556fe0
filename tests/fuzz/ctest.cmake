# libFuzzer harnesses (tests/fuzz/*_fuzz.cc), built with clang in sub-builds
# (tests/fuzz/CMakeLists.txt: the data parsers, the safetensors reader, one harness per codec
# payload (codec_<name>) and, with LOOM_HAVE_ONNX, the ONNX importer;
# tests/fuzz/reliability: the config and checkpoint readers) only when a clang that supports
# -fsanitize=fuzzer is found, and run by ctest for a short budget each (tests named fuzz.<parser>).
#   -DLOOM_FUZZ=OFF            skip them
#   -DLOOM_FUZZ_SECONDS=N      the budget per harness (default 10)
option(LOOM_FUZZ "Build and run (briefly) the libFuzzer harnesses of the data parsers" ON)
set(LOOM_FUZZ_SECONDS 10 CACHE STRING "Seconds each fuzz harness runs under ctest")

if(LOOM_FUZZ AND LOOM_TESTS)
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    set(LOOM_FUZZ_CXX ${CMAKE_CXX_COMPILER})
  else()
    find_program(LOOM_FUZZ_CXX NAMES clang++ clang++-16 clang++-15 clang++-14)
  endif()
  set(LOOM_FUZZ_OK FALSE)
  if(LOOM_FUZZ_CXX)
    set(probe ${CMAKE_BINARY_DIR}/fuzz_probe)
    file(WRITE ${probe}.cc "#include <cstdint>\n#include <cstddef>\nextern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n")
    execute_process(COMMAND ${LOOM_FUZZ_CXX} -fsanitize=fuzzer,address ${probe}.cc -o ${probe}
                    RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
    if(rc EQUAL 0)
      set(LOOM_FUZZ_OK TRUE)
    endif()
  endif()
  if(LOOM_FUZZ_OK)
    message(STATUS "loom: fuzz harnesses with ${LOOM_FUZZ_CXX}, ${LOOM_FUZZ_SECONDS} s each under ctest")
    include(ExternalProject)
    set(LOOM_FUZZ_BIN ${CMAKE_BINARY_DIR}/fuzz)
    set(LOOM_FUZZ_PARSERS idx csv npy shard safetensors codec_fp32 codec_fp16 codec_bf16
                          codec_int8 codec_onebit codec_topk codec_powersgd)
    if(LOOM_HAVE_ONNX)
      list(APPEND LOOM_FUZZ_PARSERS onnx)
    endif()
    ExternalProject_Add(loom_fuzz
      SOURCE_DIR ${CMAKE_SOURCE_DIR}/tests/fuzz
      BINARY_DIR ${LOOM_FUZZ_BIN}
      CMAKE_ARGS -DCMAKE_CXX_COMPILER=${LOOM_FUZZ_CXX} -DCMAKE_BUILD_TYPE=RelWithDebInfo
                 -DLOOM_SOURCE_DIR=${CMAKE_SOURCE_DIR} -DLOOM_GENERATED_DIR=${CMAKE_BINARY_DIR}/generated
                 -DLOOM_HAVE_ONNX=${LOOM_HAVE_ONNX}
      BUILD_ALWAYS TRUE
      INSTALL_COMMAND ""
      BUILD_BYPRODUCTS ${LOOM_FUZZ_BIN}/idx_fuzz ${LOOM_FUZZ_BIN}/csv_fuzz ${LOOM_FUZZ_BIN}/npy_fuzz
                       ${LOOM_FUZZ_BIN}/shard_fuzz ${LOOM_FUZZ_BIN}/onnx_fuzz
                       ${LOOM_FUZZ_BIN}/safetensors_fuzz ${LOOM_FUZZ_BIN}/codec_fp32_fuzz
                       ${LOOM_FUZZ_BIN}/codec_fp16_fuzz ${LOOM_FUZZ_BIN}/codec_bf16_fuzz
                       ${LOOM_FUZZ_BIN}/codec_int8_fuzz ${LOOM_FUZZ_BIN}/codec_onebit_fuzz
                       ${LOOM_FUZZ_BIN}/codec_topk_fuzz ${LOOM_FUZZ_BIN}/codec_powersgd_fuzz)
    foreach(h IN LISTS LOOM_FUZZ_PARSERS)
      # New inputs go to a scratch corpus in the build tree; the seed corpus stays read-only.
      add_test(NAME fuzz.${h}
               COMMAND sh -c "mkdir -p corpus_${h} && exec ./${h}_fuzz -max_total_time=${LOOM_FUZZ_SECONDS} -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 corpus_${h} ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/${h}"
               WORKING_DIRECTORY ${LOOM_FUZZ_BIN})
      set_tests_properties(fuzz.${h} PROPERTIES TIMEOUT 120 LABELS fuzz)
    endforeach()
  else()
    message(STATUS "loom: no clang with -fsanitize=fuzzer; fuzz harnesses not built")
    # Said as a skip, so that the missing harnesses show in the skip report.
    add_test(NAME fuzz.harnesses
             COMMAND sh -c "echo 'SKIP: no clang with -fsanitize=fuzzer: the fuzz harnesses were not built'; exit 77")
    set_tests_properties(fuzz.harnesses PROPERTIES SKIP_RETURN_CODE 77 LABELS fuzz)
  endif()
endif()

# The config and checkpoint readers, with the same clang.
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
