// The one way dtrain reports a failure that ends an operation: an exception under dtrain::Error
// whose message names the culprit (file, flag, peer) and what is wrong. Caught at a task's
// boundary, printed as one line and turned into an exit code. Expected outcomes (a retry, a stale
// gradient) are values instead.
#pragma once

#include <stdexcept>
#include <string>

namespace dtrain {

// Every class below declares its constructor rather than inheriting it (`using Base::Base`): GCC's
// -fsanitize=vptr checks an inherited constructor's call of its base as a member call on the
// object under construction, and reports whatever stale vptr the stack slot still holds (seen
// once in the gate: "member call on address ... which does not point to an object of type
// 'Error'" while a TransportError was being made).
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A flag or configuration value is invalid. Exit code 2, as for any usage error.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& what) : Error(what) {}
};

// A model or a data file asks for more memory than this machine has, or than this process may
// allocate under its limits (base/machine_memory.h), or for sizes that overflow: refused before
// anything is allocated, naming the layer or the file, its size and the limit. Exit code 2, as for
// a usage error: run as it is, it can never succeed.
class TooLargeError : public UsageError {
 public:
  explicit TooLargeError(const std::string& what) : UsageError(what) {}
};

// A data file (IDX, TFRecord) is missing, malformed or inconsistent.
class DataError : public Error {
 public:
  explicit DataError(const std::string& what) : Error(what) {}
};

// A checkpoint is missing, corrupt or does not match the model.
class CheckpointError : public Error {
 public:
  explicit CheckpointError(const std::string& what) : Error(what) {}
};

// An operating-system call failed (open, write, rename, fsync).
class IoError : public Error {
 public:
  explicit IoError(const std::string& what) : Error(what) {}
};

// A stop request (a signal: cli/shutdown.h) ended a wait for a peer before it was over. Not a
// failure of the task's: it exits with 128 + signal(), as it would at a step boundary.
class StopRequested : public Error {
 public:
  StopRequested(const std::string& what, int signal) : Error(what), signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

// A connection to a peer failed: it closed or timed out, sent a malformed frame, or failed
// authentication. The message names the peer (task and/or address) and the reason.
class TransportError : public Error {
 public:
  explicit TransportError(const std::string& what) : Error(what) {}
};

// The peer closed the connection: read the end of its byte stream.
class PeerClosed : public TransportError {
 public:
  explicit PeerClosed(const std::string& what) : TransportError(what) {}
};

// A frame broke the wire format: bad magic, version or CRC32C, unknown type, or longer than the
// configured limit.
class FrameError : public TransportError {
 public:
  explicit FrameError(const std::string& what) : TransportError(what) {}
};

// A peer failed the HMAC challenge-response (wrong or missing cluster secret).
class AuthError : public TransportError {
 public:
  explicit AuthError(const std::string& what) : TransportError(what) {}
};

// A collective (all-reduce, broadcast, barrier) could not complete: a rank was lost or stuck, or
// the ranks disagree on what they are running. The message names the rank at fault.
class CollectiveError : public TransportError {
 public:
  explicit CollectiveError(const std::string& what) : TransportError(what) {}
};

}  // namespace dtrain
