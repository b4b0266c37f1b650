//! Integration tests of the collection plugin: rules one by one, faults against the chain
//! simulator, the journal (end to end, replay, failover), properties, and a measurement. (The
//! plugin in the deterministic cluster simulator is tested by `rtgs-sim`.)

mod failover;
mod faults;
mod fixes;
mod journal;
mod perf;
mod props;
mod reset;
mod rules;
mod support;
mod time;
