//! The compact binary codec of the chain plugins' commands, effects and checkpoints: the core's
//! ([`rtgs_core::wire`], shared by every plugin), re-exported so that paths stay short.

pub use rtgs_core::wire::*;
