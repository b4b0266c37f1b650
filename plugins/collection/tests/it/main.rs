//! Integration tests of the collection plugin: rules one by one, faults against the chain
//! simulator, the journal (end to end, replay, failover), properties, and a measurement.

mod failover;
mod faults;
mod journal;
mod perf;
mod props;
mod rules;
mod sim;
mod support;
mod time;
