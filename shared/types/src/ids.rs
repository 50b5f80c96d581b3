//! Identifiers are UUID v7: time-ordered, so they index well and sort by creation.

use uuid::Uuid;

pub fn new_id() -> Uuid {
    Uuid::now_v7()
}

/// Removes repeated ids, keeping the first of each in order.
pub fn dedup(ids: Vec<Uuid>) -> Vec<Uuid> {
    let mut seen = std::collections::HashSet::with_capacity(ids.len());
    ids.into_iter().filter(|id| seen.insert(*id)).collect()
}
