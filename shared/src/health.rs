//! `/healthz` (the process is alive), `/readyz` (Postgres and Redis answer) and `/metrics`
//! (Prometheus text), served by the API and by the worker's metrics address.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::json;
use sqlx::PgPool;

use crate::redis_conn::Redis;

#[derive(Clone)]
pub struct Probes {
    pub pool: PgPool,
    pub redis: Redis,
    pub metrics: PrometheusHandle,
}

pub fn router<S>(probes: Probes) -> Router<S> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(probes)
}

async fn healthz() -> impl IntoResponse {
    axum::Json(json!({"status": "ok"}))
}

async fn readyz(State(p): State<Probes>) -> impl IntoResponse {
    let (pg, redis) = tokio::join!(
        tokio::time::timeout(
            std::time::Duration::from_secs(2),
            sqlx::query("SELECT 1").execute(&p.pool)
        ),
        p.redis.ping()
    );
    let pg_ok = matches!(pg, Ok(Ok(_)));
    let redis_ok = redis.is_ok();
    let status = if pg_ok && redis_ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let word = |ok: bool| if ok { "ok" } else { "unavailable" };
    (
        status,
        axum::Json(json!({"postgres": word(pg_ok), "redis": word(redis_ok)})),
    )
}

async fn metrics(State(p): State<Probes>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        p.metrics.render(),
    )
}
