# The comm layer's extra build: the MPI transport links back to loom_comm (its collectives and
# Communicator live there), and the MPI tests run through mpirun for 1..4 ranks.
if(TARGET loom_comm_mpi)
  target_link_libraries(loom_comm_mpi PUBLIC loom_comm)
  # We link MPI's C library only: keep mpi.h from dragging in the deprecated C++ bindings.
  target_compile_definitions(loom_comm_mpi PRIVATE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
endif()

if(TARGET loom_comm_mpi AND LOOM_TESTS)
  # Not *_test.cc: it is not part of loom_comm_tests (gtest), it runs under mpirun.
  add_executable(loom_comm_mpi_check ${CMAKE_SOURCE_DIR}/tests/comm/mpi/mpi_collectives_check.cc)
  target_link_libraries(loom_comm_mpi_check PRIVATE loom_comm)
  target_include_directories(loom_comm_mpi_check PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  set(LOOM_MPIRUN ${MPIEXEC_EXECUTABLE})
  if(NOT LOOM_MPIRUN)
    set(LOOM_MPIRUN mpirun)
  endif()
  foreach(np 1 2 3 4)
    add_test(NAME mpi.collectives.np${np}
             COMMAND ${LOOM_MPIRUN} --allow-run-as-root --oversubscribe -np ${np}
                     $<TARGET_FILE:loom_comm_mpi_check> collectives)
    set_tests_properties(mpi.collectives.np${np} PROPERTIES TIMEOUT 120)
  endforeach()
endif()
