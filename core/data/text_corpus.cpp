// Byte-level text corpus: plain files of a directory concatenated in name order, split 90/10, cut into windows.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "core/data/dataset.h"

namespace dd::data {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The fortunes package ships, next to each plain file, a binary index (.dat) and a .u8 symlink to the same
// text; taking regular non-hidden files other than .dat reads every text exactly once.
std::vector<std::string> corpus_files(const std::string& dir) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (ec || !fs::exists(st))
    throw dd::UsageError("missing text corpus " + dir +
                         " (install Debian package fortunes, or point --data-dir at a folder of text files)");
  if (fs::is_regular_file(st)) return {dir};
  std::vector<std::string> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.' || ends_with(name, ".dat")) continue;
    if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
    files.push_back(it->path().string());
  }
  if (ec) throw dd::UsageError("cannot list text corpus " + dir + ": " + ec.message());
  if (files.empty()) throw dd::UsageError("text corpus " + dir + " holds no plain text files");
  std::sort(files.begin(), files.end());
  return files;
}

void append_file(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw dd::UsageError("cannot read text corpus file " + path + ": " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const std::streamoff len = in.tellg();
  in.seekg(0, std::ios::beg);
  const size_t old = out->size();
  out->resize(old + size_t(len));
  if (len > 0 && !in.read(&(*out)[old], len))
    throw dd::UsageError("cannot read text corpus file " + path + ": short read");
}

}  // namespace

Dataset load_text(const std::string& dir, bool train, int64_t T) {
  if (T < 1) throw dd::UsageError("text context length must be at least 1, got " + std::to_string(T));
  std::string corpus;
  for (const std::string& f : corpus_files(dir)) append_file(f, &corpus);
  const uint64_t total = corpus.size();
  const uint64_t split = total * 9 / 10;  // the last 10% (rounded up) is the test split
  const uint64_t begin = train ? 0 : split;
  const uint64_t len = (train ? split : total) - begin;
  const int64_t window = T + 1;
  Dataset d;
  d.name = "text";
  d.tokens = true;
  d.x_shape = {T};
  d.target_len = T;
  d.num_classes = 256;
  d.size = int64_t(len / uint64_t(window));
  if (d.size == 0)
    throw dd::UsageError("text corpus " + dir + ": the " + (train ? "training" : "test") + " split has " +
                         std::to_string(len) + " bytes, fewer than one window of " + std::to_string(window));
  d.xi.resize(size_t(d.size * T));
  d.y.resize(size_t(d.size * T));
  const auto* bytes = reinterpret_cast<const unsigned char*>(corpus.data()) + begin;
  for (int64_t s = 0; s < d.size; ++s) {
    const unsigned char* w = bytes + s * window;
    int32_t* x = d.xi.data() + s * T;
    int32_t* y = d.y.data() + s * T;
    for (int64_t t = 0; t < T; ++t) {
      x[t] = w[t];
      y[t] = w[t + 1];
    }
  }
  return d;
}

}  // namespace dd::data
