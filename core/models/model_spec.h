// A model spec as the CLI takes it: NAME[:key=value,...] (docs/cli.md, "Reference models"). The family parses
// its own options through get(), each with a default and a range; options the family never asked for are an
// error (finish()), so a mistyped key is refused rather than ignored.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace dd::models {

class ModelSpec {
 public:
  // Throws dd::UsageError naming the problem for an empty name, a malformed option or a repeated key.
  static ModelSpec parse(const std::string& spec);

  const std::string& family() const { return family_; }
  const std::string& text() const { return text_; }
  bool has_options() const { return !opts_.empty(); }
  // The option's integer value, or `dflt`; throws dd::UsageError when it is not an integer in [lo, hi].
  int64_t get(const std::string& key, int64_t dflt, int64_t lo, int64_t hi);
  // The option's word, one of `choices` (the first is the default); throws dd::UsageError naming them otherwise.
  std::string choose(const std::string& key, const std::vector<std::string>& choices);
  // Throws dd::UsageError naming the first option no get() asked for, with the family's keys.
  void finish() const;

 private:
  std::string text_, family_;
  std::map<std::string, std::string> opts_;
  std::set<std::string> asked_;
};

}  // namespace dd::models
