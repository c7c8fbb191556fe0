# The tests whose truth depends on kernels (layer values against references, the bitwise
# comparisons across code paths that docs/determinism.md promises, the codecs' SIMD paths) run
# again under capped ISAs, label isa:
#   isa_avx2.*   oneDNN capped at AVX2 and loom's own dispatch at AVX2: what an AVX2-only CPU
#                (AMD Zen 3, Intel before Skylake-SP) runs
#   isa_sse41.*  oneDNN capped at SSE4.1 (its baseline) and loom's own at AVX2 (loom itself is
#                compiled for x86-64-v3, so there is no lower cap for its code)
# On an AVX2-only CPU the first would repeat the native run kernel for kernel, so it says skipped
# there (tests/run_under_isa_cap.sh); on an AVX-512 CPU it is the AVX2 machine.
# The unit binaries run under both caps (seconds); the training runs and the scripts that compare
# trained models across entry points (minutes) under the AVX2 cap only, the ISA of this
# project's oldest machines, where comparisons across entry points are most likely to differ.
set(LOOM_ISA_BOTH_CAPS loom_tensor_tests loom_nn_tests loom_compress_tests loom_optim_tests)
set(LOOM_ISA_AVX2_CAP loom_train_integration_tests)
set(LOOM_ISA_AVX2_SCRIPTS python_package_test model_predict_test model_cli_test)

function(loom_isa_test cap name)
  string(TOUPPER ${cap} cap_env)
  add_test(NAME isa_${cap}.${name}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/run_under_isa_cap.sh ${cap}
                   $<TARGET_FILE:loom_isa_cap_check> ${ARGN})
  set_tests_properties(isa_${cap}.${name} PROPERTIES
    ENVIRONMENT "ONEDNN_MAX_CPU_ISA=${cap_env};LOOM_MAX_CPU_ISA=avx2;LOOM_BINARY_DIR=${CMAKE_BINARY_DIR}"
    SKIP_RETURN_CODE 77 TIMEOUT 900 LABELS isa)
endfunction()

foreach(bin IN LISTS LOOM_ISA_BOTH_CAPS LOOM_ISA_AVX2_CAP)
  if(TARGET ${bin})
    loom_isa_test(avx2 ${bin} $<TARGET_FILE:${bin}> --gtest_brief=1)
    if(bin IN_LIST LOOM_ISA_BOTH_CAPS)
      loom_isa_test(sse41 ${bin} $<TARGET_FILE:${bin}> --gtest_brief=1)
    endif()
  endif()
endforeach()
foreach(name IN LISTS LOOM_ISA_AVX2_SCRIPTS)
  loom_isa_test(avx2 script.${name} bash ${CMAKE_CURRENT_SOURCE_DIR}/scripts/${name}.sh
                $<TARGET_FILE:loom>)
endforeach()
