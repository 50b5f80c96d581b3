//! Database access: one module per aggregate, small functions over an executor or connection.
//! Handlers and jobs call these; SQL lives nowhere else.

pub mod analytics;
pub mod api_keys;
pub mod broadcasts;
pub mod categories;
pub mod contact_data;
pub mod contacts;
pub mod conversations;
pub mod error;
pub mod faq;
pub mod files;
pub mod idempotency;
pub mod imports;
pub mod leads;
pub mod message_attributes;
pub mod operator;
pub mod org_limits;
pub mod orgs;
pub mod outbox;
pub mod preview;
pub mod receipts;
pub mod refs;
pub mod segments;
pub mod sending;
pub mod sla;
pub mod suppressions;
pub mod tags;
pub mod teams;
pub mod templates;
pub mod tickets;
pub mod topics;
pub mod totals;
pub mod unsubscribe;
pub mod users;
pub mod webhooks;

use std::time::Duration;

use std::borrow::Cow;
use std::collections::HashMap;

use parley_types::list::{Cursor, Keyed, Page, PageRequest, Total};
use parley_types::time::Timestamp;
use sqlx::postgres::PgPoolOptions;
use sqlx::{PgPool, Postgres, QueryBuilder};
use uuid::Uuid;

/// The migrations in `migrations/`, embedded in the binaries.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

/// Every pool's options. sqlx proves a connection alive when the pool hands it out and again
/// when it comes back, a round trip each (docs/decisions.md, "Pool checks").
fn options(max_connections: u32) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(5))
}

/// A pool that connects on first use, so a process starts (and reports not ready) while
/// Postgres is down instead of crashing.
pub fn pool(url: &str, max_connections: u32) -> Result<PgPool, sqlx::Error> {
    options(max_connections).connect_lazy(url)
}

/// The API's pool: no statement outlives the request that runs it (`statement_timeout`, the
/// request timeout; a statement cut short is a 503), and no transaction idles open for long.
pub fn api_pool(
    url: &str,
    max_connections: u32,
    statement_timeout: Duration,
) -> Result<PgPool, sqlx::Error> {
    let connect = api_connect_options(url, statement_timeout)?;
    Ok(options(max_connections)
        // A pooler may drop the startup options without a word (PgBouncer's
        // `ignore_startup_parameters = options`): a connection without a statement timeout
        // is refused, so no statement of a request can run unbounded.
        .after_connect(|conn, _| Box::pin(async move { require_statement_timeout(conn).await }))
        .connect_lazy_with(connect))
}

/// How the API connects: the statement timeout (and twice it for a transaction left idle) as
/// startup options.
fn api_connect_options(
    url: &str,
    statement_timeout: Duration,
) -> Result<sqlx::postgres::PgConnectOptions, sqlx::Error> {
    let options: sqlx::postgres::PgConnectOptions = url.parse()?;
    let statement_ms = statement_timeout.as_millis().to_string();
    let idle_ms = (statement_timeout * 2).as_millis().to_string();
    Ok(options.options([
        ("statement_timeout", statement_ms.as_str()),
        ("idle_in_transaction_session_timeout", idle_ms.as_str()),
    ]))
}

/// Whether the API's connections would carry a statement timeout: one connection made as the
/// pool makes them, checked. `Ok(Some(why))`: no connection could be made (nothing is known
/// yet); `Err`: connected, and no timeout is in force.
pub async fn api_connection_check(
    url: &str,
    statement_timeout: Duration,
) -> Result<Option<sqlx::Error>, sqlx::Error> {
    use sqlx::Connection;
    let options = api_connect_options(url, statement_timeout)?;
    let mut conn = match sqlx::PgConnection::connect_with(&options).await {
        Ok(conn) => conn,
        Err(why) => return Ok(Some(why)),
    };
    let checked = require_statement_timeout(&mut conn).await;
    let _ = conn.close().await;
    checked.map(|()| None)
}

/// Fails unless a statement timeout is in force on `conn` (`SHOW statement_timeout` is not 0).
pub async fn require_statement_timeout(conn: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
    let timeout: Option<String> = sqlx::query_scalar!("SHOW statement_timeout")
        .fetch_one(&mut *conn)
        .await?;
    match timeout.as_deref() {
        Some("0") | None => Err(sqlx::Error::Configuration(
            "statement_timeout is not in force on the API's database connections (a pooler \
             dropped the startup option?): set it on the database role, e.g. ALTER ROLE \
             parley_api SET statement_timeout = '30s' (docs/operations.md, PgBouncer)"
                .into(),
        )),
        Some(_) => Ok(()),
    }
}

/// The worker's pool: commits do not wait for the WAL to reach disk. A Postgres crash may
/// then forget the last few milliseconds of outcomes; those recipients are sent again under
/// the same idempotency key, so the provider still sees each message once.
pub fn worker_pool(url: &str, max_connections: u32) -> Result<PgPool, sqlx::Error> {
    let connect: sqlx::postgres::PgConnectOptions = url.parse()?;
    Ok(
        options(max_connections)
            .connect_lazy_with(connect.options([("synchronous_commit", "off")])),
    )
}

