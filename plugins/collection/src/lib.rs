//! # rtgs-collection: the collection (wallet sweeping) plugin
//!
//! # Layout
//! Work in progress (issue 5): see `plugins/README.md`.
