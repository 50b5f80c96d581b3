//! Recording job metrics (names in `parley_shared::metric_names`).

use std::time::Duration;

use parley_shared::metric_names::{JOB_DURATION, JOBS};

pub fn job(queue: &'static str, outcome: &'static str, took: Duration) {
    metrics::counter!(JOBS, "queue" => queue, "outcome" => outcome).increment(1);
    metrics::histogram!(JOB_DURATION, "queue" => queue).record(took.as_secs_f64());
}