pub async fn migrate(pool: &PgPool) -> Result<(), sqlx::migrate::MigrateError> {
    MIGRATOR.run(pool).await
}

/// Appends the keyset condition (when continuing from a cursor), the order and the limit of
/// `page`. `alias` is the table alias whose `created_at` and `id` order the list.
pub fn push_window(page: &PageRequest, qb: &mut QueryBuilder<Postgres>, alias: &'static str) {
    let (cmp, dir) = if page.descending {
        ("<", "DESC")
    } else {
        (">", "ASC")
    };
    if let Some(c) = &page.cursor {
        qb.push(format_args!(
            " AND ({alias}.created_at, {alias}.id) {cmp} ("
        ))
        .push_bind(c.created_at.0)
        .push(", ")
        .push_bind(c.id)
        .push(")");
    }
    qb.push(format_args!(
        " ORDER BY {alias}.created_at {dir}, {alias}.id {dir} LIMIT "
    ))
    .push_bind(i64::from(page.size) + 1);
    if page.cursor.is_none() {
        qb.push(" OFFSET ")
            .push_bind(i64::from(page.page - 1) * i64::from(page.size));
    }
}

/// The two queries of a list: what to select, from where, and which alias orders it.
pub(crate) struct ListQuery {
    /// `SELECT ... FROM ...` of the rows.
    pub select: Cow<'static, str>,
    /// `FROM ...` for the count (without joins the count does not need).
    pub count_from: &'static str,
    /// The alias whose `created_at` and `id` order and window the list.
    pub alias: &'static str,
}

/// The rows `filter` keeps of `from`, counted up to [`EXACT_TOTAL_UP_TO`] + 1: what a page
/// costs stays flat however large the table (the count stops past the bound).
pub(crate) async fn count_up_to_bound(
    pool: &PgPool,
    from: &str,
    filter: &impl Fn(&mut sqlx::QueryBuilder<sqlx::Postgres>),
) -> Result<i64, sqlx::Error> {
    let mut count = sqlx::QueryBuilder::new(format!("SELECT count(*) FROM (SELECT 1 {from}"));
    filter(&mut count);
    count
        .push(" LIMIT ")
        .push_bind(parley_types::list::EXACT_TOTAL_UP_TO + 1)
        .push(") bounded");
    count.build_query_scalar().fetch_one(pool).await
}

/// One page of a list: counts the filtered rows and reads the window `req` asks for. `filter`
/// appends the same `WHERE ...` to both queries.
pub(crate) async fn page<T>(
    pool: &PgPool,
    q: ListQuery,
    filter: impl Fn(&mut sqlx::QueryBuilder<sqlx::Postgres>),
    req: &parley_types::list::PageRequest,
) -> Result<parley_types::list::Page<T>, sqlx::Error>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> + Send + Unpin + parley_types::list::Keyed,
{
    let total = Total::Counted(count_up_to_bound(pool, q.count_from, &filter).await?);
    let mut rows = sqlx::QueryBuilder::new(q.select);
    filter(&mut rows);
    push_window(req, &mut rows, q.alias);
    let rows: Vec<T> = rows.build_query_as().fetch_all(pool).await?;
    Ok(parley_types::list::Page::new(rows, req, total))
}

/// What orders a listed row and identifies it.
#[derive(sqlx::FromRow)]
pub(crate) struct Key {
    id: Uuid,
    created_at: Timestamp,
}

impl Keyed for Key {
    fn cursor(&self) -> Cursor {
        Cursor {
            created_at: self.created_at,
            id: self.id,
        }
    }
}

/// One page of a list whose rows are read by a checked statement: the dynamic filter picks
/// the page's ids (`SELECT <alias>.id, <alias>.created_at <from> ...`), then `read` reads
/// their rows, which come back in the page's order.
pub(crate) async fn page_of<T, F>(
    pool: &PgPool,
    from: &'static str,
    alias: &'static str,
    filter: impl Fn(&mut sqlx::QueryBuilder<sqlx::Postgres>),
    req: &PageRequest,
    read: impl FnOnce(Vec<Uuid>) -> F,
) -> Result<Page<T>, sqlx::Error>
where
    T: Keyed,
    F: Future<Output = Result<Vec<T>, sqlx::Error>>,
{
    let keys: Page<Key> = page(
        pool,
        ListQuery {
            select: format!("SELECT {alias}.id, {alias}.created_at {from}").into(),
            count_from: from,
            alias,
        },
        filter,
        req,
    )
    .await?;
    keys.read(|keys| async move {
        let ids: Vec<Uuid> = keys.iter().map(|k| k.id).collect();
        let mut rows: HashMap<Uuid, T> = read(ids.clone())
            .await?
            .into_iter()
            .map(|r| (r.cursor().id, r))
            .collect();
        Ok(ids.iter().filter_map(|id| rows.remove(id)).collect())
    })
    .await
}
