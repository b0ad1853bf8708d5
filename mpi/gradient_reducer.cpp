// The gradient all-reduce on a communication thread: ring, hierarchical and
// sharded (reduce-scatter) rounds over point-to-point messages (see
// gradient_reducer.h).
#include "mpi/gradient_reducer.h"

#include <algorithm>

#include "mpi/collectives.h"
#include "mpi/mpi_check.h"
#include "mpi/timeout.h"
#include "src/base/thread_cpu.h"
#include "src/base/thread_policy.h"

namespace mpiasr::mpi {

namespace {

// Sleeps between polls while buckets are in flight: from the first, doubled
// after every poll that completes nothing, up to the last. At 1 Gbit/s the
// longest sleep is 62 KB of traffic, well within a TCP socket's buffers.
constexpr auto kFirstPollSleep = std::chrono::microseconds(20);
constexpr auto kLongestPollSleep = std::chrono::microseconds(500);
// The longest once finish() waits: every poll's delay is then exposed.
constexpr auto kLongestPollSleepInFinish = std::chrono::microseconds(50);

}  // namespace

GradientReducer::GradientReducer(const Context& ctx, float* grads, size_t count,
                                 ReducerOptions options)
    : ctx_(ctx),
      grads_(grads),
      plan_(count, options.bucket_bytes, options.first_bucket_bytes, options.range_alignment,
            "GradientReducer", options.shard ? size_t(ctx.world_size()) : 1),
      shard_(options.shard),
      half_wire_(options.half_wire),
      record_timeline_(options.record_timeline) {
  MPIASR_CHECK(grads != nullptr || count == 0, "gradient buffer is null");
  if (options.shard && options.hierarchical) {
    MPIASR_FAIL(ExitCode::kUsage,
                "the sharded optimizer (distributed.zero_stage = 1) reduce-scatters over the "
                "world; it does not work with distributed.hierarchical = true");
  }
  int thread_level = MPI_THREAD_SINGLE;
  MPI_CHECK(MPI_Query_thread(&thread_level));
  MPIASR_CHECK(thread_level >= MPI_THREAD_SERIALIZED,
               "the gradient reducer's communication thread needs MPI_THREAD_SERIALIZED or more; "
               "this MPI provides level "
                   << thread_level);
  void* tag_ub = nullptr;
  int found = 0;
  MPI_CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found));
  if (found) tag_limit_ = *static_cast<int*>(tag_ub);

  if (options.hierarchical) {
    comms_.push_back(Communicator::duplicate(ctx.node_comm()));
    Communicator leaders = Communicator::duplicate(ctx.leaders_comm());
    const MPI_Comm node = comms_.back().get();
    const int local_size = ctx.local_size();
    if (ctx.is_node_leader()) {
      for (int rank = 1; rank < local_size; ++rank) {
        rounds_.push_back({.comm = node, .recv_from = rank, .reduce = true});
      }
      comms_.push_back(std::move(leaders));
      add_ring(comms_.back().get(), ctx.node_index(), ctx.num_nodes(), true);
      Round send_back{.comm = node};
      for (int rank = 1; rank < local_size; ++rank) send_back.send_to.push_back(rank);
      if (local_size > 1) rounds_.push_back(send_back);
    } else {
      rounds_.push_back({.comm = node, .send_to = {0}});
      rounds_.push_back({.comm = node, .recv_from = 0});
    }
  } else {
    comms_.push_back(Communicator::duplicate(ctx.world_comm()));
    add_ring(comms_.back().get(), ctx.world_rank(), ctx.world_size(), !options.shard);
  }
  for (const Round& round : rounds_) {
    requests_per_bucket_ =
        std::max(requests_per_bucket_, round.send_to.size() + (round.recv_from >= 0 ? 1 : 0));
    if (half_wire_) {
      if (!round.send_to.empty()) wire_sent_.resize(count);
      if (round.recv_from >= 0) wire_received_.resize(count);
    } else if (round.reduce) {
      scratch_.resize(count);
    }
  }
  for (size_t b = 0; b < plan_.num_buckets(); ++b) ranges_.push_back(plan_.bucket_range(b));
  buckets_.resize(ranges_.size());
  if (record_timeline_) {
    for (const auto& [begin, n] : ranges_) timeline_.push_back({.bytes = n * sizeof(float)});
  }
  requests_.assign(buckets_.size() * requests_per_bucket_, MPI_REQUEST_NULL);
  completed_.resize(requests_.size());
  thread_ = std::thread(&GradientReducer::communicate, this);
}

