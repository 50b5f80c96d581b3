//! Builds the application: binds first (port 0 in tests), then serves until cancelled, draining
//! in-flight requests on the way out.

use secrecy::ExposeSecret;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::error::{ApiError, AppError};
use anyhow::Context;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware::{from_fn, from_fn_with_state};
use parley_config::Config;
use parley_db as db;
use parley_jobs::redis_conn::Redis;
use parley_runtime::health::{self, Probes};
use parley_runtime::observability::metrics_handle;
use parley_storage::Storage;
use parley_types::time::Clock;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use utoipa_swagger_ui::SwaggerUi;

use crate::middleware::guard::{self, Limits};
use crate::middleware::{auth, http_metrics, idempotency, request_context};
use crate::openapi::Deployment;
use crate::serve::ConnectionLimits;
use crate::state::AppState;

pub const OPENAPI_PATH: &str = "/api/v1/openapi.json";
/// Connections the metrics listener keeps open at most.
const METRICS_CONNECTIONS: usize = 16;

pub struct Application {
    listener: TcpListener,
    router: Router,
    /// `/metrics`, on `PARLEY_API_METRICS_ADDR`.
    metrics_listener: TcpListener,
    metrics_router: Router,
    connections: ConnectionLimits,
    /// What the sweep of abandoned uploads needs, when object storage is configured.
    uploads: Option<(sqlx::PgPool, Storage, std::time::Duration)>,
    /// The keys' cache, the pool its listener's heartbeats go through, and the session URL
    /// the listener connects to.
    keys: (crate::key_cache::KeyCache, sqlx::PgPool, String),
    /// The unlimited keys' counts and where their batches go.
    usage: (crate::usage::UnlimitedCounts, Redis),
}

impl Application {
    /// Connects to Postgres and Redis, applies migrations when `auto_migrate`, and binds
    /// `listener` (or `config.api_addr`) and `config.api_metrics_addr`.
    pub async fn build(config: Config, listener: Option<TcpListener>) -> anyhow::Result<Self> {
        Self::build_with_clock(config, listener, Clock::system()).await
    }

