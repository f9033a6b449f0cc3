// What a simulated rank's compute waits on (sim_backend.h): its collectives' end (wait_comm_idle), and the
// compute on a machine the ranks share (--shared-cores), slowed while the rank's collectives run.
#include <simgrid/s4u.hpp>

#include <memory>

#include "app/sim/sim_backend.h"

namespace sg4 = simgrid::s4u;

namespace dd::sim {

struct RankIdle {
  sg4::MutexPtr mu = sg4::Mutex::create();
  sg4::ConditionVariablePtr cv = sg4::ConditionVariable::create();
  // On shared cores: the rank's compute while its collectives run, as k times its work; the communication actor
  // that ends the rank's last bulk collective cancels it and leaves what was left of that work here.
  sg4::ExecPtr slowed;
  double slowed_left = 0;
};

namespace {

RankIdle& idle_of(SimNet& net, int rank) {
  auto& w = net.idle[size_t(rank)];
  if (!w) w = std::make_shared<RankIdle>();
  return *w;
}

sg4::ExecPtr exec_on_machine(const SimNet& net, double flops) {
  return sg4::Exec::init()->set_flops_amount(flops)->set_host(net.cpu)->set_thread_count(net.rank_threads);
}

}  // namespace

void wait_comm_idle(SimNet& net, int rank, double until) {
  RankIdle& w = idle_of(net, rank);
  std::unique_lock<sg4::Mutex> lk(*w.mu);
  while (net.comm_busy[size_t(rank)] > 0 && sg4::Engine::get_clock() < until) w.cv->wait_until(lk, until);
}

void compute_on_shared_cores(SimNet& net, int rank, double flops, double k) {
  RankIdle& w = idle_of(net, rank);
  if (k > 1 && net.comm_busy[size_t(rank)] > 0) {
    // New collectives are this rank's own, posted between compute calls: none starts while this runs.
    w.slowed = exec_on_machine(net, flops * k);
    w.slowed->start();
    try {
      w.slowed->wait();
      w.slowed = nullptr;
      return;
    } catch (const simgrid::CancelException&) {
      w.slowed = nullptr;
      flops = w.slowed_left / k;
    }
    if (!(flops > 0)) return;
  }
  exec_on_machine(net, flops)->start()->wait();
}

void end_slowed_compute(SimNet& net, int rank) {
  auto& w = net.idle[size_t(rank)];
  if (!w) return;
  if (w->slowed && w->slowed->get_state() == sg4::Activity::State::STARTED) {
    w->slowed_left = w->slowed->get_remaining();
    w->slowed->cancel();
  }
  w->cv->notify_all();
}

}  // namespace dd::sim
