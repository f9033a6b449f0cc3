// The directory key store (backends/key_store.h).
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/key_store.h"
#include "base/error.h"

namespace dd {
namespace {

class FileKeyStore final : public KeyStore {
 public:
  explicit FileKeyStore(std::string dir) : dir_(std::move(dir)) {}

  void set(const std::string& key, const std::string& value) override {
    const std::string tmp = write_temp(key, value);
    if (std::rename(tmp.c_str(), path(key).c_str()) != 0) {
      const int e = errno;
      ::unlink(tmp.c_str());
      throw PeerLost("rendezvous store: cannot write " + path(key) + ": " + std::strerror(e));
    }
  }

  bool get(const std::string& key, std::string* value) override {
    std::ifstream f(path(key), std::ios::binary);
    if (!f) return false;
    std::ostringstream s;
    s << f.rdbuf();
    *value = s.str();
    return true;
  }

  std::string claim(const std::string& key, const std::string& value) override {
    const std::string tmp = write_temp(key, value);
    const int rc = ::link(tmp.c_str(), path(key).c_str());
    const int e = errno;
    ::unlink(tmp.c_str());
    if (rc != 0 && e != EEXIST) throw PeerLost("rendezvous store: cannot write " + path(key) + ": " + std::strerror(e));
    std::string v;
    if (!get(key, &v)) throw PeerLost("rendezvous store: " + path(key) + " vanished");
    return v;
  }

  void remove(const std::string& key) override { ::unlink(path(key).c_str()); }

 private:
  // Keys are '/'-separated names; one flat directory holds them.
  std::string path(const std::string& key) const {
    std::string name = key;
    for (char& c : name)
      if (c == '/') c = '.';
    return dir_ + "/" + name;
  }
  std::string write_temp(const std::string& key, const std::string& value) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    static std::atomic<unsigned> serial{0};  // unique per process and call: ranks may be threads (tests)
    const std::string tmp = path(key) + ".tmp" + std::to_string(::getpid()) + "." + std::to_string(serial++);
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      f << value;
      f.flush();
      if (!f) throw PeerLost("rendezvous store: cannot write " + tmp);
    }
    return tmp;
  }
  std::string dir_;
};

}  // namespace

std::unique_ptr<KeyStore> make_file_key_store(const std::string& dir) { return std::make_unique<FileKeyStore>(dir); }

}  // namespace dd
