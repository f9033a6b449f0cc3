// action_name: the names actions have in logs, metrics.h5 and plans.
#include "core/sync/types/action.h"

namespace dd::sync {

const char* action_name(Action a) {
  switch (a) {
    case Action::None: return "none";
    case Action::AverageParams: return "average-params";
    case Action::AllreduceGrads: return "allreduce-grads";
    case Action::AverageGroup: return "average-group";
  }
  return "?";
}

}  // namespace dd::sync
