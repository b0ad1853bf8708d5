#include "mpi/communicator.h"

#include "mpi/mpi_check.h"

namespace mpiasr::mpi {

Communicator::Communicator(MPI_Comm comm) : comm_(comm) {
  if (comm_ != MPI_COMM_NULL) MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
}

Communicator::~Communicator() {
  reset();
}

Communicator& Communicator::operator=(Communicator&& other) noexcept {
  if (this != &other) {
    reset();
    comm_ = std::exchange(other.comm_, MPI_COMM_NULL);
  }
  return *this;
}

Communicator Communicator::duplicate(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return Communicator();
  MPI_Comm copy = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_dup(comm, &copy));
  return Communicator(copy);
}

int Communicator::rank() const {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm_, &rank));
  return rank;
}

int Communicator::size() const {
  int size = 0;
  MPI_CHECK(MPI_Comm_size(comm_, &size));
  return size;
}

void Communicator::reset() {
  if (comm_ == MPI_COMM_NULL) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
  comm_ = MPI_COMM_NULL;
}

}  // namespace mpiasr::mpi
