//! The fleet's nodes for the front ends (issue 29): each node with its live
//! runs, draining one, forgetting one that is gone.

use super::{ServiceError, ServiceResult};
use crate::domain::{Node, NodeState};
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

/// Forgets node `id`, down for good (a machine retired): it leaves the
/// list of nodes. Refused for the node answering (`me`), for a node that
/// is not down (by `down_after` ms), and for one whose live runs or AFK
/// claims the fleet has not taken over yet (it does so within a beat). Its
/// runs keep its name; should it beat again, it is recorded again and takes
/// up what is still its own.
pub async fn forget(store: &Store, me: &str, id: &str, down_after: i64) -> ServiceResult<()> {
    if id == me {
        return Err(ServiceError::Conflict(format!(
            "lab node '{id}' is the one answering: a node forgets only another, down node"
        )));
    }
    let (node, runs) = list(store)
        .await?
        .into_iter()
        .find(|(n, _)| n.id == id)
        .ok_or_else(|| {
            ServiceError::NotFound(format!("there is no lab node '{id}' (labctl node ls)"))
        })?;
    let state = node.state(crate::store::now_ms(), down_after);
    if state != NodeState::Down {
        return Err(ServiceError::Conflict(format!(
            "lab node '{id}' is {}: only a down node is forgotten (stop its lab first; it is down {} s after its last beat)",
            state.as_str(),
            down_after / 1000
        )));
    }
    let claims = store.claims_of_node(id).await.map_err(internal)?.len();
    if runs > 0 || claims > 0 {
        return Err(ServiceError::Conflict(format!(
            "lab node '{id}' still holds {runs} live run(s) and {claims} AFK claim(s): the fleet takes them over within a beat; try again then"
        )));
    }
    let cutoff = store.clock_ms().await.map_err(internal)? - down_after;
    if !store.forget_node(id, cutoff).await.map_err(internal)? {
        return Err(ServiceError::Conflict(format!(
            "lab node '{id}' beat again: it is not down"
        )));
    }
    Ok(())
}
