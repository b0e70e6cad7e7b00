// The HTTP server under a task's --metrics_port (metrics/metrics_endpoint.h), on GNU libmicrohttpd
// (Debian libmicrohttpd-dev). It answers GET and HEAD of a path with what the handler returns and
// every other method with 405; the library itself answers what is not HTTP (400), a request line
// or headers beyond a connection's memory (414, 431), and closes a connection idle for longer than
// the timeout. Its threads are the library's, started with the process's default stack, since
// glibc carves each thread's static TLS (OpenBLAS alone has 60 KiB of it) out of that stack: the
// civetweb server this replaces was built with 100 KiB stacks, and any answer but a scrape's ran
// off the end of the 40 KiB that left. Its connections are polled (epoll), not a thread's each:
// a client that sends half a request holds a descriptor, never a thread.
// Every answer says Cache-Control: no-store, X-Content-Type-Options: nosniff and
// Content-Security-Policy: default-src 'self' (the live page loads nothing from elsewhere).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct MHD_Daemon;

namespace dtrain {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers = {};  // besides Content-Type
};

struct HttpServerOptions {
  std::string host = "127.0.0.1";  // an address or a name of this host
  int port = 0;                    // 0: a free one (HttpServer::port says which)
  // Each polls its share of the connections; a handler runs on the thread of its connection.
  int threads = 2;
  // A connection that sends nothing for this long is closed: what a half-sent request, or an
  // idle keep-alive, costs the server at most.
  int idle_timeout_seconds = 10;
  // Connections at once, and from one address: a flood from one source cannot keep another
  // source's scrapes out.
  int max_connections = 128;
  int max_connections_per_address = 16;
};

// Thread-safety: the handler is called from the server's threads, several at once.
class HttpServer {
 public:
  // The path of a GET or HEAD request (percent-decoded, without its query) to its answer (HEAD:
  // its headers alone). May throw; the client then gets a 500 naming the exception.
  using Handler = std::function<HttpResponse(std::string_view path)>;

  // Listens, and serves until destroyed. Throws IoError "host:port: why" when it cannot.
  HttpServer(const HttpServerOptions& options, Handler handler);
  // Stops listening, closes every connection, and joins the server's threads.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const { return port_; }

  // The answer to `method` `path`: the handler's for GET and HEAD, 405 for any other method.
  // Public for the server's callback, which is a plain function.
  HttpResponse answer(std::string_view method, std::string_view path) const;

 private:
  Handler handler_;
  MHD_Daemon* daemon_ = nullptr;
  uint16_t port_ = 0;
};

}  // namespace dtrain
