//! The activation memory plan an engine stores (made by the builder).

use serde::{Deserialize, Serialize};

use crate::network::TensorId;

/// Where activations live and when they die.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MemoryPlan {
    /// For each layer, the activations whose last use it is (freed right after it runs).
    pub release_after: Vec<Vec<TensorId>>,
    /// Arena offset of each activation at the opt shapes (`None`: not an activation).
    pub offsets: Vec<Option<u64>>,
    /// Arena size at the opt shapes, with reuse.
    pub arena_bytes: u64,
    /// Sum of all activation sizes at the opt shapes (no reuse), for comparison.
    pub naive_bytes: u64,
}
