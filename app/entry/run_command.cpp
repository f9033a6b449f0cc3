// Exceptions to exit codes (docs/cli.md), one line on stderr each.
#include "app/entry/run_command.h"

#include <cstdio>
#include <exception>

#include <boost/program_options/errors.hpp>

#include "base/error.h"

namespace dd::app {

std::string printable(const char* msg) {
  std::string out;
  for (const char* p = msg; *p; ++p) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out;
}

namespace {
int report(const std::string& name, const char* verb, const char* what, int code) {
  std::fprintf(stderr, "dreamddp %s: %s: %s\n", printable(name.c_str()).c_str(), verb, printable(what).c_str());
  return code;
}
}  // namespace

int run_command(const std::string& name, Command fn, int argc, char** argv) {
  try {
    return fn(argc, argv);
  } catch (const UsageError& e) {
    return report(name, "error", e.what(), 2);
  } catch (const boost::program_options::error& e) {
    return report(name, "error", e.what(), 2);
  } catch (const PeerLost& e) {
    return report(name, "error", e.what(), 3);
  } catch (const AnomalyStop& e) {
    return report(name, "stopped", e.what(), 4);
  } catch (const std::exception& e) {
    return report(name, "error", e.what(), 1);
  }
}

}  // namespace dd::app
