#include "backends/gloo/gloo_sockets.h"

#include <dirent.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <set>

namespace dd::gloo_sockets {

std::vector<Socket> of_process() {
  std::vector<Socket> out;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return out;
  const int own = dirfd(d);
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == own) continue;
    struct stat st;
    if (fstat(int(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    out.push_back({int(fd), st.st_ino});
  }
  closedir(d);
  return out;
}

std::vector<Socket> opened(const std::vector<Socket>& before, const std::vector<Socket>& after) {
  std::set<ino_t> old;
  for (const auto& s : before) old.insert(s.inode);
  std::vector<Socket> out;
  for (const auto& s : after)
    if (!old.count(s.inode)) out.push_back(s);
  return out;
}

void shut_down(const std::vector<Socket>& sockets) {
  for (const auto& s : sockets) {
    struct stat st;
    if (fstat(s.fd, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == s.inode) ::shutdown(s.fd, SHUT_RDWR);
  }
}

}  // namespace dd::gloo_sockets
