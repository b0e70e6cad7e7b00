// One Membership, whoever feeds it: the membership in force, and each that took effect told once
// at the next step boundary, as the chief's scalar "workers" records them.
#include "cluster/membership.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dtrain {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

TEST(Membership, ASettledMembershipIsTheOneInForce) {
  Membership membership;
  EXPECT_EQ(membership.current().version, 0u);
  membership.settle({.version = 2, .workers = 2, .rank = 1, .left = 1, .joined = 0});
  EXPECT_EQ(membership.current().version, 2u);
  EXPECT_EQ(membership.current().workers, 2);
  EXPECT_EQ(membership.current().rank, 1);
  EXPECT_EQ(membership.counts(), "1 worker(s) left, 0 joined");
}

TEST(Membership, EachThatTookEffectIsToldOnceAtTheNextBoundary) {
  Membership membership;
  membership.settle({.version = 1, .workers = 3});
  membership.took_effect(0);
  membership.settle({.version = 2, .workers = 2, .left = 1});
  membership.took_effect(41);
  EXPECT_THAT(membership.take_at_boundary(), ElementsAre(Pair(0, 3.0), Pair(41, 2.0)));
  EXPECT_THAT(membership.take_at_boundary(), IsEmpty());
}

TEST(Membership, ASettledViewWhoseRingDidNotFormIsNotToldButCounted) {
  Membership membership;
  membership.settle({.version = 2, .workers = 2, .left = 1});
  membership.settle({.version = 3, .workers = 3, .left = 1, .joined = 1});
  membership.took_effect(50);
  EXPECT_THAT(membership.take_at_boundary(), ElementsAre(Pair(50, 3.0)));
  EXPECT_EQ(membership.counts(), "1 worker(s) left, 1 joined");
}

}  // namespace
}  // namespace dtrain
