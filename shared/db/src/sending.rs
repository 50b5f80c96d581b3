//! The worker's side of broadcasts: claiming a broadcast for fan-out, writing recipients in
//! slices, reading recipients for sending, recording outcomes, finishing, and finding work
//! that a lost job left behind. Every function is safe to run from any number of
//! worker processes at once.
//!
//! One file per step: `fan_out` (the dispatcher), `send_job`, `ending`, and `reconcile` (the
//! ticker and the reconciler).

use std::time::Duration;

mod ending;
mod fan_out;
mod reconcile;
mod send_job;

pub use ending::*;
pub use fan_out::*;
pub use reconcile::*;
pub use send_job::*;

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}
