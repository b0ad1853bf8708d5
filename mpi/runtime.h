// Runtime: MPI_Init_thread at construction (asking for MPI_THREAD_MULTIPLE and
// accepting the best level the library provides) and MPI_Finalize at
// destruction. Create exactly one, first thing in main(); a plain process
// started without a launcher becomes a world of size 1.
#pragma once

#include <string>

namespace mpiasr::mpi {

// The MPI library and the standard it implements, e.g. "Open MPI v4.1.4, ...
// (MPI 3.1)"; callable before MPI is initialized (MPI_Get_library_version).
std::string mpi_library_version();

class Runtime {
 public:
  Runtime(int* argc, char*** argv);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // The thread level MPI provides (MPI_THREAD_SINGLE .. MPI_THREAD_MULTIPLE).
  int thread_level() const { return thread_level_; }

 private:
  int thread_level_ = 0;
};

}  // namespace mpiasr::mpi
