//! Integration tests of the matching plugin: transitions (`rules`), one per ☠️ paragraph of
//! seed 002 (`seed`), LP codes and faults (`lp`), failover and re-execution (`failover`),
//! properties over random runs with the simulators (`props`), and a measurement (`perf`).

mod failover;
mod lp;
mod perf;
mod props;
mod rules;
mod seed;
mod support;
