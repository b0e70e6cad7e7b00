// The server: its listening socket (so that a taken port is an error naming it), libmicrohttpd's
// daemon over it, and the callback that turns a request into the handler's answer.
#include "metrics/http_server.h"

#include <fmt/format.h>
#include <microhttpd.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <exception>

#include "base/error.h"
#include "base/log.h"

namespace dtrain {
namespace {

// Binds and listens on host:port; returns the socket. Throws IoError saying why it cannot.
int listen_on(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int e = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); e != 0)
    throw IoError(fmt::format("cannot resolve {}: {}", host, ::gai_strerror(e)));
  std::string why = "no address";
  int fd = -1;
  for (const addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    // A restarted task takes its port back while the last one's connections are in TIME_WAIT.
    const int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) break;
    why = std::strerror(errno);
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  if (fd < 0) throw IoError(why);
  return fd;
}

uint16_t bound_port(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return 0;
  if (address.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port);
}

// The library's own notes (a client that sent what is not HTTP, a connection it closed) are about
// clients, not about the task: kept for a debug log.
void log_library_note(void* /*unused*/, const char* format, va_list arguments) {
  if (!spdlog::should_log(spdlog::level::debug)) return;
  char line[512];
  std::vsnprintf(line, sizeof line, format, arguments);
  spdlog::debug("metrics endpoint: {}", line);
}

// Percent-decodes a path (and a query's values), but for an encoded NUL: the handler reads a C
// string, which a decoded NUL would cut short ("/%00" read as "/"), so such a text is left as it
// came, and a path that has one matches nothing.
size_t unescape(void* /*unused*/, MHD_Connection* /*unused*/, char* text) {
  if (std::strstr(text, "%00") != nullptr) return std::strlen(text);
  return MHD_http_unescape(text);
}

bool has_body(MHD_Connection* connection) {
  return MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH) !=
             nullptr ||
         MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
                                     MHD_HTTP_HEADER_TRANSFER_ENCODING) != nullptr;
}

MHD_Result respond(MHD_Connection* connection, const HttpResponse& answer) {
  MHD_Response* response = MHD_create_response_from_buffer(
      answer.body.size(), const_cast<char*>(answer.body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;  // out of memory: the library closes the connection
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, answer.content_type.c_str());
  // Every answer is of this moment, and is what its type says.
  MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  MHD_add_response_header(response, "X-Content-Type-Options", "nosniff");
  // The live page (metrics/page_assets.h) loads its scripts and styles from here and nothing
  // else: no inline script, no other origin, no frame around it.
  MHD_add_response_header(response, "Content-Security-Policy",
                          "default-src 'self'; frame-ancestors 'none'");
  for (const auto& [name, value] : answer.headers)
    MHD_add_response_header(response, name.c_str(), value.c_str());
  const MHD_Result queued =
      MHD_queue_response(connection, static_cast<unsigned>(answer.status), response);
  MHD_destroy_response(response);
  return queued;
}

// The library calls this once when a request's headers are in, again for each piece of its
// body, and once more at its end. Nothing served takes a body: a request that has one, or a
// method other than GET and HEAD, is answered at the first call, which makes the library close
// the connection after the answer rather than read what follows. A GET or HEAD is answered at the
// end of the request, which keeps the connection open for the next one (keep-alive, pipelining).
MHD_Result on_request(void* server, MHD_Connection* connection, const char* url, const char* method,
                      const char* /*version*/, const char* /*upload_data*/,
                      size_t* upload_data_size, void** req_cls) {
  static int seen = 0;  // its address marks a request whose first call has come
  const auto& self = *static_cast<const HttpServer*>(server);
  const std::string_view verb = method;
  const bool served = verb == MHD_HTTP_METHOD_GET || verb == MHD_HTTP_METHOD_HEAD;
  if (*req_cls == nullptr) {
    *req_cls = &seen;
    if (served && !has_body(connection)) return MHD_YES;
    return respond(connection, self.answer(verb, url));
  }
  if (*upload_data_size > 0) {  // after an early answer, the library drops the rest
    *upload_data_size = 0;
    return MHD_YES;
  }
  return respond(connection, self.answer(verb, url));
}

}  // namespace

HttpServer::HttpServer(const HttpServerOptions& options, Handler handler)
    : handler_(std::move(handler)) {
  const std::string address = fmt::format("{}:{}", options.host, options.port);
  int fd = -1;
  try {
    fd = listen_on(options.host, options.port);
  } catch (const IoError& error) {
    throw IoError(fmt::format("{}: {}", address, error.what()));
  }
  port_ = bound_port(fd);
  // The daemon owns the socket from here: MHD_stop_daemon closes it.
  daemon_ = MHD_start_daemon(
      MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, nullptr, nullptr, &on_request, this,
      MHD_OPTION_EXTERNAL_LOGGER, &log_library_note, nullptr, MHD_OPTION_UNESCAPE_CALLBACK,
      &unescape, nullptr, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_THREAD_POOL_SIZE,
      static_cast<unsigned>(options.threads), MHD_OPTION_CONNECTION_TIMEOUT,
      static_cast<unsigned>(options.idle_timeout_seconds), MHD_OPTION_CONNECTION_LIMIT,
      static_cast<unsigned>(options.max_connections), MHD_OPTION_PER_IP_CONNECTION_LIMIT,
      static_cast<unsigned>(options.max_connections_per_address), MHD_OPTION_END);
  if (daemon_ == nullptr) {
    ::close(fd);
    throw IoError(fmt::format("{}: libmicrohttpd did not start", address));
  }
}

HttpServer::~HttpServer() { MHD_stop_daemon(daemon_); }

HttpResponse HttpServer::answer(std::string_view method, std::string_view path) const {
  if (method != MHD_HTTP_METHOD_GET && method != MHD_HTTP_METHOD_HEAD) {
    return {.status = MHD_HTTP_METHOD_NOT_ALLOWED,
            .body = "only GET and HEAD are served here\n",
            .headers = {{MHD_HTTP_HEADER_ALLOW, "GET, HEAD"}}};
  }
  try {
    return handler_(path);
  } catch (const std::exception& error) {
    return {.status = MHD_HTTP_INTERNAL_SERVER_ERROR,
            .body = fmt::format("the page could not be made: {}\n", error.what())};
  }
}

}  // namespace dtrain
