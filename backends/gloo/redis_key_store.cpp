// The elastic key store on a Redis server (backends/key_store.h), through hiredis, which Gloo's Redis support
// brings: SET, SET NX (claim), GET and DEL under the job's key space.
#include <gloo/config.h>
#if GLOO_USE_REDIS
#include <hiredis/hiredis.h>
#endif

#include <mutex>

#include "backends/gloo/gloo_backend.h"
#include "base/error.h"

namespace dd {

#if GLOO_USE_REDIS
namespace {

class RedisKeyStore final : public KeyStore {
 public:
  RedisKeyStore(const std::string& host, int port, std::string space) : space_(std::move(space)) {
    const timeval connect_timeout{5, 0};
    c_ = redisConnectWithTimeout(host.c_str(), port, connect_timeout);
    if (!c_ || c_->err) {
      const std::string why = c_ ? c_->errstr : "out of memory";
      if (c_) redisFree(c_);
      throw UsageError("cannot connect to redis rendezvous " + host + ":" + std::to_string(port) + ": " + why);
    }
    const timeval op_timeout{10, 0};  // a server that stops answering fails the op, never hangs it
    redisSetTimeout(c_, op_timeout);
  }
  ~RedisKeyStore() override { redisFree(c_); }

  void set(const std::string& key, const std::string& value) override {
    reply(command("SET %b %b", key, &value), "SET", key);
  }
  bool get(const std::string& key, std::string* value) override {
    redisReply* r = reply(command("GET %b", key, nullptr), "GET", key);
    const bool found = r->type == REDIS_REPLY_STRING;
    if (found) value->assign(r->str, r->len);
    freeReplyObject(r);
    return found;
  }
  std::string claim(const std::string& key, const std::string& value) override {
    freeReplyObject(reply(command("SET %b %b NX", key, &value), "SET NX", key));
    std::string v;
    if (!get(key, &v)) throw PeerLost("rendezvous store: redis key " + space_ + key + " vanished");
    return v;
  }
  void remove(const std::string& key) override { freeReplyObject(reply(command("DEL %b", key, nullptr), "DEL", key)); }

 private:
  redisReply* command(const char* fmt, const std::string& key, const std::string* value) {
    std::lock_guard<std::mutex> lk(mu_);
    const std::string k = space_ + key;
    void* r = value ? redisCommand(c_, fmt, k.data(), k.size(), value->data(), value->size())
                    : redisCommand(c_, fmt, k.data(), k.size());
    return static_cast<redisReply*>(r);
  }
  // The reply, or PeerLost naming the operation (the connection is then unusable: hiredis sets c_->err).
  redisReply* reply(redisReply* r, const char* op, const std::string& key) {
    if (!r) throw PeerLost(std::string("rendezvous store: redis ") + op + " " + space_ + key + ": " + c_->errstr);
    if (r->type == REDIS_REPLY_ERROR) {
      const std::string e(r->str, r->len);
      freeReplyObject(r);
      throw PeerLost(std::string("rendezvous store: redis ") + op + " " + space_ + key + ": " + e);
    }
    return r;
  }

  redisContext* c_ = nullptr;
  std::mutex mu_;
  const std::string space_;
};

}  // namespace

std::unique_ptr<KeyStore> make_redis_key_store(const std::string& url, const std::string& name) {
  const auto [host, port] = redis_address(url);
  const std::string job = rendezvous_job(url);
  return std::make_unique<RedisKeyStore>(host, port, (job.empty() ? "" : job + "/") + name + "/");
}
#else
std::unique_ptr<KeyStore> make_redis_key_store(const std::string& url, const std::string&) {
  throw UsageError("rendezvous '" + url + "': this Gloo was built without Redis support; use file:///dir");
}
#endif

}  // namespace dd
