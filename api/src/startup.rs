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
use parley_jobs::redis_conn::Redis;
use parley_runtime::health::{self, Probes};
use parley_runtime::observability::metrics_handle;
use parley_storage::Storage;
use parley_types::time::Clock;
use parley_usecases::{Services, postgres};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::middleware::bodies::{self, Bodies};
use crate::middleware::guard::{self, InFlight};
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
    /// The operator API and page on `PARLEY_ADMIN_ADDR`, when it is set.
    admin: Option<(TcpListener, Router)>,
    /// Whose forwarding headers name the client.
    proxies: parley_config::Proxies,
    /// `/metrics`, on `PARLEY_API_METRICS_ADDR`.
    metrics_listener: TcpListener,
    metrics_router: Router,
    connections: ConnectionLimits,
    /// What the sweep of abandoned uploads needs, when object storage is configured.
    uploads: Option<(Services, Storage, std::time::Duration)>,
    /// The keys' cache, what its listener's heartbeats go through, and the session URL the
    /// listener connects to.
    keys: (crate::key_cache::KeyCache, Services, String),
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
            let migrations = postgres::pool(config.database_session_url.expose_secret(), 1)?;
            postgres::migrate(&migrations)
                .await
                .context("applying migrations")?;
            migrations.close().await;
        }
        let pool = postgres::api_pool(
            config.database_url.expose_secret(),
            config.db_max_connections,
            config.http.request_timeout,
        )?;
        // Refuses to start without a statement timeout when Postgres answers (a process that
        // starts while Postgres is away refuses every connection without one instead).
        match postgres::api_connection_check(
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
        let admin_listener = match config.http.admin_addr {
            Some(addr) => Some(
                TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("binding {addr}"))?,
            ),
            None => None,
        };
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
        let spool = crate::body_spool::DiskBudget::new(config.http.spool_bytes);
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
            files_sent: crate::org_permits::OrgPermits::new(
                "files_sent",
                "import files sent",
                crate::org_permits::FILES_PER_ORG,
                org_label,
            ),
            exports: crate::org_permits::OrgPermits::new(
                "exports",
                "suppression exports",
                crate::org_permits::EXPORTS_PER_ORG,
                org_label,
            ),
            previews: crate::org_permits::OrgPermits::new(
                "previews",
                "broadcast previews",
                crate::org_permits::PREVIEWS_PER_ORG,
                org_label,
            ),
            spool,
            turns,
            ticket_turns: crate::org_permits::OrgTurns::new(
                crate::org_permits::TICKET_TOKEN_TURNS,
                crate::org_permits::TICKET_TOKEN_QUEUED,
                org_label,
            ),
            auth_failures,
            unsubscribe_calls: crate::auth_failures::AuthFailures::new(
                crate::routes::unsubscribe::PER_ADDRESS_PER_MINUTE,
            ),
            unsubscribe_keys: Default::default(),
            keys: crate::key_cache::KeyCache::default(),
            unlimited_usage,
        });
        let uploads = state.storage.clone().map(|storage| {
            (
                state.services(),
                storage,
                state.config.uploads.upload_url_ttl,
            )
        });
        Ok(Application {
            uploads,
            usage: (state.unlimited_usage.clone(), state.redis.clone()),
            keys: (
                state.keys.clone(),
                state.services(),
                state.config.database_session_url.expose_secret().to_owned(),
            ),
            listener,
            proxies: state.config.http.proxies.clone(),
            connections: ConnectionLimits {
                header_read_timeout: state.config.http.header_read_timeout,
                max_connections: state.config.http.max_connections,
                max_per_address: state.config.http.max_connections_per_address,
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
            admin: None,
            router: Router::new(),
        }
        .with_routers(router(state), admin_listener))
    }

    fn with_routers(mut self, routers: Routers, admin_listener: Option<TcpListener>) -> Self {
        self.router = routers.public;
        self.admin = admin_listener.zip(routers.admin);
        self
    }

    /// Where the operator API is served when it has an address of its own.
    pub fn admin_addr(&self) -> Option<std::io::Result<SocketAddr>> {
        self.admin.as_ref().map(|(l, _)| l.local_addr())
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
        let (keys, services, session_url) = self.keys;
        tokio::spawn(crate::key_cache::listen(
            keys,
            services,
            session_url,
            shutdown.clone(),
        ));
        // Counts are written until the last request has drained, then once more.
        let (counts, redis) = self.usage;
        let served = CancellationToken::new();
        let counting = tokio::spawn(crate::usage::write_batches(counts, redis, served.clone()));
        if let Some((services, storage, ttl)) = self.uploads {
            tokio::spawn(crate::retention::run(
                services,
                storage,
                ttl,
                shutdown.clone(),
            ));
        }
        // The same header timeout as the public listener, and a few connections: scrapers.
        let metrics = crate::serve::serve(
            self.metrics_listener,
            self.metrics_router,
            ConnectionLimits {
                header_read_timeout: self.connections.header_read_timeout,
                max_connections: METRICS_CONNECTIONS,
                max_per_address: METRICS_CONNECTIONS,
                drain: std::time::Duration::from_secs(1),
            },
            parley_config::Proxies::default(),
            shutdown.clone(),
        );
        tokio::spawn(async move {
            if let Err(err) = metrics.await {
                tracing::error!(%err, "the metrics listener stopped");
            }
        });
        // The operator's listener: the public one's limits, and no proxy believed (it is
        // reached directly, as `kubectl port-forward` does).
        if let Some((listener, router)) = self.admin {
            let admin = crate::serve::serve(
                listener,
                router,
                self.connections,
                parley_config::Proxies::default(),
                shutdown.clone(),
            );
            tokio::spawn(async move {
                if let Err(err) = admin.await {
                    tracing::error!(%err, "the operator API's listener stopped");
                }
            });
        }
        let outcome = crate::serve::serve(
            self.listener,
            self.router,
            self.connections,
            self.proxies,
            shutdown,
        )
        .await;
        served.cancel();
        let _ = counting.await;
        outcome
    }
}

