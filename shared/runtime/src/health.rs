//! `/healthz` (the process is alive), `/readyz` (what answers: Postgres, Redis) and
//! `/metrics` (Prometheus text), served by the API and by the worker's metrics address.
//!
//! `/readyz` is 503 when the process cannot do its work: the API without Postgres, the
//! worker without Postgres or Redis. The API serves without Redis (usage uncounted, enqueues
//! left to the reconciler): it stays ready and says `"status": "degraded"`. The probes need no
//! key and sit outside the in-flight limit, so a check is shared: at most one runs at a time,
//! and its answer serves every caller for half a second; a flood of `/readyz` costs Postgres
//! two queries a second.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::json;
use sqlx::PgPool;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;

use parley_jobs::redis_conn::Redis;

#[derive(Clone)]
pub struct Probes {
    pool: PgPool,
    redis: Redis,
    metrics: PrometheusHandle,
    /// Whether the process is of no use without Redis (the worker).
    needs_redis: bool,
    last: Arc<Mutex<Option<(Instant, Readiness)>>>,
}

/// How long a readiness answer serves other callers.
const FRESH: Duration = Duration::from_millis(500);

#[derive(Debug, Clone, Copy)]
struct Readiness {
    postgres: bool,
    redis: bool,
}

impl Probes {
    pub fn new(pool: PgPool, redis: Redis, metrics: PrometheusHandle, needs_redis: bool) -> Self {
        Probes {
            pool,
            redis,
            metrics,
            needs_redis,
            last: Arc::new(Mutex::new(None)),
        }
    }

    /// The latest readiness, checked again when older than [`FRESH`] (one check at a time).
    async fn readiness(&self) -> Readiness {
        let mut last = self.last.lock().await;
        if let Some((at, r)) = *last
            && at.elapsed() < FRESH
        {
            return r;
        }
        let (pg, redis) = tokio::join!(
            tokio::time::timeout(
                Duration::from_secs(2),
                sqlx::query_scalar!("SELECT 1 AS alive").fetch_one(&self.pool)
            ),
            tokio::time::timeout(Duration::from_secs(2), self.redis.ping())
        );
        let r = Readiness {
            postgres: matches!(pg, Ok(Ok(_))),
            redis: matches!(redis, Ok(Ok(()))),
        };
        *last = Some((Instant::now(), r));
        r
    }
}

/// `/healthz`, `/readyz` and `/metrics`: the worker's listener.
pub fn router<S: Clone + Send + Sync + 'static>(probes: Probes) -> Router<S> {
    probes_router(probes.clone()).merge(metrics_router(probes))
}

/// `/healthz` and `/readyz`: the API's public listener.
pub fn probes_router<S: Clone + Send + Sync + 'static>(probes: Probes) -> Router<S> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(probes)
}

/// `/metrics`: the API serves it on a listener of its own (`PARLEY_API_METRICS_ADDR`), so
/// that the public address answers no unauthenticated request that costs a rendering.
pub fn metrics_router<S: Clone + Send + Sync + 'static>(probes: Probes) -> Router<S> {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(probes)
}

async fn healthz() -> impl IntoResponse {
    axum::Json(json!({"status": "ok"}))
}

async fn readyz(State(p): State<Probes>) -> impl IntoResponse {
    let Readiness {
        postgres: pg_ok,
        redis: redis_ok,
    } = p.readiness().await;
    let (status, word) = match (pg_ok, redis_ok) {
        (true, true) => (StatusCode::OK, "ok"),
        (true, false) if !p.needs_redis => (StatusCode::OK, "degraded"),
        _ => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
    };
    let answer = |ok: bool| if ok { "ok" } else { "unavailable" };
    (
        status,
        axum::Json(json!({
            "status": word,
            "postgres": answer(pg_ok),
            "redis": answer(redis_ok),
        })),
    )
}

async fn metrics(State(p): State<Probes>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        p.metrics.render(),
    )
}
