// The emulated runtime's streams as queues (kernels/cuda_emu/runtime.h):
// work waits until a synchronizing call runs it; each stream keeps its order;
// two streams are ordered only by an event, and without one the emulator
// does run the later stream's work first; the legacy default stream waits
// for the blocking streams and runs at its call, but not for the
// non-blocking ones; a query of pending work may answer cudaErrorNotReady
// and runs some of it; and a host access of pinned memory while a copy into
// or out of it is queued is reported (kernels/cuda_emu/pinned_guard.h). The
// reference in each case is the order in which the host issued the work.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mpiasr {
namespace {

// A host function that appends its tag to a log when it runs.
struct Entry {
  std::string* log;
  char tag;
};

void append(void* data) {
  const Entry* entry = static_cast<const Entry*>(data);
  entry->log->push_back(entry->tag);
}

cudaStream_t non_blocking_stream() {
  cudaStream_t stream = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  return stream;
}

// Queues one host function per tag of `tags` on `stream`, appending to `log`.
void queue_tags(cudaStream_t stream, const std::string& tags, std::string* log,
                std::vector<Entry>* entries) {
  for (const char tag : tags) entries->push_back({log, tag});
  for (size_t i = entries->size() - tags.size(); i < entries->size(); ++i) {
    ASSERT_EQ(cudaLaunchHostFunc(stream, append, &(*entries)[i]), cudaSuccess);
  }
}

TEST(EmulatedStreams, WorkWaitsForASynchronizingCallAndKeepsStreamOrder) {
  cudaStream_t stream = non_blocking_stream();
  std::string log;
  std::vector<Entry> entries;
  entries.reserve(8);
  queue_tags(stream, "01234567", &log, &entries);
  EXPECT_EQ(log, "") << "queued work runs at a synchronizing call, not at its own";
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(log, "01234567");
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// Two streams with 8 pieces each, 20 rounds: without an event some round
// runs a piece of the second stream before one of the first (queued
// earlier), each stream's own pieces in order; with an event recorded after
// the first's pieces and waited on by the second, never.
TEST(EmulatedStreams, TwoStreamsAreOrderedOnlyByAnEvent) {
  cudaStream_t first = non_blocking_stream(), second = non_blocking_stream();
  cudaEvent_t event = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), cudaSuccess);
  for (const bool ordered : {false, true}) {
    int overtaken = 0;
    for (int round = 0; round < 20; ++round) {
      std::string log;
      std::vector<Entry> entries;
      entries.reserve(16);
      queue_tags(first, "abcdefgh", &log, &entries);
      if (ordered) {
        ASSERT_EQ(cudaEventRecord(event, first), cudaSuccess);
        ASSERT_EQ(cudaStreamWaitEvent(second, event, 0), cudaSuccess);
      }
      queue_tags(second, "ABCDEFGH", &log, &entries);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ASSERT_EQ(log.size(), 16u);
      std::string first_log, second_log;
      for (const char c : log) (c >= 'a' ? first_log : second_log).push_back(c);
      EXPECT_EQ(first_log, "abcdefgh") << log;
      EXPECT_EQ(second_log, "ABCDEFGH") << log;
      if (log != "abcdefghABCDEFGH") ++overtaken;
    }
    if (ordered) {
      EXPECT_EQ(overtaken, 0) << "the event orders the streams";
    } else {
      EXPECT_GT(overtaken, 0) << "without an event the second stream never ran first";
    }
  }
  EXPECT_EQ(cudaEventDestroy(event), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(first), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(second), cudaSuccess);
}

// Work on the legacy default stream runs at its call, after the blocking
// streams' work queued before it, and without the non-blocking streams'.
TEST(EmulatedStreams, TheLegacyStreamWaitsForBlockingStreamsOnly) {
  cudaStream_t blocking = nullptr;
  ASSERT_EQ(cudaStreamCreate(&blocking), cudaSuccess);
  cudaStream_t non_blocking = non_blocking_stream();
  std::string log;
  std::vector<Entry> entries;
  entries.reserve(3);
  queue_tags(blocking, "b", &log, &entries);
  queue_tags(non_blocking, "n", &log, &entries);
  queue_tags(nullptr, "L", &log, &entries);
  EXPECT_EQ(log, "bL");
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(log, "bLn");
  EXPECT_EQ(cudaStreamDestroy(blocking), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(non_blocking), cudaSuccess);
}