    /// As [`Application::build`], with the SLA rules reading `clock` (tests move it forward).
    pub async fn build_with_clock(
        config: Config,
        listener: Option<TcpListener>,
        clock: Clock,
    ) -> anyhow::Result<Self> {
        if config.auto_migrate {
            // A pool of its own: a migration may run longer than any request may. On a session
            // connection: the migrator holds a session advisory lock.
            let migrations = db::pool(config.database_session_url.expose_secret(), 1)?;
            db::migrate(&migrations)
                .await
                .context("applying migrations")?;
            migrations.close().await;
        }
        let pool = db::api_pool(
            config.database_url.expose_secret(),
            config.db_max_connections,
            config.http.request_timeout,
        )?;
        // Refuses to start without a statement timeout when Postgres answers (a process that
        // starts while Postgres is away refuses every connection without one instead).
        match db::api_connection_check(
            config.database_url.expose_secret(),
            config.http.request_timeout,
        )
        .await
        {
            Ok(None) => {}
            Ok(Some(why)) => tracing::warn!(
                error = %why,
                "no database connection at start; serving, and checking each connection made"
            ),
            Err(err) => anyhow::bail!("{err}"),
        }
        // Redis is not needed to serve: usage counting fails open and enqueues are left to
        // the worker's reconciler while it is away.
        let redis =
            Redis::lazy(&config.redis_target(), &config.redis_prefix).context("REDIS_URL")?;
        let listener = match listener {
            Some(l) => l,
            None => TcpListener::bind(config.api_addr)
                .await
                .with_context(|| format!("binding {}", config.api_addr))?,
        };
        let metrics_listener = TcpListener::bind(config.api_metrics_addr)
            .await
            .with_context(|| format!("binding {}", config.api_metrics_addr))?;
        let org_label = config.metrics_org_label;
        let turns = crate::org_permits::OrgTurns::new(
            config.http.requests_per_org,
            config.http.requests_queued_per_org,
            org_label,
        );
        let auth_failures =
            crate::auth_failures::AuthFailures::new(config.http.auth_failures_per_minute);
        // Unlimited keys are counted from the first request if Redis answers now.
        let unlimited_usage =
            crate::usage::UnlimitedCounts::new(crate::usage::answers(&redis).await);
        let state = AppState::new(crate::state::Shared {
            pool,
            jobs: config.jobs(&redis),
            redis,
            storage: config.storage.as_ref().map(Storage::new),
            config: Arc::new(config),
            metrics: metrics_handle(),
            clock,
            counts: crate::org_permits::OrgPermits::new(
                "segment_counts",
                "segment counts",
                crate::org_permits::COUNTS_PER_ORG,
                org_label,
            ),
            turns,
            auth_failures,
            keys: crate::key_cache::KeyCache::default(),
            unlimited_usage,
        });
        let uploads = state.storage.clone().map(|storage| {
            (
                state.pool.clone(),
                storage,
                state.config.uploads.upload_url_ttl,
            )
        });
        Ok(Application {
            uploads,
            usage: (state.unlimited_usage.clone(), state.redis.clone()),
            keys: (
                state.keys.clone(),
                state.pool.clone(),
                state.config.database_session_url.expose_secret().to_owned(),
            ),
            listener,
            connections: ConnectionLimits {
                header_read_timeout: state.config.http.header_read_timeout,
                max_connections: state.config.http.max_connections,
                // Every request ends by its timeout; a little more for the answers to go out.
                drain: state.config.http.request_timeout + std::time::Duration::from_secs(5),
            },
            metrics_router: health::metrics_router(Probes::new(
                state.pool.clone(),
                state.redis.clone(),
                state.metrics.clone(),
                false,
            )),
            metrics_listener,
            router: router(state),
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Where `/metrics` is served.
    pub fn metrics_addr(&self) -> std::io::Result<SocketAddr> {
        self.metrics_listener.local_addr()
    }

    /// Serves until `shutdown` is cancelled, then stops accepting and lets in-flight requests
    /// finish. Sweeps abandoned uploads meanwhile (`crate::retention`), hears API keys'
    /// revocations (`crate::key_cache`) and writes unlimited keys' counts (`crate::usage`).
    pub async fn run_until(self, shutdown: CancellationToken) -> std::io::Result<()> {
        let (keys, pool, session_url) = self.keys;
        tokio::spawn(crate::key_cache::listen(
            keys,
            pool,
            session_url,
            shutdown.clone(),
        ));
        // Counts are written until the last request has drained, then once more.
        let (counts, redis) = self.usage;
        let served = CancellationToken::new();
        let counting = tokio::spawn(crate::usage::write_batches(counts, redis, served.clone()));
        if let Some((pool, storage, ttl)) = self.uploads {
            tokio::spawn(crate::retention::run(pool, storage, ttl, shutdown.clone()));
        }
        // The same header timeout as the public listener, and a few connections: scrapers.
        let metrics = crate::serve::serve(
            self.metrics_listener,
            self.metrics_router,
            ConnectionLimits {
                header_read_timeout: self.connections.header_read_timeout,
                max_connections: METRICS_CONNECTIONS,
                drain: std::time::Duration::from_secs(1),
            },
            shutdown.clone(),
        );
        tokio::spawn(async move {
            if let Err(err) = metrics.await {
                tracing::error!(%err, "the metrics listener stopped");
            }
        });
        let outcome =
            crate::serve::serve(self.listener, self.router, self.connections, shutdown).await;
        served.cancel();
        let _ = counting.await;
        outcome
    }
}

pub fn router(state: AppState) -> Router {
    let (api, openapi) =
        crate::routes::api(state.config.max_broadcast_body_bytes).split_for_parts();
    let (signed, signed_doc) = crate::routes::signed().split_for_parts();
    let signed = guard::guard(signed, crate::routes::receipts::LIMITS);
    let (admin, admin_doc) = crate::routes::admin::router().split_for_parts();
    let admin = admin.route_layer(from_fn_with_state(
        state.clone(),
        crate::middleware::operator_auth::authenticate,
    ));
    let openapi = crate::openapi::document(
        openapi.merge_from(signed_doc).merge_from(admin_doc),
        &Deployment::of(&state.config),
    );
    // Authentication runs first (the outer layer): a key belongs to an organization.
    let api = api
        .route_layer(from_fn_with_state(state.clone(), idempotency::idempotency))
        .route_layer(from_fn_with_state(state.clone(), auth::authenticate));
    let probes = Probes::new(
        state.pool.clone(),
        state.redis.clone(),
        state.metrics.clone(),
        false,
    );
    let limits = Limits {
        request_timeout: state.config.http.request_timeout,
        max_in_flight: state.config.http.max_in_flight,
    };
    let max_body_bytes = state.config.max_body_bytes;
    // Serialized once: a request for the document costs its bytes, not a serialization.
    let document = axum::body::Bytes::from(openapi.to_string());
    let serve_document = move || {
        let document = document.clone();
        async move {
            (
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                document,
            )
        }
    };
    let routes = Router::new()
        .merge(api)
        .merge(signed)
        .merge(admin)
        .merge(crate::admin_page::router())
        .route(OPENAPI_PATH, axum::routing::get(serve_document))
        .merge(SwaggerUi::new("/docs").config(utoipa_swagger_ui::Config::new([OPENAPI_PATH])))
        .with_state(state);
    layered(
        routes,
        health::probes_router(probes),
        limits,
        max_body_bytes,
    )
}

/// The layers every request passes, outermost first: its id and context (and the log line),
/// the default body limit, the HTTP metrics, the panic catcher; then, for the API's routes
/// but not the probes, the timeout and the in-flight limit. Public so tests can put the same
/// stack over routes of their own.
pub fn layered(routes: Router, probes: Router, limits: Limits, max_body_bytes: usize) -> Router {
    let routes = guard::catch_panic(guard::guard(routes, limits));
    Router::new()
        .merge(routes)
        .merge(probes)
        .fallback(|| async { ApiError(AppError::RouteNotFound) })
        .method_not_allowed_fallback(|| async { ApiError(AppError::MethodNotAllowed) })
        .layer(from_fn_with_state(
            http_metrics::Series::default(),
            http_metrics::http_metrics,
        ))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(from_fn(request_context::request_context))
}
