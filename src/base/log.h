// dtrain's one logging channel: warnings, and notes about peers, connections and links (a refused
// handshake, a lost worker, a link that falls back to frames), go through spdlog's default logger
// (spdlog::warn, spdlog::info, spdlog::debug; a line is "[time] [level] <who>: <what>", flushed as
// it is written). A run's own report (the start-up table with each link's transport, the step
// lines, what was restored, the final figures) is not logging: it goes to the std::ostream its
// caller passes down, so that a test reads it. Tests capture the log with tests/comm/loopback.h's
// LogCapture.
#pragma once

#include <spdlog/spdlog.h>
