#include "comm/shared_mailbox.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>
#include <utility>

#include "base/error.h"

namespace dtrain {

// Each counter on a cache line of its own, written by one side only, so that polling one side's
// counters never contends with the other side's writes.
struct SharedMailbox::Page {
  static constexpr uint64_t kMagic = 0x31786f626c69616dULL;  // "mailbox1"
  struct alignas(64) Line {
    uint64_t value;
  };
  struct Direction {
    Line posted;        // by the sender
    Line taken;         // by the receiver
    Line acknowledged;  // by the receiver
    Record slots[kSlots];
  };
  uint64_t magic;
  Line sleeping[2];        // [side]: that side may be asleep
  Direction direction[2];  // [side]: records from that side
};

namespace {

constexpr size_t kPageBytes =
    (sizeof(SharedMailbox::Record) * SharedMailbox::kSlots * 2 + 4096 + 4095) / 4096 * 4096;
constexpr unsigned kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

uint64_t load(const uint64_t& word) {
  return std::atomic_ref(const_cast<uint64_t&>(word)).load(std::memory_order_acquire);
}
void store(uint64_t& word, uint64_t value) {
  std::atomic_ref(word).store(value, std::memory_order_release);
}

std::string system_error(std::string_view what) {
  return fmt::format("{} ({})", what, std::strerror(errno));
}

}  // namespace

static_assert(std::atomic_ref<uint64_t>::is_always_lock_free,
              "the counters are shared with another process: they must be address-free");

std::unique_ptr<SharedMailbox> SharedMailbox::create(std::string peer) {
  static_assert(sizeof(Page) <= kPageBytes);
  const int fd = static_cast<int>(memfd_create("dtrain-mailbox", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (fd < 0) throw TransportError(system_error("could not create a shared mailbox"));
  if (ftruncate(fd, kPageBytes) != 0 || fcntl(fd, F_ADD_SEALS, kSeals) != 0) {
    const std::string why = system_error("could not size and seal a shared mailbox");
    ::close(fd);
    throw TransportError(why);
  }
  void* mapped = mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapped == MAP_FAILED) {
    const std::string why = system_error("could not map a shared mailbox");
    ::close(fd);
    throw TransportError(why);
  }
  auto* page = static_cast<Page*>(mapped);  // zero-filled: every count starts at 0
  page->magic = Page::kMagic;
  return std::unique_ptr<SharedMailbox>(new SharedMailbox(fd, page, 0, std::move(peer)));
}

std::unique_ptr<SharedMailbox> SharedMailbox::attach(int32_t pid, int32_t fd, std::string peer) {
  const auto fail = [&](std::string_view what) {
    return TransportError(fmt::format("could not share a mailbox with {} (process {}): {}", peer,
                                      pid, system_error(what)));
  };
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) throw fail("pidfd_open failed");
  const int own = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, fd, 0));
  ::close(pidfd);
  if (own < 0) throw fail("pidfd_getfd failed");
  struct stat info {};
  const int seals = fcntl(own, F_GET_SEALS);
  if (fstat(own, &info) != 0 || !S_ISREG(info.st_mode) ||
      info.st_size != static_cast<off_t>(kPageBytes) || seals < 0 ||
      (static_cast<unsigned>(seals) & kSeals) != kSeals) {
    ::close(own);
    errno = EINVAL;
    throw fail(fmt::format("descriptor {} is not a sealed mailbox of {} bytes", fd, kPageBytes));
  }
  void* mapped = mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, own, 0);
  ::close(own);  // the mapping keeps the file
  if (mapped == MAP_FAILED) throw fail("mmap failed");
  auto* page = static_cast<Page*>(mapped);
  if (load(page->magic) != Page::kMagic) {
    munmap(mapped, kPageBytes);
    errno = EINVAL;
    throw fail(fmt::format("descriptor {} is another file", fd));
  }
  return std::unique_ptr<SharedMailbox>(new SharedMailbox(-1, page, 1, std::move(peer)));
}

SharedMailbox::SharedMailbox(int fd, Page* page, int side, std::string peer)
    : fd_(fd), page_(page), side_(side), peer_(std::move(peer)) {}

SharedMailbox::~SharedMailbox() {
  munmap(page_, kPageBytes);
  if (fd_ >= 0) ::close(fd_);
}

void SharedMailbox::insane(std::string_view what) const {
  throw FrameError(
      fmt::format("{} corrupted the mailbox it shares with this task: {}", peer_, what));
}

bool SharedMailbox::try_post(const Record& record) {
  Page::Direction& out = page_->direction[side_];
  if (posted_ - peer_taken_ == kSlots) {
    const uint64_t taken = load(out.taken.value);
    if (taken < peer_taken_ || taken > posted_) {
      insane(fmt::format("it says it took {} records of {} posted", taken, posted_));
    }
    peer_taken_ = taken;
    if (posted_ - peer_taken_ == kSlots) return false;
  }
  out.slots[posted_ % kSlots] = record;
  ++posted_;
  // Sequentially consistent, against the peer's set_sleeping(true) then has_news().
  std::atomic_ref(out.posted.value).store(posted_, std::memory_order_seq_cst);
  return true;
}

bool SharedMailbox::try_take(Record& record) {
  Page::Direction& in = page_->direction[1 - side_];
  const uint64_t posted = load(in.posted.value);
  if (posted == taken_) return false;
  if (posted < taken_ || posted - taken_ > kSlots) {
    insane(fmt::format("it says it posted {} records, {} of them taken", posted, taken_));
  }
  record = in.slots[taken_ % kSlots];
  ++taken_;
  store(in.taken.value, taken_);
  return true;
}

void SharedMailbox::acknowledge(uint64_t count) {
  acknowledged_ += count;
  std::atomic_ref(page_->direction[1 - side_].acknowledged.value)
      .store(acknowledged_, std::memory_order_seq_cst);
}

uint64_t SharedMailbox::acknowledged(uint64_t sent) {
  const uint64_t count = load(page_->direction[side_].acknowledged.value);
  if (count < peer_acknowledged_ || count > sent) {
    insane(fmt::format("it says it finished with {} records of {} sent (it had said {})", count,
                       sent, peer_acknowledged_));
  }
  peer_acknowledged_ = count;
  return count;
}

bool SharedMailbox::has_news(unsigned reasons) {
  const auto seen = [](const uint64_t& word) {
    return std::atomic_ref(const_cast<uint64_t&>(word)).load(std::memory_order_seq_cst);
  };
  return ((reasons & kForRecords) && seen(page_->direction[1 - side_].posted.value) != taken_) ||
         ((reasons & kForAcks) &&
          seen(page_->direction[side_].acknowledged.value) != peer_acknowledged_);
}

void SharedMailbox::set_sleeping(unsigned reasons) {
  std::atomic_ref(page_->sleeping[side_].value).store(reasons, std::memory_order_seq_cst);
}

bool SharedMailbox::peer_sleeping(unsigned reasons) const {
  return (std::atomic_ref(page_->sleeping[1 - side_].value).load(std::memory_order_seq_cst) &
          reasons) != 0;
}

}  // namespace dtrain
