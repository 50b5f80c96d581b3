//! What each Parley process runs beside its work: logs and the Prometheus recorder, the probe
//! routes (`/healthz`, `/readyz`, `/metrics`), and the shutdown signal.

pub mod health;
pub mod observability;
pub mod shutdown;
