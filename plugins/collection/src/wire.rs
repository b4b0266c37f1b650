//! The compact binary codec of commands, effects and checkpoints: the core's, shared by every
//! plugin ([`rtgs_core::wire`]); re-exported so that paths inside this crate stay short.

pub use rtgs_core::wire::*;
