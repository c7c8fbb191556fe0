# tensor tests that need their own process: oneDNN reads DNNL_MAX_CPU_ISA once, before its
# first call, so the GEMM fallback path (issue 2: "test the fallback path by forcing an
# AVX2-only choice") runs as a small executable under CTest with that variable set.
if(LOOM_TESTS)
  add_executable(loom_gemm_isa_check ${CMAKE_SOURCE_DIR}/tests/tensor/cpu/gemm_isa_check.cc)
  target_link_libraries(loom_gemm_isa_check PRIVATE loom_tensor)
  foreach(isa avx2 sse41)
    string(TOUPPER ${isa} isa_env)
    add_test(NAME tensor.gemm_fallback_${isa} COMMAND loom_gemm_isa_check ${isa})
    set_tests_properties(tensor.gemm_fallback_${isa} PROPERTIES
      ENVIRONMENT "DNNL_MAX_CPU_ISA=${isa_env};LOOM_GEMM=onednn"
      SKIP_RETURN_CODE 77 TIMEOUT 60)
  endforeach()
  # Without a limit: whatever this CPU has (AVX-512/AMX on the build machine).
  add_test(NAME tensor.gemm_native_isa COMMAND loom_gemm_isa_check any)
  set_tests_properties(tensor.gemm_native_isa PROPERTIES ENVIRONMENT "LOOM_GEMM=onednn" TIMEOUT 60)
endif()
