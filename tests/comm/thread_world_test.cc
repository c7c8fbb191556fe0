// The thread transport's point-to-point and its faults: a silent rank is named once the timeout
// has passed, a failing rank aborts the others at once, mismatched sizes are errors, never hangs.
#include "loom/comm/thread/thread_world.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "comm/p2p_only.h"
#include "loom/comm/algorithms.h"
#include "loom/core/error.h"
#include "loom/core/timer.h"

namespace loom::comm {
namespace {

CommOptions short_timeout(double s = 0.3) {
  CommOptions o;
  o.timeout_s = s;
  return o;
}

TEST(ThreadWorldTest, PointToPointMatchesInOrderPerPeerAndTag) {
  ThreadWorld world(3);
  world.run([](Communicator& c) {
    if (c.rank() == 0) {
      // Two messages with one tag arrive in order; another tag is matched independently.
      int a = 1, b = 2, z = 99;
      Request r1 = c.isend(2, &a, sizeof a, 5);
      Request r2 = c.isend(2, &b, sizeof b, 5);
      Request r3 = c.isend(2, &z, sizeof z, 6);
      c.wait(r3);
      c.wait(r1);
      c.wait(r2);
    } else if (c.rank() == 1) {
      int v = 10;
      c.send(2, &v, sizeof v, 5);
    } else {
      int z = 0, x = 0, y = 0, w = 0;
      c.recv(0, &z, sizeof z, 6);  // posted after the tag-5 sends: tags do not block each other
      c.recv(0, &x, sizeof x, 5);
      c.recv(0, &y, sizeof y, 5);
      c.recv(1, &w, sizeof w, 5);
      EXPECT_EQ(z, 99);
      EXPECT_EQ(x, 1);
      EXPECT_EQ(y, 2);
      EXPECT_EQ(w, 10);
    }
  });
}

// A request dropped before wait() (its owner unwinding from an error frees the buffer next)
// is withdrawn: no peer matches it later, and the message after it arrives instead. Were it
// matched, rank 1 would receive the dropped send's bytes from a freed buffer.
TEST(ThreadWorldTest, DroppedRequestsAreWithdrawn) {
  ThreadWorld world(2);
  world.run([](Communicator& c) {
    if (c.rank() == 0) {
      {
        auto gone = std::make_unique<int>(111);
        Request dropped = c.isend(1, gone.get(), sizeof(int), 7);
        int late = 0;
        Request dropped_recv = c.irecv(1, &late, sizeof late, 8);
      }  // both dropped unmatched: withdrawn, the buffers freed
      c.barrier();
      int b = 222;
      c.send(1, &b, sizeof b, 7);
      int v = 0;
      c.recv(1, &v, sizeof v, 8);
      EXPECT_EQ(v, 444);
    } else {
      c.barrier();
      int v = 0;
      c.recv(0, &v, sizeof v, 7);
      EXPECT_EQ(v, 222);
      int d = 444;
      c.send(0, &d, sizeof d, 8);
    }
  });
}

TEST(ThreadWorldTest, SizeMismatchIsACommErrorNamingBothRanks) {
  ThreadWorld world(2, short_timeout(5));
  try {
    world.run([](Communicator& c) {
      double d = 1;
      float f = 0;
      if (c.rank() == 0) c.send(1, &d, sizeof d, 0);
      if (c.rank() == 1) c.recv(0, &f, sizeof f, 0);
    });
    FAIL() << "no error";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 sent 8 bytes"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
  }
}

TEST(ThreadWorldTest, BadPeerAndBadWorldSizeAreErrors) {
  EXPECT_THROW(ThreadWorld(0), ConfigError);
  ThreadWorld world(2);
  int x = 0;
  EXPECT_THROW(world.comm(0).isend(2, &x, sizeof x, 0), CommError);
  EXPECT_THROW(world.comm(0).isend(0, &x, sizeof x, 0), CommError);
  EXPECT_THROW(world.comm(0).isend(1, &x, sizeof x, -1), CommError);
}

// One rank stops answering (it never enters the collective); every other rank must fail with
// a CommError naming it, and the rank that noticed must have waited out the timeout first.
void expect_silent_rank_named(bool generic) {
  const int n = 4, silent = 2;
  const double timeout = 0.3;
  ThreadWorld world(n, short_timeout(timeout));
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;  // ranks other than the silent one that have left the collective
  std::vector<std::string> messages(static_cast<size_t>(n));
  std::vector<double> seconds(static_cast<size_t>(n), -1.0);
  try {
    world.run([&](Communicator& c) {
      if (c.rank() == silent) {
        // Silent until every other rank has given up on it, however long the scheduler takes.
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] { return finished == n - 1; });
        return;
      }
      struct Finished {
        std::mutex& mu;
        std::condition_variable& cv;
        int& finished;
        ~Finished() {
          std::lock_guard<std::mutex> lk(mu);
          ++finished;
          cv.notify_all();
        }
      } on_exit{mu, cv, finished};
      Stopwatch sw;
      std::vector<float> v(1000, 1.0f);
      try {
        if (generic) {
          testing::P2POnly p(c, short_timeout(timeout));
          p.allreduce(std::span<float>(v));
        } else {
          c.allreduce(std::span<float>(v));
        }
      } catch (const CommError& e) {
        std::lock_guard<std::mutex> lk(mu);
        messages[size_t(c.rank())] = e.what();
        seconds[size_t(c.rank())] = sw.seconds();
        throw;
      }
    });
    FAIL() << "no error";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 2 stopped answering"), std::string::npos)
        << e.what();
  }
  for (int r = 0; r < n; ++r) {
    if (r == silent) continue;
    EXPECT_NE(messages[size_t(r)].find("rank 2 stopped answering"), std::string::npos)
        << "rank " << r << ": " << messages[size_t(r)];
  }
  // "...: rank D waited ..." names the rank D that noticed; the others learnt it from the abort.
  // D's wait ended at a deadline `timeout` after it began to wait, which is after D's
  // stopwatch started (the 1e-6 allows for the deadline's rounding to nanoseconds).
  const std::string& m = messages[0];
  const size_t at = m.find("): rank ");
  ASSERT_NE(at, std::string::npos) << m;
  const int noticed = std::atoi(m.c_str() + at + 8);
  ASSERT_TRUE(noticed >= 0 && noticed < n && noticed != silent) << m;
  EXPECT_GE(seconds[size_t(noticed)], timeout - 1e-6) << m;
}