GradientReducer::~GradientReducer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void GradientReducer::add_ring(MPI_Comm comm, int rank, int size, bool all_gather) {
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  const auto wrap = [size](int part) { return ((part % size) + size) % size; };
  for (int k = 0; k + 1 < size; ++k) {  // reduce-scatter: rank r ends with the sum of part r
    rounds_.push_back({.comm = comm,
                       .parts = size,
                       .send_part = wrap(rank - k - 1),
                       .send_to = {next},
                       .recv_part = wrap(rank - k - 2),
                       .recv_from = previous,
                       .reduce = true});
  }
  for (int k = 0; all_gather && k + 1 < size; ++k) {
    rounds_.push_back({.comm = comm,
                       .parts = size,
                       .send_part = wrap(rank - k),
                       .send_to = {next},
                       .recv_part = wrap(rank - k - 1),
                       .recv_from = previous});
  }
}

void GradientReducer::begin_step() {
  plan_.begin_step();
  std::lock_guard<std::mutex> lock(mutex_);
  handed_out_ = 0;
  closed_ = false;
  step_done_ = false;
}

size_t GradientReducer::hand_out() {
  size_t ready = 0;
  for (; const std::optional<size_t> b = plan_.next_to_start(); ++ready) {
    if (record_timeline_) timeline_[*b].ready = Clock::now();
  }
  return ready;
}

void GradientReducer::on_grads_ready(size_t offset, size_t count) {
  plan_.mark_ready(offset, count);
  const size_t ready = hand_out();
  if (ready == 0) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    handed_out_ += ready;
  }
  wake_.notify_one();
}

void GradientReducer::finish() {
  const Clock::time_point start = Clock::now();
  last_started_early_ = plan_.started();
  plan_.end_step();
  const size_t rest = hand_out();
  std::unique_lock<std::mutex> lock(mutex_);
  handed_out_ += rest;
  closed_ = true;
  closed_at_ = start;
  wake_.notify_one();
  finished_.wait(lock, [this] { return step_done_; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  last_wait_seconds_ = std::chrono::duration<double>(Clock::now() - start).count();
}

void GradientReducer::communicate() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [this] { return stop_ || (!step_done_ && (handed_out_ > 0 || closed_)); });
    if (stop_) return;
    lock.unlock();
    const double cpu_begin = thread_cpu_seconds();
    std::exception_ptr error;
    try {
      reduce_step();
    } catch (...) {
      error = std::current_exception();
    }
    const double cpu = thread_cpu_seconds() - cpu_begin;
    lock.lock();
    if (stop_) return;
    error_ = error;
    last_comm_cpu_seconds_ = cpu;
    step_done_ = true;
    finished_.notify_all();
  }
}

void GradientReducer::reduce_step() {
  for (Bucket& bucket : buckets_) bucket = Bucket{};
  posted_ = done_buckets_ = 0;
  auto sleep = kFirstPollSleep;
  // What the last look under the lock saw: once finish() has closed the
  // step, the wait below must not count that as news on every poll.
  bool closed = false;
  Clock::time_point closed_at;
  // While backward runs, a poll must not preempt the compute thread of a
  // busy core; once finish() waits, that core is idle (see the header).
  BatchScheduling while_backward;
  while (true) {
    size_t handed_out = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // Nothing in flight: sleep until more is handed out. In flight: until
      // the next poll.
      const auto more = [&] { return stop_ || handed_out_ > posted_ || closed_ != closed; };
      if (posted_ == done_buckets_) {
        wake_.wait(lock, more);
      } else {
        wake_.wait_for(lock, sleep, more);
      }
      if (stop_) return;
      handed_out = handed_out_;
      closed = closed_;
      closed_at = closed_at_;
    }
    if (closed) while_backward.end();
    bool advanced = false;
    for (; posted_ < handed_out; ++posted_, advanced = true) post(posted_);
    advanced |= progress();
    if (closed && done_buckets_ == buckets_.size()) return;
    if (closed) {
      // The trainer waits in finish(), off MPI: a rank that timed out
      // elsewhere may ask this one where it is.
      answer_where(ctx_, "gradient all-reduce");
      if (Clock::now() - closed_at > std::chrono::duration<double>(ctx_.timeout_s())) {
        abort_on_timeout(ctx_, "gradient all-reduce");
      }
    }
    sleep = advanced ? kFirstPollSleep
                     : std::min(2 * sleep, closed ? kLongestPollSleepInFinish : kLongestPollSleep);
  }
}

