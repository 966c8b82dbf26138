//! The fleet's nodes for the front ends (issue 29): each node with its live
//! runs, and draining one.

use super::{ServiceError, ServiceResult};
use crate::domain::Node;
use crate::store::Store;

fn internal(e: crate::store::StoreError) -> ServiceError {
    ServiceError::from_store(e, || "the nodes".to_owned())
}

/// Every node that ever beat, by id, each with its live runs.
pub async fn list(store: &Store) -> ServiceResult<Vec<(Node, i64)>> {
    let (nodes, runs) =
        tokio::try_join!(store.nodes(), store.live_runs_by_node()).map_err(internal)?;
    Ok(nodes
        .into_iter()
        .map(|n| {
            let live = runs
                .iter()
                .find(|(id, _)| *id == n.id)
                .map_or(0, |(_, c)| *c);
            (n, live)
        })
        .collect())
}

/// Drains node `id` (it starts no new run) or lets it launch again; the
/// node as it is then.
pub async fn set_draining(store: &Store, id: &str, draining: bool) -> ServiceResult<(Node, i64)> {
    let missing =
        || ServiceError::NotFound(format!("there is no lab node '{id}' (labctl node ls)"));
    if !store
        .set_node_draining(id, draining)
        .await
        .map_err(internal)?
    {
        return Err(missing());
    }
    list(store)
        .await?
        .into_iter()
        .find(|(n, _)| n.id == id)
        .ok_or_else(missing)
}