TEST(ThreadWorldTest, SilentRankIsNamedAfterTheTimeoutNative) {
  expect_silent_rank_named(false);
}
TEST(ThreadWorldTest, SilentRankIsNamedAfterTheTimeoutGeneric) {
  expect_silent_rank_named(true);
}

TEST(ThreadWorldTest, FailingRankAbortsOthersAtOnceAndItsErrorIsRethrown) {
  // The others must learn of the failure from the abort: waiting out this timeout would name
  // rank 1 as "stopped answering" instead of "failed", which the messages below tell apart.
  ThreadWorld world(3, short_timeout(30));
  std::vector<std::string> messages(3);
  try {
    world.run([&](Communicator& c) {
      if (c.rank() == 1) throw InputError("shard 1 is missing");
      std::vector<float> v(10, 1.0f);
      try {
        c.allreduce(std::span<float>(v));
      } catch (const CommError& e) {
        messages[size_t(c.rank())] = e.what();
        throw;
      }
    });
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "shard 1 is missing");
  }
  EXPECT_NE(messages[0].find("rank 1 failed: shard 1 is missing"), std::string::npos)
      << messages[0];
  EXPECT_NE(messages[2].find("rank 1 failed"), std::string::npos) << messages[2];
  // The world stays failed: later calls throw at once instead of hanging.
  int x = 0;
  EXPECT_THROW(world.comm(0).isend(1, &x, sizeof x, 0), CommError);
}

TEST(ThreadWorldTest, MismatchedCollectiveSizesAreNamed) {
  ThreadWorld world(2, short_timeout(5));
  try {
    world.run([](Communicator& c) {
      std::vector<float> v(c.rank() == 0 ? 10 : 12, 1.0f);
      c.allreduce(std::span<float>(v));
    });
    FAIL() << "no error";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("passed"), std::string::npos) << e.what();
  }
}

TEST(ThreadWorldTest, DeadlockIsReportedNotHung) {
  ThreadWorld world(2, short_timeout(0.2));
  EXPECT_THROW(world.run([](Communicator& c) {
    int x = 0;
    c.recv(1 - c.rank(), &x, sizeof x, 0);  // both receive, nobody sends
  }),
               CommError);
}

}  // namespace
}  // namespace loom::comm
