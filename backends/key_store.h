// The few key-value operations elastic training agrees through (docs/elastic.md), on the job's rendezvous: a
// directory (file://) or a Redis server (redis://). Not Gloo's store, which can neither overwrite, nor create a
// key only when it is absent, nor delete. Every operation that cannot reach the store throws dd::PeerLost.
#pragma once
#include <memory>
#include <string>

namespace dd {

class KeyStore {
 public:
  virtual ~KeyStore() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;  // creates or overwrites
  virtual bool get(const std::string& key, std::string* value) = 0;        // false when absent
  // Atomic first-writer-wins: stores `value` under `key` unless the key exists; returns the value stored there.
  virtual std::string claim(const std::string& key, const std::string& value) = 0;
  virtual void remove(const std::string& key) = 0;  // absent: nothing to do
};

// One file per key in `dir` ('/' in keys become '.'): written to a temporary name and renamed (set), or linked into
// place (claim: link() fails when the name exists).
std::unique_ptr<KeyStore> make_file_key_store(const std::string& dir);

// The store of a rendezvous URL: file:///path -> the directory <path>/<name>; redis://host:port[/JOB] -> keys
// "<JOB>/<name>/..." on that server (SET, SET NX, GET, DEL). Throws dd::UsageError for another scheme, a server
// that cannot be reached, or a build without Redis support.
std::unique_ptr<KeyStore> make_key_store(const std::string& rendezvous_url, const std::string& name);

}  // namespace dd
