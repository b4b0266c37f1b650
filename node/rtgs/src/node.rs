//! `rtgs node`: one center of the production engine; the engine itself is `rtgs-engine`.

pub use rtgs_engine::{now_us, run, NodeArgs};
