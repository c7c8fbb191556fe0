# CUDA language set-up, included by CMakeLists.txt when nvcc was found (LOOM_HAVE_CUDA). One
# architecture only, to keep the build short on small CI machines: Hopper machine code (sm_90)
# plus its PTX, which the driver compiles for any newer GPU at load time.
if(NOT CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "90-real;90-virtual")
endif()
# .cu files include only small CUDA-side headers; CMake 3.25 knows no CUDA20.
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)

# The directory's compile options (warnings, -march, sanitizers) are host-compiler flags: give
# them to g++ as they are and to nvcc through -Xcompiler, never to nvcc itself.
function(loom_cuda_host_options target)
  get_target_property(host_opts ${target} COMPILE_OPTIONS)
  set(opts "")
  foreach(opt IN LISTS host_opts)
    list(APPEND opts "$<$<COMPILE_LANGUAGE:CXX>:${opt}>" "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${opt}>")
  endforeach()
  list(APPEND opts "$<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>" "$<$<COMPILE_LANGUAGE:CUDA>:--extended-lambda>")
  set_property(TARGET ${target} PROPERTY COMPILE_OPTIONS "${opts}")
endfunction()
