#include "support/cut_proxy.h"

namespace dtrain::testing {
namespace {

class CutAfter final : public Forwarder::Filter {
 public:
  CutAfter(uint64_t cut_at, std::shared_ptr<std::atomic<int>> cuts)
      : cut_at_(cut_at), cuts_(std::move(cuts)) {}

  bool from_client(std::span<const std::byte> in, std::vector<std::byte>& out) override {
    out.insert(out.end(), in.begin(), in.end());
    return true;
  }
  bool from_server(std::span<const std::byte> in, std::vector<std::byte>& out) override {
    if (cut_at_ > 0 && returned_ + in.size() > cut_at_) {
      ++*cuts_;
      return false;
    }
    returned_ += in.size();
    out.insert(out.end(), in.begin(), in.end());
    return true;
  }

 private:
  const uint64_t cut_at_;
  uint64_t returned_ = 0;
  std::shared_ptr<std::atomic<int>> cuts_;
};

}  // namespace

CutProxy::CutProxy(uint16_t target, std::function<uint64_t()> next_cut)
    : next_cut_(std::move(next_cut)), forwarder_(std::make_unique<Forwarder>(target, [this] {
        return std::make_unique<CutAfter>(next_cut_ ? next_cut_() : 0, cuts_);
      })) {}

}  // namespace dtrain::testing
