//! Builds the application: binds first (port 0 in tests), then serves until cancelled, draining
//! in-flight requests on the way out.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware::{from_fn, from_fn_with_state};
use parley_shared::config::Config;
use parley_shared::db;
use parley_shared::error::AppError;
use parley_shared::health::{self, Probes};
use parley_shared::observability::metrics_handle;
use parley_shared::redis_conn::Redis;
use parley_shared::storage::Storage;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use utoipa_swagger_ui::SwaggerUi;

use crate::middleware::{auth, http_metrics, request_context};
use crate::state::AppState;

pub const OPENAPI_PATH: &str = "/api/v1/openapi.json";

pub struct Application {
    listener: TcpListener,
    router: Router,
}

impl Application {
    /// Connects to Postgres and Redis, applies migrations when `auto_migrate`, and binds
    /// `listener` (or `config.api_addr`).
    pub async fn build(config: Config, listener: Option<TcpListener>) -> anyhow::Result<Self> {
        let pool = db::pool(&config.database_url, config.db_max_connections)?;
        if config.auto_migrate {
            db::migrate(&pool).await.context("applying migrations")?;
        }
        let redis = Redis::connect(&config.redis_url, &config.redis_prefix)
            .await
            .context("connecting to Redis")?;
        let listener = match listener {
            Some(l) => l,
            None => TcpListener::bind(config.api_addr)
                .await
                .with_context(|| format!("binding {}", config.api_addr))?,
        };
        let state = AppState {
            pool,
            jobs: parley_shared::jobs::Jobs::new(&redis),
            redis,
            storage: config.storage.as_ref().map(Storage::new),
            config: Arc::new(config),
            metrics: metrics_handle(),
        };
        Ok(Application {
            listener,
            router: router(state),
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` is cancelled, then stops accepting and lets in-flight requests
    /// finish.
    pub async fn run_until(self, shutdown: CancellationToken) -> std::io::Result<()> {
        axum::serve(self.listener, self.router)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await
    }
}

pub fn router(state: AppState) -> Router {
    let (api, openapi) =
        crate::routes::api(state.config.max_broadcast_body_bytes).split_for_parts();
    let (signed, signed_doc) = crate::routes::signed().split_for_parts();
    let openapi = crate::openapi::finish(
        crate::openapi::base()
            .merge_from(openapi)
            .merge_from(signed_doc),
    );
    let api = api.route_layer(from_fn_with_state(state.clone(), auth::authenticate));
    let probes = Probes {
        pool: state.pool.clone(),
        redis: state.redis.clone(),
        metrics: state.metrics.clone(),
    };
    let limit = state.config.max_body_bytes;
    Router::new()
        .merge(api)
        .merge(signed)
        .merge(SwaggerUi::new("/docs").url(OPENAPI_PATH, openapi))
        .merge(health::router(probes))
        .fallback(|| async { AppError::RouteNotFound })
        .method_not_allowed_fallback(|| async { AppError::MethodNotAllowed })
        .layer(from_fn(http_metrics::http_metrics))
        .layer(DefaultBodyLimit::max(limit))
        .layer(from_fn(request_context::request_context))
        .with_state(state)
}

/// The OpenAPI document as served, for tools and tests.
pub fn openapi_document() -> utoipa::openapi::OpenApi {
    let (_, openapi) = crate::routes::api(0).split_for_parts();
    let (_, signed) = crate::routes::signed().split_for_parts();
    crate::openapi::finish(
        crate::openapi::base()
            .merge_from(openapi)
            .merge_from(signed),
    )
}
