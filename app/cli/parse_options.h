// One option parser for the sub-commands built on Boost.Program_options (schedule, simulate): no prefix guessing,
// a bad option is a dd::UsageError naming the command, --help prints the options.
#pragma once
#include <iostream>
#include <string>

#include <boost/program_options.hpp>

#include "base/error.h"

namespace dd::cli {

// Fills `vm` from argv; returns false after printing the help when --help was given.
inline bool parse_options(const std::string& command, const boost::program_options::options_description& desc,
                          int argc, char** argv, boost::program_options::variables_map& vm) {
  namespace po = boost::program_options;
  try {
    const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    po::store(po::command_line_parser(argc, argv).options(desc).style(style).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(command + ": " + e.what() + " (see dreamddp " + command + " --help)");
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return false;
  }
  return true;
}

}  // namespace dd::cli
