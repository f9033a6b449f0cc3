// Command-line parsing of `dreamddp launch` and of the --netem link spec.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/error.h"
#include "app/launch/launch.h"

namespace dd::launch {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Splits "12.5mbit" into 12.5 and "mbit"; false when there is no leading number.
bool split_number(const std::string& s, double* value, std::string* unit) {
  const char* begin = s.c_str();
  char* end = nullptr;
  *value = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(*value)) return false;
  *unit = lower(std::string(end));
  return true;
}

double parse_rate(const std::string& s) {
  double v = 0;
  std::string unit;
  const std::string hint = " (expected a number with a unit in bits per second: bit, kbit, mbit, gbit, tbit, e.g. 1gbit)";
  if (!split_number(s, &v, &unit)) throw UsageError("--netem: bad rate '" + s + "'" + hint);
  double mult = 0;
  if (unit == "bit") mult = 1;
  else if (unit == "kbit") mult = 1e3;
  else if (unit == "mbit") mult = 1e6;
  else if (unit == "gbit") mult = 1e9;
  else if (unit == "tbit") mult = 1e12;
  else if (unit == "bps" || unit == "kbps" || unit == "mbps" || unit == "gbps")
    throw UsageError("--netem: rate unit '" + unit + "' is ambiguous (tc reads it as bytes/s); write bits, e.g. 1gbit");
  else throw UsageError("--netem: bad rate unit in '" + s + "'" + hint);
  const double bps = v * mult;
  if (bps < 8e3 || bps > 4e11) throw UsageError("--netem: rate '" + s + "' out of range (8kbit .. 400gbit)");
  return bps;
}

double parse_delay(const std::string& s) {
  double v = 0;
  std::string unit;
  if (!split_number(s, &v, &unit) || v < 0)
    throw UsageError("--netem: bad delay '" + s + "' (expected e.g. delay=500us, delay=2ms, delay=0.1s)");
  double mult = 0;
  if (unit == "us") mult = 1e-6;
  else if (unit == "ms") mult = 1e-3;
  else if (unit == "s") mult = 1;
  else throw UsageError("--netem: delay '" + s + "' needs a unit: us, ms or s");
  if (v * mult > 10) throw UsageError("--netem: delay '" + s + "' is over 10 s");
  return v * mult;
}

double parse_loss(const std::string& s) {
  std::string t = s;
  if (!t.empty() && t.back() == '%') t.pop_back();
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (t.empty() || *end != '\0' || !(v >= 0 && v <= 100))
    throw UsageError("--netem: bad loss '" + s + "' (expected a percentage 0..100, e.g. loss=0.1 or loss=0.1%)");
  return v;
}

int parse_int(const std::string& opt, const std::string& s, int lo, int hi) {
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v < lo || v > hi)
    throw UsageError(opt + ": bad value '" + s + "' (expected an integer in " + std::to_string(lo) + ".." +
                     std::to_string(hi) + ")");
  return static_cast<int>(v);
}

double parse_seconds(const std::string& opt, const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(v >= 0 && v <= 3600))
    throw UsageError(opt + ": bad value '" + s + "' (expected seconds, 0..3600)");
  return v;
}

}  // namespace

