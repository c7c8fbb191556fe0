#include "loom/comm/launcher_env.h"

#include <cstdlib>

namespace loom::comm {

namespace {
int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return -1;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return (end != nullptr && *end == '\0' && x >= 0) ? int(x) : -1;
}
}  // namespace

LauncherEnv detect_launcher() {
  LauncherEnv e;
  if (env_int("OMPI_COMM_WORLD_SIZE") >= 0) {
    e = {"openmpi", env_int("OMPI_COMM_WORLD_RANK"), env_int("OMPI_COMM_WORLD_SIZE")};
  } else if (env_int("PMI_SIZE") >= 0) {
    e = {"pmi", env_int("PMI_RANK"), env_int("PMI_SIZE")};
  } else if (env_int("PMIX_RANK") >= 0) {
    e = {"pmix", env_int("PMIX_RANK"), env_int("SLURM_NTASKS")};
  } else if (env_int("SLURM_PROCID") >= 0 && env_int("SLURM_NTASKS") > 1) {
    e = {"slurm", env_int("SLURM_PROCID"), env_int("SLURM_NTASKS")};
  }
  for (const char* name :
       {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"})
    if (e.local_size < 0) e.local_size = env_int(name);
  return e;
}

bool launched_by_mpi() {
  return !detect_launcher().launcher.empty();
}

}  // namespace loom::comm