/// The public router and, when the operator API has an address of its own
/// (`PARLEY_ADMIN_ADDR`), the operator's.
pub struct Routers {
    pub public: Router,
    pub admin: Option<Router>,
}

/// What each request passes, outermost first (inside [`layered`]'s):
/// - the API (`/api/v1`): its key or ticket token ([`auth::authenticate`]), its body
///   ([`bodies::read`]), its organization's turn, an in-flight slot, the idempotency key;
/// - receipts: their signature header, their body, an in-flight slot, their own slots and
///   timeout, the signature's check;
/// - unsubscribe links: their address's calls, their token, their body (1 KiB), an in-flight
///   slot, their own slots and timeout;
/// - the operator API: its token, its body, an in-flight slot;
/// - the rest (the document, `/docs`, the operator page): no body ([`bodies::none`]), an
///   in-flight slot.
pub fn router(state: AppState) -> Routers {
    let (api, openapi) =
        crate::routes::api(state.config.max_broadcast_body_bytes).split_for_parts();
    let (signed, signed_doc) = crate::routes::signed().split_for_parts();
    let (admin, admin_doc) = crate::routes::admin::router().split_for_parts();
    let openapi = crate::openapi::document(
        openapi.merge_from(signed_doc).merge_from(admin_doc),
        &Deployment::of(&state.config),
    );
    let slots = InFlight::new(state.config.http.max_in_flight);
    let bodies = Bodies::new(
        state.config.http.bodies,
        state.config.max_body_bytes,
        state.config.metrics_org_label,
    );
    let in_flight = || from_fn_with_state(slots.clone(), guard::in_flight);
    let read_bodies = || from_fn_with_state(bodies.clone(), bodies::read);

    let api = api
        .route_layer(from_fn_with_state(state.clone(), idempotency::idempotency))
        .route_layer(in_flight())
        .route_layer(from_fn_with_state(state.clone(), auth::take_turn))
        .route_layer(read_bodies())
        .route_layer(from_fn_with_state(state.clone(), auth::authenticate));
    let signed = guard::guard(signed, crate::routes::receipts::LIMITS)
        .route_layer(in_flight())
        .route_layer(read_bodies())
        .route_layer(from_fn_with_state(
            state.clone(),
            crate::routes::receipts::signature_first,
        ));
    // The token is the credential: checked before the body is read.
    let unsubscribe = guard::guard(
        crate::routes::unsubscribe::router(),
        crate::routes::unsubscribe::LIMITS,
    )
    .route_layer(in_flight())
    .route_layer(read_bodies())
    .route_layer(from_fn_with_state(
        state.clone(),
        crate::routes::unsubscribe::token_first,
    ))
    .layer(axum::extract::DefaultBodyLimit::max(
        crate::routes::unsubscribe::MAX_BODY_BYTES,
    ));
    let admin = admin
        .route_layer(in_flight())
        .route_layer(read_bodies())
        .route_layer(from_fn_with_state(
            state.clone(),
            crate::middleware::operator_auth::authenticate,
        ))
        .merge(
            crate::admin_page::router()
                .layer(in_flight())
                .layer(from_fn(bodies::none)),
        );
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
    let documents: Router<AppState> = Router::new()
        .route(OPENAPI_PATH, axum::routing::get(serve_document))
        .merge(crate::openapi::docs_page(OPENAPI_PATH))
        .layer(in_flight())
        .layer(from_fn(bodies::none));
    let probes = || {
        health::probes_router(Probes::new(
            state.pool.clone(),
            state.redis.clone(),
            state.metrics.clone(),
            false,
        ))
    };
    let timeout = state.config.http.request_timeout;
    let max_body_bytes = state.config.max_body_bytes;
    let mut public = Router::new()
        .merge(api)
        .merge(signed)
        .merge(unsubscribe)
        .merge(documents);
    let admin = if state.config.http.admin_addr.is_some() {
        Some(layered(
            admin.with_state(state.clone()),
            probes(),
            timeout,
            max_body_bytes,
        ))
    } else {
        public = public.merge(admin);
        None
    };
    Routers {
        public: layered(
            public.with_state(state.clone()),
            probes(),
            timeout,
            max_body_bytes,
        ),
        admin,
    }
}

/// The layers every request passes, outermost first: its id and context (and the log line),
/// the default body limit, the HTTP metrics, the panic catcher; then, for the routes but not
/// the probes, the request timeout. Public so tests can put the same stack over routes of
/// their own.
pub fn layered(
    routes: Router,
    probes: Router,
    request_timeout: std::time::Duration,
    max_body_bytes: usize,
) -> Router {
    let routes = guard::catch_panic(guard::timeout(routes, request_timeout));
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