NetemSpec parse_netem(const std::string& spec) {
  NetemSpec out;
  out.text = spec;
  size_t pos = 0;
  bool first = true;
  bool have_delay = false, have_loss = false;
  while (pos <= spec.size()) {
    const size_t comma = spec.find(',', pos);
    const std::string part = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (first) {
      if (part.find('=') != std::string::npos)
        throw UsageError("--netem: the spec must start with the rate, e.g. --netem 1gbit,delay=1ms (got '" + spec + "')");
      out.rate_bps = parse_rate(part);
      first = false;
    } else {
      const size_t eq = part.find('=');
      const std::string key = lower(part.substr(0, eq));
      const std::string val = eq == std::string::npos ? "" : part.substr(eq + 1);
      if (key == "delay" && !have_delay) {
        out.delay_s = parse_delay(val);
        have_delay = true;
      } else if (key == "loss" && !have_loss) {
        out.loss_pct = parse_loss(val);
        have_loss = true;
      } else {
        throw UsageError("--netem: unknown or repeated field '" + part + "' in '" + spec +
                         "' (expected RATE[,delay=D][,loss=P])");
      }
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

void parse_nodes(const std::string& spec, int* nodes, int* ranks_per_node) {
  const std::string hint = " (expected AxB: A nodes of B ranks each, e.g. --nodes 2x2 or --nodes 2 x 2)";
  std::string t;  // "2 x 2" given as one quoted argument is fine too
  for (char c : lower(spec))
    if (c != ' ') t.push_back(c);
  const size_t x = t.find('x');
  const bool digits_only = t.find_first_not_of("0123456789x") == std::string::npos;
  if (!digits_only || x == std::string::npos || x == 0 || x + 1 == t.size() || t.find('x', x + 1) != std::string::npos)
    throw UsageError("--nodes: bad value '" + spec + "'" + hint);
  auto count = [&](const std::string& part, const char* what) {
    const long v = part.size() > 4 ? 99999 : std::strtol(part.c_str(), nullptr, 10);
    if (v < 1 || v > 4096)
      throw UsageError("--nodes: " + std::string(what) + " in '" + spec + "' must be 1..4096" + hint);
    return static_cast<int>(v);
  };
  *nodes = count(t.substr(0, x), "the number of nodes");
  *ranks_per_node = count(t.substr(x + 1), "the ranks per node");
  if (static_cast<long>(*nodes) * *ranks_per_node > 4096)
    throw UsageError("--nodes " + spec + ": at most 4096 ranks in all");
}

const char* usage() {
  return "usage: dreamddp launch (-n N | --nodes AxB) [--netem RATE[,delay=D][,loss=P]] [--rendezvous URL]\n"
         "                        [--iface-prefix P] [--grace SECONDS] [--master-port PORT] [--max-restarts R]\n"
         "                        -- COMMAND ARGS...\n"
         "\n"
         "Starts N local ranks of COMMAND. COMMAND is a dreamddp sub-command (train, bench, profile, schedule),\n"
         "run with this binary, or any other program (found on PATH, or a path containing '/'), e.g.\n"
         "/usr/bin/python3 peers/torch_ddp.py. Each rank gets RANK, WORLD_SIZE, LOCAL_RANK,\n"
         "LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and DREAMDDP_RENDEZVOUS (default: a fresh file:// directory,\n"
         "removed at the end). SIGINT/SIGTERM are forwarded; a rank that fails takes the job down and the\n"
         "launcher exits with its status (128+signal when it was killed by a signal).\n"
         "\n"
         "  -n, --nprocs N          number of ranks (also --nproc-per-node)\n"
         "  --nodes AxB             A emulated nodes of B consecutive ranks (also '--nodes A x B'; -n, if given,\n"
         "                          must be A*B). Rank r is on node r/B: DREAMDDP_NODE, LOCAL_RANK and\n"
         "                          LOCAL_WORLD_SIZE say so and its host name is ddnode<node> (root), so\n"
         "                          --policy hier:nodes=auto groups ranks by node. With --netem the B ranks of a\n"
         "                          node share one namespace (local traffic unshaped), nodes talk over RATE\n"
         "                          links. Without --netem only the environment and host names change\n"
         "  --netem RATE[,delay=D][,loss=P]\n"
         "                          emulated cluster (root only): one network namespace per node (per rank\n"
         "                          without --nodes) on a private bridge, every link shaped to RATE (e.g.\n"
         "                          100mbit, 1gbit, 10gbit) in both directions; D is the added one-way\n"
         "                          latency between two nodes, P the loss %\n"
         "  --rendezvous URL        DREAMDDP_RENDEZVOUS given to the ranks (file:///dir or redis://host:port)\n"
         "  --iface-prefix P        prefix of the bridge, veth and namespace names created (default dd)\n"
         "  --grace SECONDS         wait between SIGTERM and SIGKILL when stopping ranks (default 10)\n"
         "  --master-port PORT      MASTER_PORT for the ranks (default: a free port)\n"
         "  --max-restarts R        COMMAND is `train ... --out DIR --checkpoint-every K`: when a rank dies or the\n"
         "                          job exits 3, end the rest and restart all ranks from the newest checkpoint\n"
         "                          that every rank holds intact (--resume DIR), up to R times; then exit 3\n"
         "                          naming the rank and the cause (docs/elastic.md). Default 0. With train's\n"
         "                          --on-peer-loss shrink: start a lost rank again alone, up to R times in all;\n"
         "                          it rejoins the live world (no checkpoint needed)\n";
}

namespace {

// Accepts "--opt=value" and "-nN" (as well as "--opt value" and "-n N"): moves an inline value from `arg` into
// `value`; false when there is none.
bool split_inline_value(std::string& arg, std::string& value) {
  if (arg.rfind("--", 0) == 0) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) return false;
    value = arg.substr(eq + 1);
    arg = arg.substr(0, eq);
    return true;
  }
  if (arg.rfind("-n", 0) == 0 && arg.size() > 2) {
    value = arg.substr(2);
    arg = "-n";
    return true;
  }
  return false;
}

// --nodes: "2x2", or the spec spread over arguments: "2 x 2", "2 x2", "2x 2" (`i` moves past what it joins).
std::string join_nodes_spec(std::string spec, bool inline_value, int argc, char** argv, int& i) {
  const auto starts_with_x = [](const char* a) { return a[0] == 'x' || a[0] == 'X'; };
  if (!inline_value && i + 1 < argc && !spec.empty() &&
      spec.find_first_not_of("0123456789") == std::string::npos && starts_with_x(argv[i + 1]))
    spec += argv[++i];
  if (!inline_value && i + 1 < argc && !spec.empty() && (spec.back() == 'x' || spec.back() == 'X') &&
      std::isdigit(static_cast<unsigned char>(argv[i + 1][0])))
    spec += argv[++i];
  return spec;
}

std::string checked_iface_prefix(const std::string& p) {
  bool ok = !p.empty() && p.size() <= 4 && std::isalpha(static_cast<unsigned char>(p[0]));
  for (char c : p) ok = ok && std::isalnum(static_cast<unsigned char>(c));
  if (!ok) throw UsageError("--iface-prefix '" + p + "' must be 1-4 letters/digits starting with a letter");
  return p;
}

// The option at argv[i] and its value, into `out`; `i` moves past the arguments it takes.
void parse_option(int argc, char** argv, int& i, ParsedArgs& out, bool& have_n) {
  std::string arg = argv[i], value;
  const bool inline_value = split_inline_value(arg, value);
  auto take = [&]() -> std::string {
    if (inline_value) return value;
    if (i + 1 >= argc) throw UsageError("option " + arg + " needs a value");
    return argv[++i];
  };
  LaunchOptions& o = out.options;
  if (arg == "-n" || arg == "--nprocs" || arg == "--nproc" || arg == "--nproc-per-node") {
    o.nprocs = parse_int(arg, take(), 1, 4096);
    have_n = true;
  } else if (arg == "--nodes") {
    const std::string spec = join_nodes_spec(take(), inline_value, argc, argv, i);
    parse_nodes(spec, &o.nodes, &o.ranks_per_node);
  } else if (arg == "--netem") {
    o.netem = parse_netem(take());
  } else if (arg == "--rendezvous") {
    o.rendezvous = take();
    if (o.rendezvous.empty()) throw UsageError("--rendezvous needs a URL");
  } else if (arg == "--iface-prefix") {
    o.iface_prefix = checked_iface_prefix(take());
  } else if (arg == "--grace") {
    o.grace_s = parse_seconds(arg, take());
  } else if (arg == "--max-restarts") {
    o.max_restarts = parse_int(arg, take(), 0, 1000);
  } else if (arg == "--master-port") {
    o.master_port = parse_int(arg, take(), 1, 65535);
  } else {
    throw UsageError("unknown option '" + std::string(argv[i]) +
                     "' (options go before '--', the command after it; see dreamddp launch --help)");
  }
}

// --nodes AxB gives the rank count (-n, if given, must match it); one of the two is required.
void settle_rank_count(LaunchOptions& o, bool have_n) {
  if (o.nodes > 0) {
    const int total = o.nodes * o.ranks_per_node;
    if (have_n && o.nprocs != total)
      throw UsageError("-n " + std::to_string(o.nprocs) + " does not match --nodes " + std::to_string(o.nodes) +
                       "x" + std::to_string(o.ranks_per_node) + " (" + std::to_string(total) +
                       " ranks); drop -n or make it A*B");
    o.nprocs = total;
    have_n = true;
  }
  if (!have_n) throw UsageError("missing -n N (number of ranks) or --nodes AxB");
}

// A command to run, and no more emulated nodes than one /24 subnet holds.
void check_command(const ParsedArgs& out) {
  if (out.command.empty()) throw UsageError("nothing to run; give the command after '--', e.g. -- train --model mlp");
  const int hosts = out.options.nodes > 0 ? out.options.nodes : out.options.nprocs;
  if (out.options.netem && hosts > 250)
    throw UsageError("--netem supports at most 250 nodes (one /24 subnet), got " + std::to_string(hosts) +
                     (out.options.nodes > 0 ? "" : " (one per rank without --nodes)"));
}

}  // namespace

ParsedArgs parse_args(int argc, char** argv) {
  ParsedArgs out;
  bool have_n = false;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg == "-h" || arg == "--help") {
      out.help = true;
      return out;
    }
    parse_option(argc, argv, i, out, have_n);
  }
  settle_rank_count(out.options, have_n);
  for (; i < argc; ++i) out.command.emplace_back(argv[i]);
  check_command(out);
  return out;
}

int cli_main(int argc, char** argv) {
  ParsedArgs args = parse_args(argc, argv);
  if (args.help) {
    std::fputs(usage(), stdout);
    return 0;
  }
  return run(args.options, args.command);
}

}  // namespace dd::launch