std::pair<float*, int> GradientReducer::part(size_t b, int part, int parts) const {
  const auto [begin, count] = ranges_[b];
  const size_t from = count * size_t(part) / size_t(parts);
  const size_t to = count * size_t(part + 1) / size_t(parts);
  return {grads_ + begin + from, int(to - from)};
}

void GradientReducer::post(size_t b) {
  Bucket& bucket = buckets_[b];
  if (record_timeline_ && bucket.round == 0) timeline_[b].start = Clock::now();
  if (bucket.round == rounds_.size()) {
    if (record_timeline_) timeline_[b].end = Clock::now();
    bucket.in_flight = false;
    ++done_buckets_;
    return;
  }
  const Round& round = rounds_[bucket.round];
  const int tag = int(b % size_t(tag_limit_));
  MPI_Request* request = &requests_[b * requests_per_bucket_];
  if (round.recv_from >= 0) {
    const auto [data, n] = part(b, round.recv_part, round.parts);
    const size_t at = size_t(data - grads_);
    if (half_wire_) {
      MPI_CHECK(MPI_Irecv(wire_received_.data() + at, n, MPI_UINT16_T, round.recv_from, tag,
                          round.comm, request++));
    } else {
      float* into = round.reduce ? scratch_.data() + at : data;
      MPI_CHECK(MPI_Irecv(into, n, MPI_FLOAT, round.recv_from, tag, round.comm, request++));
    }
  }
  if (!round.send_to.empty()) {
    const auto [data, n] = part(b, round.send_part, round.parts);
    const void* message = data;
    MPI_Datatype type = MPI_FLOAT;
    if (half_wire_) {
      uint16_t* wire = wire_sent_.data() + (data - grads_);
      round_to_wire(*half_wire_, wire, data, size_t(n));
      message = wire;
      type = MPI_UINT16_T;
    }
    for (int peer : round.send_to) {
      MPI_CHECK(MPI_Isend(message, n, type, peer, tag, round.comm, request++));
    }
  }
  bucket.in_flight = true;
}

bool GradientReducer::progress() {
  if (posted_ == done_buckets_) return false;
  int completed = 0;
  MPI_CHECK(MPI_Testsome(int(requests_.size()), requests_.data(), &completed, completed_.data(),
                         MPI_STATUSES_IGNORE));
  if (completed == MPI_UNDEFINED || completed == 0) return false;
  for (size_t b = 0; b < posted_; ++b) {
    Bucket& bucket = buckets_[b];
    if (!bucket.in_flight) continue;
    const MPI_Request* requests = &requests_[b * requests_per_bucket_];
    if (!std::all_of(requests, requests + requests_per_bucket_,
                     [](MPI_Request r) { return r == MPI_REQUEST_NULL; })) {
      continue;
    }
    const Round& round = rounds_[bucket.round];
    if (round.recv_from >= 0) {
      const auto [data, n] = part(b, round.recv_part, round.parts);
      const size_t at = size_t(data - grads_);
      if (half_wire_ && round.reduce) {
        add_from_wire(*half_wire_, data, wire_received_.data() + at, size_t(n));
      } else if (half_wire_) {
        copy_from_wire(*half_wire_, data, wire_received_.data() + at, size_t(n));
      } else if (round.reduce) {
        const float* received = scratch_.data() + at;
        for (int i = 0; i < n; ++i) data[i] += received[i];
      }
    }
    ++bucket.round;
    post(b);
  }
  return true;
}

void GradientReducer::sum_over_ranks(double* value) {
  MPIASR_CHECK(shard_, "GradientReducer::sum_over_ranks without shard = true");
  *value = allreduce_sum(ctx_, *value, "gradient norm all-reduce");
}

void GradientReducer::gather_parameters(float* params) {
  MPIASR_CHECK(shard_, "GradientReducer::gather_parameters without shard = true");
  std::vector<MPI_Request> requests(plan_.num_buckets(), MPI_REQUEST_NULL);
  for (size_t b = 0; b < plan_.num_buckets(); ++b) {
    const auto [begin, count] = plan_.bucket_range(b);
    MPI_CHECK(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, params + begin,
                             int(count / plan_.shards()), MPI_FLOAT, comms_.front().get(),
                             &requests[b]));
  }
  wait_or_abort(ctx_, requests, "parameter all-gather");
}

}  // namespace mpiasr::mpi
