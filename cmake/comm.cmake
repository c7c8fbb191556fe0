# The comm layer's extra build: the MPI transport links back to loom_comm (its collectives and
# Communicator live there), and the MPI tests run through mpirun for 1..4 ranks.
if(TARGET loom_comm_mpi)
  target_link_libraries(loom_comm_mpi PUBLIC loom_comm)
endif()
