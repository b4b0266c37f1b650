//! Integration tests of the withdrawal plugin: the transition table walked, one test per
//! transition, operations by state, money, chain rules, records, checkpoints and failover with
//! hand-fed results; faults against the simulated outside world; the seed's cases end to end.
//! (The plugin in the deterministic cluster simulator is tested by `rtgs-sim`.)

mod alerts;
mod chain_rules;
mod checkpoints;
mod failover;
mod faults;
mod money;
mod ops;
mod perf;
mod props;
mod records;
mod seed;
mod support;
mod table;
mod transitions;
mod world;
