#include "mpi/runtime.h"

#include <mpi.h>

#include "mpi/mpi_check.h"

namespace mpiasr::mpi {

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_CHECK(MPI_Get_library_version(text, &length));
  std::string version(text, size_t(length));
  while (!version.empty() &&
         (version.back() == '\n' || version.back() == ' ' || version.back() == '\0'))
    version.pop_back();
  int major = 0, minor = 0;
  MPI_CHECK(MPI_Get_version(&major, &minor));
  return version + " (MPI " + std::to_string(major) + "." + std::to_string(minor) + ")";
}

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