// At 100% a query of pending work answers cudaErrorNotReady and runs up to 3
// pieces, so polling ends (at least 4 polls for 10 pieces); at 0% it runs
// the work and answers cudaSuccess; at 50%, of 400 queries of one pending
// piece each, about half answer not-ready (binomial: 200, sigma 10).
TEST(EmulatedStreams, QueriesMayAnswerNotReadyAndRunSomeWork) {
  cudaStream_t stream = non_blocking_stream();
  cudaEvent_t event = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), cudaSuccess);
  std::string log;
  std::vector<Entry> entries;
  entries.reserve(512);

  emu::set_not_ready_percent(100);
  queue_tags(stream, "0123456789", &log, &entries);
  ASSERT_EQ(cudaEventRecord(event, stream), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(event), cudaErrorNotReady);
  int polls = 1;
  while (cudaStreamQuery(stream) == cudaErrorNotReady) ++polls;
  EXPECT_GE(polls, 4);
  EXPECT_EQ(log, "0123456789");
  EXPECT_EQ(cudaEventQuery(event), cudaSuccess) << "done work is ready at any percentage";
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "not-ready is no error";

  emu::set_not_ready_percent(0);
  log.clear();
  queue_tags(stream, "ab", &log, &entries);
  ASSERT_EQ(cudaEventRecord(event, stream), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(event), cudaSuccess);
  EXPECT_EQ(log, "ab");

  emu::set_not_ready_percent(50);
  int not_ready = 0;
  for (int i = 0; i < 400; ++i) {
    queue_tags(stream, "x", &log, &entries);
    if (cudaStreamQuery(stream) == cudaErrorNotReady) ++not_ready;
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }
  EXPECT_GT(not_ready, 150);
  EXPECT_LT(not_ready, 250);
  emu::set_not_ready_percent(25);  // the default, for the tests after this one
  EXPECT_EQ(cudaEventDestroy(event), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// Two pages of pinned memory with a copy of all of them queued: into them
// (a device-to-host copy) the host may neither read nor write them; out of
// them (host-to-device) it may read but not write them. Once the stream is
// synchronized, both are free again.
TEST(EmulatedStreamsDeathTest, AHostAccessOfPinnedMemoryDuringItsCopyIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  constexpr size_t kBytes = 8192;
  cudaStream_t stream = non_blocking_stream();
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, kBytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(device, 7, kBytes), cudaSuccess);
  unsigned char* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), kBytes), cudaSuccess);
  const auto read = [](const unsigned char* p) {
    return *static_cast<const volatile unsigned char*>(p);
  };

  EXPECT_DEATH(
      {
        (void)cudaMemcpyAsync(pinned, device, kBytes, cudaMemcpyDeviceToHost, stream);
        (void)read(pinned + 5000);
      },
      "host read of pinned memory at 0x[0-9a-f]+ \\(offset 5000 in the allocation at "
      "0x[0-9a-f]+\\) "
      "while a cudaMemcpyAsync of 8192 bytes from the device into it on stream 0x[0-9a-f]+ is "
      "pending");
  EXPECT_DEATH(
      {
        (void)cudaMemcpyAsync(device, pinned, kBytes, cudaMemcpyHostToDevice, stream);
        pinned[10] = 1;
      },
      "host write of pinned memory .*offset 10 .*out of it to the device");

  ASSERT_EQ(cudaMemcpyAsync(pinned, device, kBytes, cudaMemcpyDeviceToHost, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(read(pinned + 5000), 7);
  ASSERT_EQ(cudaMemcpyAsync(device, pinned, kBytes, cudaMemcpyHostToDevice, stream), cudaSuccess);
  EXPECT_EQ(read(pinned + 10), 7) << "reading the source of a pending copy is allowed";
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  pinned[10] = 1;
  EXPECT_EQ(read(pinned + 10), 1);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
  EXPECT_EQ(cudaFree(device), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

}  // namespace
}  // namespace mpiasr
