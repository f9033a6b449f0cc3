// Lower bounds on the DreamDDP modelled time over all phase assignments, used to certify the solver's result.
#pragma once
#include <vector>

namespace dd::sync {

// B + max(0, C - H*B) / H: the channel of each phase can hide at most B of communication.
double simple_lower_bound(const std::vector<double>& b, const std::vector<double>& c, int H);

// Preemptive relaxation: sum_i w_i is the work still running after B summed over H channels (each channel is
// busy without a break after B, since every layer is ready by then). Allowing layers to be split across time
// and channels, but never run on two channels at once nor before their ready time, the most work that can
// finish by B is a max flow (layers -> time intervals between ready times -> sink, capacities c_l, interval
// length, H * interval length). B + (C - maxflow) / H is then a lower bound; it dominates simple_lower_bound.
double flow_lower_bound(const std::vector<double>& b, const std::vector<double>& c, int H);

// max(simple, flow).
double schedule_lower_bound(const std::vector<double>& b, const std::vector<double>& c, int H);

}  // namespace dd::sync
