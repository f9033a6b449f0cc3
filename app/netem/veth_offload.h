// Turns off a link's segmentation/checksum offloads, so that frames read from it with an AF_PACKET socket are
// complete wire frames (no 64 KiB GSO super-frames, no half-done checksums) that can be re-sent as they are.
#pragma once
#include <string>

namespace dd::netem {

// Disables TSO, GSO, GRO, scatter-gather and tx checksumming on `dev` inside the network namespace at
// `netns_path` (empty = the launcher's own namespace) with the ethtool ioctl (no ethtool binary needed), then
// checks that segmentation and tx checksumming are really off. Throws std::runtime_error naming what failed.
void disable_offloads(const std::string& netns_path, const std::string& dev);

}  // namespace dd::netem
