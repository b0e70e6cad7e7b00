// The orders of a run's owner as every worker takes them: the rate from the step the chief posted
// it at, the stop at its step, a lockstep worker waiting for the chief's post of its step, and a
// closed control releasing every waiter.
#include "train/run_control.h"

#include <gtest/gtest.h>

#include <thread>

namespace dtrain {
namespace {

class SilentOwner final : public RunOwner {
 public:
  bool wants_batches() const override { return false; }
  RunOrders on_event(const RunEvent&, const RunWeights&) override { return {}; }
};

TEST(RunControl, ALockstepWorkerTakesTheOrdersInForceAtItsOwnStep) {
  SilentOwner owner;
  RunControl control(owner, /*lockstep=*/true);
  control.post(0, {});
  control.post(5, {.learning_rate = 0.5f});
  control.post(7, {.learning_rate = 0.5f});
  control.post(8, {.learning_rate = 0.25f, .stop = true});
  EXPECT_FALSE(control.orders_at(3).learning_rate);
  EXPECT_EQ(control.orders_at(5).learning_rate, 0.5f);
  EXPECT_EQ(control.orders_at(7).learning_rate, 0.5f);
  EXPECT_FALSE(control.orders_at(7).stop);
  const RunOrders last = control.orders_at(8);
  EXPECT_EQ(last.learning_rate, 0.25f);
  EXPECT_TRUE(last.stop);
}

TEST(RunControl, AnAsyncWorkerTakesTheLatestOrdersWhateverItsStep) {
  SilentOwner owner;
  RunControl control(owner, /*lockstep=*/false);
  control.post(10, {.learning_rate = 0.5f});
  // A step the chief has not reached yet, and one it passed: both get the latest.
  EXPECT_EQ(control.orders_at(50).learning_rate, 0.5f);
  EXPECT_EQ(control.orders_at(2).learning_rate, 0.5f);
  EXPECT_FALSE(control.orders_at(2).stop);
  control.post(11, {.stop = true});
  EXPECT_TRUE(control.orders_at(2).stop);
}

TEST(RunControl, AWaitingWorkerGetsTheChiefsPostOfItsStepOrAStopOnceClosed) {
  SilentOwner owner;
  RunControl control(owner, /*lockstep=*/true);
  RunOrders at_three, at_nine;
  std::thread follower([&] {
    at_three = control.orders_at(3);
    at_nine = control.orders_at(9);  // never posted: released by close()
  });
  for (int64_t step = 0; step <= 3; ++step)
    control.post(step, {.learning_rate = static_cast<float>(step) / 8});
  control.close();
  follower.join();
  EXPECT_EQ(at_three.learning_rate, 3.0f / 8);
  EXPECT_FALSE(at_three.stop);
  EXPECT_TRUE(at_nine.stop);
}

}  // namespace
}  // namespace dtrain
