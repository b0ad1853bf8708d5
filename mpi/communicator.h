// Communicator: owns one MPI communicator handle (RAII). It frees the handle
// with MPI_Comm_free when destroyed, unless the handle is MPI_COMM_NULL or
// MPI is already finalized, and sets MPI_ERRORS_RETURN on it so failures come
// back to MPI_CHECK as error codes instead of aborting inside MPI.
#pragma once

#include <mpi.h>

#include <utility>

namespace mpiasr::mpi {

class Communicator {
 public:
  Communicator() = default;
  // Takes ownership of `comm` (which may be MPI_COMM_NULL).
  explicit Communicator(MPI_Comm comm);
  ~Communicator();
  Communicator(Communicator&& other) noexcept : comm_(std::exchange(other.comm_, MPI_COMM_NULL)) {}
  Communicator& operator=(Communicator&& other) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // A duplicate of `comm` (collective over comm), or an empty Communicator
  // when comm is MPI_COMM_NULL.
  static Communicator duplicate(MPI_Comm comm);

  MPI_Comm get() const { return comm_; }
  bool empty() const { return comm_ == MPI_COMM_NULL; }
  int rank() const;
  int size() const;

 private:
  void reset();
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace mpiasr::mpi
