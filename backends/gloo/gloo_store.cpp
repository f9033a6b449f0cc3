// Rendezvous URL -> Gloo store (FileStore, RedisStore, HashStore for a single process), and the backend of a URL.
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>

#include <gloo/config.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/hash_store.h>
#if GLOO_USE_REDIS
#define HIREDIS_NESTED_INCLUDE 1  // Debian installs hiredis.h under hiredis/
#include <gloo/rendezvous/redis_store.h>
#endif

#include "backends/gloo/gloo_backend.h"
#include "base/error.h"

namespace dd {
namespace {

// A plain TCP probe before handing the address to hiredis, whose failed-connect path leaks inside Gloo.
bool tcp_reachable(const std::string& host, int port) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return false;
  bool ok = false;
  for (auto* p = res; p && !ok; p = p->ai_next) {
    int fd = socket(p->ai_family, p->ai_socktype, p->ai_protocol);
    if (fd < 0) continue;
    ok = connect(fd, p->ai_addr, p->ai_addrlen) == 0;
    close(fd);
  }
  freeaddrinfo(res);
  return ok;
}

// "redis://host:port/JOB" -> ("host:port", "JOB"); no JOB -> ("host:port", "").
std::pair<std::string, std::string> split_redis_job(const std::string& url) {
  std::string rest = url.substr(8);
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  auto slash = rest.find('/');
  if (slash == std::string::npos) return {rest, ""};
  return {rest.substr(0, slash), rest.substr(slash + 1)};
}

}  // namespace

std::string rendezvous_job(const std::string& url) {
  if (url.rfind("redis://", 0) != 0) return "";
  std::string job = split_redis_job(url).second;
  for (char c : job)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
      throw UsageError("rendezvous '" + url + "': the job name after host:port/ may only hold letters, digits, "
                       "'-', '_' and '.'");
  return job;
}

std::pair<std::string, int> redis_address(const std::string& url) {
  const std::string hint = "; expected redis://host:port[/JOB]";
  rendezvous_job(url);  // validates the job part
  std::string hp = split_redis_job(url).first;
  int port = 6379;
  std::string host = hp;
  auto colon = hp.rfind(':');
  if (colon != std::string::npos) {
    host = hp.substr(0, colon);
    try {
      size_t used = 0;
      port = std::stoi(hp.substr(colon + 1), &used);
      if (used != hp.size() - colon - 1 || port <= 0 || port > 65535) throw std::invalid_argument("port");
    } catch (const std::exception&) {
      throw UsageError("rendezvous '" + url + "': bad port" + hint);
    }
  }
  if (host.empty()) throw UsageError("rendezvous '" + url + "': missing host" + hint);
  if (!tcp_reachable(host, port))
    throw UsageError("cannot connect to redis rendezvous " + host + ":" + std::to_string(port) +
                     " (is redis-server running and reachable?)");
  return {host, port};
}

std::shared_ptr<gloo::rendezvous::Store> make_gloo_store(const std::string& url, int world) {
  const std::string hint =
      "; pass --rendezvous file:///a/shared/dir or redis://host:port[/JOB] (or set DREAMDDP_RENDEZVOUS)";
  if (url.empty()) {
    if (world == 1) return std::make_shared<gloo::rendezvous::HashStore>();
    throw UsageError("gloo with " + std::to_string(world) + " ranks needs a rendezvous" + hint);
  }
  if (url.rfind("file://", 0) == 0) {
    std::string path = url.substr(7);
    if (path.empty() || path[0] != '/')
      throw UsageError("rendezvous '" + url + "' must be file:// followed by an absolute path" + hint);
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec || !std::filesystem::is_directory(path))
      throw UsageError("cannot create rendezvous directory " + path + ": " + ec.message());
    return std::make_shared<gloo::rendezvous::FileStore>(path);
  }
  if (url.rfind("redis://", 0) == 0) {
#if GLOO_USE_REDIS
    const auto [host, port] = redis_address(url);
    try {
      return std::make_shared<gloo::rendezvous::RedisStore>(host, port);
    } catch (const std::exception& e) {
      throw UsageError("cannot connect to redis rendezvous " + host + ":" + std::to_string(port) +
                       " (is redis-server running and reachable?): " + e.what());
    }
#else
    throw UsageError("rendezvous '" + url + "': this Gloo was built without Redis support; use file:///dir");
#endif
  }
  throw UsageError("unknown rendezvous '" + url + "'" + hint);
}

std::unique_ptr<Backend> make_gloo_backend(const BackendOptions& opts) {
  BackendOptions o = opts;
  const std::string job = rendezvous_job(opts.rendezvous);
  if (!job.empty()) o.prefix = job + "/" + opts.prefix;
  return make_gloo_backend(o.rank, o.world, make_gloo_store(o.rendezvous, o.world), o);
}

}  // namespace dd
