// resolve_rendezvous / launcher_job_id: which store a job's ranks meet in (one rule for train and bench).
#include <cctype>
#include <cstdlib>
#include <string>

#include "backends/backend.h"
#include "base/error.h"

namespace dd {

std::string launcher_job_id() {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v ? v : "";
  };
  std::string id = env("DREAMDDP_JOB").empty() ? "" : "job-" + env("DREAMDDP_JOB");
  if (id.empty() && !env("SLURM_JOB_ID").empty())
    id = "slurm-" + env("SLURM_JOB_ID") + (env("SLURM_STEP_ID").empty() ? "" : "." + env("SLURM_STEP_ID"));
  if (id.empty() && !env("OMPI_MCA_ess_base_jobid").empty()) id = "ompi-" + env("OMPI_MCA_ess_base_jobid");
  if (id.empty() && !env("PMIX_NAMESPACE").empty()) id = "pmix-" + env("PMIX_NAMESPACE");
  // torchrun's default --rdzv-id is the literal "none": not a job id.
  if (id.empty() && !env("TORCHELASTIC_RUN_ID").empty() && env("TORCHELASTIC_RUN_ID") != "none")
    id = "torchrun-" + env("TORCHELASTIC_RUN_ID");
  // The id becomes a directory name: keep it to a safe alphabet.
  for (char& c : id)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_')) c = '_';
  return id;
}

std::string resolve_rendezvous(const std::string& flag, const std::string& fallback_dir) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("DREAMDDP_RENDEZVOUS"); env && *env) return env;
  if (fallback_dir.empty()) return "";
  const std::string job = launcher_job_id();
  return "file://" + fallback_dir + "/.rendezvous" + (job.empty() ? "" : "/" + job);
}

void check_rendezvous_scheme(const std::string& url) {
  if (url.empty()) return;
  const std::string hint = "; pass --rendezvous file:///a/shared/dir or redis://host:port[/JOB]";
  if (url.rfind("file://", 0) == 0) {
    if (url.size() == 7 || url[7] != '/')
      throw UsageError("rendezvous '" + url + "' must be file:// followed by an absolute path" + hint);
    return;
  }
  if (url.rfind("redis://", 0) == 0) {
    if (url.size() == 8 || url[8] == '/' || url[8] == ':')
      throw UsageError("rendezvous '" + url + "': missing host" + hint);
    return;
  }
  throw UsageError("unknown rendezvous '" + url + "'" + hint);
}

}  // namespace dd
