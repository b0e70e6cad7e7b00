// The name is resolved and each address compared with this host's interfaces (getifaddrs); any
// 127.0.0.0/8 address is this host's, as Linux routes the whole block to the loopback interface.
// IPv4 first: workers given "localhost" try 127.0.0.1 before ::1.
#include "cluster/bind_address.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cstring>
#include <memory>
#include <vector>

namespace dtrain {
namespace {

std::string numeric(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = {};
  const void* raw =
      address->sa_family == AF_INET
          ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(address)->sin_addr)
          : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr);
  return inet_ntop(address->sa_family, raw, text, sizeof text) ? text : "";
}

// The addresses `host` resolves to, IPv4 first; empty if it does not resolve.
std::vector<std::string> resolve(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return {};
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owner(found, &::freeaddrinfo);
  std::vector<std::string> v4, v6;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) v4.push_back(numeric(a->ai_addr));
    if (a->ai_family == AF_INET6) v6.push_back(numeric(a->ai_addr));
  }
  v4.insert(v4.end(), v6.begin(), v6.end());
  return v4;
}

std::vector<std::string> interface_addresses() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return {};
  std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> owner(list, &::freeifaddrs);
  std::vector<std::string> addresses;
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    if (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6)
      addresses.push_back(numeric(i->ifa_addr));
  }
  return addresses;
}

bool is_this_host(const std::string& address, const std::vector<std::string>& interfaces) {
  if (address.starts_with("127.")) return true;
  for (const std::string& mine : interfaces) {
    if (mine == address) return true;
  }
  return false;
}

}  // namespace

BindAddress bind_address_for(const HostPort& own, const std::string& bind_flag) {
  if (!bind_flag.empty()) return {bind_flag, "--bind"};
  const std::vector<std::string> interfaces = interface_addresses();
  for (const std::string& address : resolve(own.host)) {
    if (is_this_host(address, interfaces)) {
      return {address, fmt::format("{} is this host's address in the cluster spec", own.host)};
    }
  }
  return {"0.0.0.0",
          fmt::format("{} is not an address of this host; --bind chooses one", own.host)};
}

}  // namespace dtrain
