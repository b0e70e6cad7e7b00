// Small records between two processes of one host through a page they share, with no system call
// on either side: the "fast boxes" of Open MPI's shared-memory transport. A record posted here is
// seen by a peer that polls within a cache line's transfer, where a frame over loopback TCP costs
// a send and a receive system call and the kernel's network path between them.
//
// One process creates the mailbox (a memfd, sealed against resizing) and tells its peer the file
// descriptor's number over their authenticated connection; the peer takes its own copy of that
// descriptor out of the creator's descriptor table (pidfd_getfd), which the kernel allows under the
// same rule as reading the creator's memory (comm/peer_memory.h), and maps it. No name in the file
// system ever points at the page, so no third process can open it by name.
//
// Each side posts records to the other in order (a single-producer, single-consumer ring per
// direction), acknowledges records it has finished with, and can say that it is about to sleep,
// so that a peer which posts to it knows to wake it by other means (a frame on their connection).
// A peer is not trusted to keep the counters sane: a count that goes backwards or past what was
// posted is a FrameError naming it, as a malformed frame would be.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace dtrain {

class SharedMailbox {
 public:
  // A record, one cache line: what it means is the user's business (comm/memory_link.h: a frame
  // whose tensors go by reference).
  struct Record {
    uint64_t words[8] = {};
  };
  // Records one side may have posted that the other has not taken yet.
  static constexpr uint64_t kSlots = 256;

  // A new mailbox; `peer` names the process it is for in errors. Throws TransportError with the
  // system's reason when memfd_create or mmap fails.
  static std::unique_ptr<SharedMailbox> create(std::string peer);
  // Maps the mailbox that process `pid` created and holds as descriptor `fd`. Throws
  // TransportError naming `peer` when the descriptor cannot be taken (another user, a kernel
  // before 5.6, a seccomp policy) or is not such a mailbox (another file, not sealed, another
  // size).
  static std::unique_ptr<SharedMailbox> attach(int32_t pid, int32_t fd, std::string peer);

  ~SharedMailbox();
  SharedMailbox(const SharedMailbox&) = delete;
  SharedMailbox& operator=(const SharedMailbox&) = delete;

  // The creator's descriptor, for the peer to take; -1 on the attaching side.
  int32_t fd() const { return fd_; }

  // Appends `record` for the peer; false when kSlots records wait untaken (try again once the
  // peer has taken some). Throws FrameError when the peer's count of taken records is not sane.
  bool try_post(const Record& record);
  // Takes the peer's oldest record not yet taken; false when there is none. Throws FrameError
  // when the peer's count of posted records is not sane.
  bool try_take(Record& record);
  // Says that this side has finished with `count` more of the records it took.
  void acknowledge(uint64_t count = 1);
  // How many of this side's records the peer has acknowledged so far. Throws FrameError when that
  // is more than `sent` (what it may acknowledge: the records posted, unless the user counts more,
  // as comm/memory_link.h does its frames over the socket), or fewer than it said before.
  uint64_t acknowledged(uint64_t sent);
  uint64_t acknowledged() { return acknowledged(posted_); }
  // What a side may sleep for: the peer's records, its acknowledgements, or both.
  static constexpr unsigned kForRecords = 1;
  static constexpr unsigned kForAcks = 2;
  // Whether a try_take (kForRecords) or acknowledged() (kForAcks) would find something new.
  bool has_news(unsigned reasons = kForRecords | kForAcks);

  // While set_sleeping(reasons) with reasons != 0 this side may sleep without polling; a peer that
  // posts (kForRecords) or acknowledges (kForAcks) meanwhile sees peer_sleeping(that reason) and
  // must wake it. A side sets it, then checks has_news(reasons) before it sleeps: the order of the
  // two pairs of accesses (sequential consistency) makes a lost wake-up impossible.
  void set_sleeping(unsigned reasons);
  bool peer_sleeping(unsigned reasons) const;

 private:
  struct Page;
  SharedMailbox(int fd, Page* page, int side, std::string peer);
  [[noreturn]] void insane(std::string_view what) const;

  int fd_;  // the creator's descriptor, kept open for the peer to take; -1 when attached
  Page* page_;
  int side_;  // 0: the creator, 1: the one that attached
  std::string peer_;
  // What this side has done and last seen, so that polling reads the peer's lines only.
  uint64_t posted_ = 0;
  uint64_t peer_taken_ = 0;  // of our records, as last read
  uint64_t taken_ = 0;
  uint64_t acknowledged_ = 0;       // of the peer's records, by us
  uint64_t peer_acknowledged_ = 0;  // of our records, as last read
};

}  // namespace dtrain
