#include "mpi/runtime.h"

#include <mpi.h>

#include "mpi/mpi_check.h"

namespace mpiasr::mpi {

Runtime::Runtime(int* argc, char*** argv) {
  int initialized = 0;
  MPI_CHECK(MPI_Initialized(&initialized));
  MPIASR_CHECK(!initialized, "MPI is already initialized: create one mpi::Runtime only");
  MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &thread_level_));
}

Runtime::~Runtime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace mpiasr::mpi
