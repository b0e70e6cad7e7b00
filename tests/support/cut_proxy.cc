#include "support/cut_proxy.h"

namespace dtrain::testing {
namespace {

class CutAfter final : public Forwarder::Filter {
 public:
  CutAfter(uint64_t cut_at, CutProxy::Counting counting, std::shared_ptr<std::atomic<int>> cuts)
      : cut_at_(cut_at), counting_(counting), cuts_(std::move(cuts)) {}

  bool from_client(std::span<const std::byte> in, std::vector<std::byte>& out) override {
    return pass(in, out, counting_ == CutProxy::Counting::kToTarget);
  }
  bool from_server(std::span<const std::byte> in, std::vector<std::byte>& out) override {
    return pass(in, out, counting_ == CutProxy::Counting::kFromTarget);
  }

 private:
  bool pass(std::span<const std::byte> in, std::vector<std::byte>& out, bool counted) {
    if (counted && cut_at_ > 0 && passed_ + in.size() > cut_at_) {
      ++*cuts_;
      return false;
    }
    if (counted) passed_ += in.size();
    out.insert(out.end(), in.begin(), in.end());
    return true;
  }

  const uint64_t cut_at_;
  const CutProxy::Counting counting_;
  uint64_t passed_ = 0;
  std::shared_ptr<std::atomic<int>> cuts_;
};

}  // namespace

CutProxy::CutProxy(uint16_t target, std::function<uint64_t()> next_cut, Counting counting)
    : next_cut_(std::move(next_cut)),
      counting_(counting),
      forwarder_(std::make_unique<Forwarder>(target, [this] {
        return std::make_unique<CutAfter>(next_cut_ ? next_cut_() : 0, counting_, cuts_);
      })) {}

}  // namespace dtrain::testing
