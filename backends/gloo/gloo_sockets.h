// The TCP sockets of one Gloo context, found from outside Gloo, so that they can be shut down on a liveness verdict
// (Backend::abort_peer). Gloo closes a pair only from inside its own I/O, which does not wake an operation waiting on
// a peer that is silent but connected; a shutdown(2) of the socket makes Gloo's event loop see the connection end,
// and Gloo then fails every pending operation on it at once, as when the peer's process dies.
#pragma once
#include <sys/types.h>

#include <vector>

namespace dd::gloo_sockets {

struct Socket {
  int fd = -1;
  ino_t inode = 0;
};

// The sockets this process holds now (from /proc/self/fd).
std::vector<Socket> of_process();
// Those in `after` that were not in `before` (by inode): what a context's connect opened.
std::vector<Socket> opened(const std::vector<Socket>& before, const std::vector<Socket>& after);
// shutdown(SHUT_RDWR) of each socket that is still the same one (its descriptor may have been closed and reused
// since: its inode tells). Any thread.
void shut_down(const std::vector<Socket>& sockets);

}  // namespace dd::gloo_sockets
