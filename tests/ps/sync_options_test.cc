// The sync options: 0 means all of the cluster's workers, resolved where their number is known.
#include "ps/sync_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;

std::string refusal(const SyncOptions& sync, int workers) {
  try {
    resolve_sync_options(sync, workers);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(SyncOptions, TheDefaultsMeanAllTheWorkersOfTheCluster) {
  const SyncOptions sync = resolve_sync_options(SyncOptions{.sync_replicas = true}, 3);
  EXPECT_EQ(sync.total_num_replicas, 3);
  EXPECT_EQ(sync.replicas_to_aggregate, 3);
  EXPECT_EQ(aggregate_count(sync), 3);
  // An async ps counts its workers the same way.
  EXPECT_EQ(resolve_sync_options(SyncOptions{}, 2).total_num_replicas, 2);
}

TEST(SyncOptions, GivenCountsThatFitAreKept) {
  const SyncOptions sync = resolve_sync_options(
      {.sync_replicas = true, .total_num_replicas = 3, .replicas_to_aggregate = 2}, 3);
  EXPECT_EQ(sync.total_num_replicas, 3);
  EXPECT_EQ(aggregate_count(sync), 2);
}

TEST(SyncOptions, CountsThatDoNotFitTheClusterAreRefusedByFlag) {
  EXPECT_EQ(refusal({.total_num_replicas = 1}, 2),
            "--total_num_replicas 1: the cluster has 2 training workers; give 2 or leave it out");
  EXPECT_EQ(refusal({.replicas_to_aggregate = 3}, 2),
            "--replicas_to_aggregate 3: must be in 1..2 (the workers)");
}

TEST(SyncOptions, AnUnresolvedCountIsNotTakenForOneWorker) {
  try {
    aggregate_count(SyncOptions{.sync_replicas = true});
    FAIL() << "0 workers accepted";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--total_num_replicas 0: need at least one worker"));
  }
}

}  // namespace
}  // namespace dtrain
