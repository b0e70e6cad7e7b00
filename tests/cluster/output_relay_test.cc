// The launcher's relay of its tasks' output: prefixed lines, and a task's progress bar kept on the
// terminal's last line below everyone's lines, or dropped where the output is not a terminal.
#include "cluster/output_relay.h"

#include <gtest/gtest.h>

#include <sstream>

namespace dtrain {
namespace {

constexpr char kBar[] = "\r[##....] 20% 2/10 loss 0.5000 ETA 1.0s\x1b[K";
constexpr char kClear[] = "\r\x1b[K";

TEST(OutputRelay, OnATerminalTheBarStaysBelowTheLinesOfEveryTask) {
  std::ostringstream out;
  OutputRelay relay(out, /*terminal=*/true);
  std::string worker0, worker1;
  relay.relay("worker0", true, kBar, worker0);
  EXPECT_EQ(out.str(), "\r[worker0] [##....] 20% 2/10 loss 0.5000 ETA 1.0s\x1b[K");
  out.str("");
  relay.relay("worker1", true, "worker=1, global_step=4\n", worker1);
  EXPECT_EQ(out.str(),
            "\r\x1b[K[worker1] worker=1, global_step=4\n"
            "\r[worker0] [##....] 20% 2/10 loss 0.5000 ETA 1.0s\x1b[K");
  out.str("");
  // The chief clears its bar before a line of its own.
  relay.relay("worker0", true, std::string(kClear) + "worker=0, global_step=5\n", worker0);
  EXPECT_EQ(out.str(), "\r\x1b[K[worker0] worker=0, global_step=5\n");
  EXPECT_TRUE(worker0.empty());
}

TEST(OutputRelay, ElsewhereBarsAreDroppedAndLinesComeOutClean) {
  std::ostringstream out;
  OutputRelay relay(out, /*terminal=*/false);
  std::string worker0;
  relay.relay("worker0", true,
              std::string(kBar) + kBar + kClear + "step 10, loss = 0.3\n" + kBar + "tail", worker0);
  EXPECT_EQ(out.str(), "[worker0] step 10, loss = 0.3\n");
  relay.flush("worker0", true, worker0);
  EXPECT_EQ(out.str(), "[worker0] step 10, loss = 0.3\n[worker0] tail\n");
}

TEST(OutputRelay, ABarOrALineInPiecesWaitsForTheRest) {
  std::ostringstream out;
  OutputRelay relay(out, /*terminal=*/true);
  std::string pending;
  relay.relay("ps0", true, "listening on ", pending);
  relay.relay("ps0", true, "\r[#.] 50%", pending);
  EXPECT_EQ(out.str(), "");
  relay.relay("ps0", true, "\x1b[K", pending);
  EXPECT_EQ(out.str(), "\r[ps0] [#.] 50%\x1b[K");
  out.str("");
  relay.relay("ps0", true, "port 1\n", pending);
  EXPECT_EQ(out.str(), "\r\x1b[K[ps0] listening on port 1\n\r[ps0] [#.] 50%\x1b[K");
}

TEST(OutputRelay, ABareCarriageReturnIsNoBarAndLinesWithoutPrefixStayAsTheyAre) {
  std::ostringstream out;
  OutputRelay relay(out, /*terminal=*/true);
  std::string pending;
  relay.relay("report", false, "a\rb\n", pending);
  relay.line("[launcher] worker1 exited with code 1");
  EXPECT_EQ(out.str(), "ab\n[launcher] worker1 exited with code 1\n");
}

}  // namespace
}  // namespace dtrain
