// What the launcher (mpirun, srun) tells a process through its environment, read in one
// place. Needs no MPI, so a build without MPI can still say "this looks like mpirun".
#pragma once

#include <optional>
#include <string>

namespace loom::comm {

struct LauncherEnv {
  std::string launcher;  // "openmpi", "pmi", "pmix", "slurm" or empty when none
  int rank = -1;         // -1 when the environment does not say
  int size = -1;
  int local_size = -1;  // ranks on this host (-1 when the environment does not say)
};

// Reads OMPI_COMM_WORLD_{RANK,SIZE} (Open MPI), PMI_{RANK,SIZE} (MPICH/Hydra, srun --mpi=pmi2),
// PMIX_RANK (PMIx), SLURM_PROCID/SLURM_NTASKS (srun); the ranks on this host from
// OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS (MPICH) or SLURM_NTASKS_PER_NODE.
LauncherEnv detect_launcher();
bool launched_by_mpi();

}  // namespace loom::comm
