// A TCP client that sends whatever bytes a test gives it, from the source address it is told (any
// of 127.0.0.0/8 reaches a loopback server): a half-sent request, a flood from many hosts, bytes
// that are no protocol at all. Closed when destroyed.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace dtrain::testing {

class RawClient {
 public:
  // Connects to 127.0.0.1:port from `source` (an IPv4 address; "" for the system's choice).
  // connected() says whether it did.
  explicit RawClient(uint16_t port, const std::string& source = "");
  ~RawClient();
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  // Sends all of `bytes`; false if the connection refused them.
  bool send(const std::string& bytes);
  // Whether the server has closed the connection (end of file or a reset) by now; does not wait.
  bool closed_by_server();
  // Whether anything has come from the server by now (bytes, or its close); does not wait.
  bool heard_from_server();
  // Reads until the server closes the connection, at most `patience`; returns what came and
  // sets closed_by_server() when it did close.
  std::string read_until_closed(std::chrono::milliseconds patience);

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
};

}  // namespace dtrain::testing
