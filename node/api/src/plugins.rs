//! Each plugin's HTTP routes live in its own module here; [`routes`] adds every plugin's to the
//! router (a route of a plugin the node does not run answers 404 `<plugin>_disabled`).

use crate::server::AppState;
use axum::Router;
use std::sync::Arc;

pub(crate) mod collection;
pub(crate) mod matching;
pub(crate) mod withdrawal;

/// Every plugin's routes.
pub(crate) fn routes(router: Router<Arc<AppState>>) -> Router<Arc<AppState>> {
    withdrawal::routes(matching::routes(collection::routes(router)))
}
