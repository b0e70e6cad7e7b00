// The test binaries' main: GoogleTest's own, except for one exit status. ctest runs a whole test
// suite per process (tests/gtest_suites.cmake), and a run in which every test that ran was skipped
// (GTEST_SKIP, with its reason) exits 77, which ctest reports as skipped rather than passed. A run
// with a failure exits 1 whatever else it skipped, so a skip can never hide a failure.
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  const int status = RUN_ALL_TESTS();
  const testing::UnitTest& run = *testing::UnitTest::GetInstance();
  if (status == 0 && run.successful_test_count() == 0 && run.skipped_test_count() > 0) return 77;
  return status;
}
