// main() of every tests/mpi executable; include it once, at the end of the
// test file. It starts MPI (mpi::Runtime) and runs the tests on every rank.
// World rank 0 prints gtest's usual output; the other ranks print only their
// failures, prefixed with "[rank R]", and every rank's exit status counts
// (mpirun / srun exit non-zero when any rank does).
//
// ctest runs these executables as a single process (world size 1); the
// integration scripts run them under mpirun, on fake nodes and under Slurm.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "mpi/runtime.h"

namespace mpiasr::mpi::test {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.summary());
  }

 private:
  int rank_;
};

}  // namespace mpiasr::mpi::test

int main(int argc, char** argv) {
  mpiasr::mpi::Runtime runtime(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new mpiasr::mpi::test::RankFailurePrinter(rank));
  }
  return RUN_ALL_TESTS();
}
