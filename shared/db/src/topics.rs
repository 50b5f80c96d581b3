//! Subscription topics and each contact's unsubscribes from them. What a send reads of them is
//! in `sending::send_job`.

use parley_domain::Channel;
use parley_domain::topics::{ChannelSubscription, Topic, TopicPreference, TopicSource};
use parley_types::ids::{ContactId, OrgId, TopicId};
use parley_types::list::{Page, PageRequest};
use parley_types::time::Timestamp;
use sqlx::{PgConnection, PgExecutor, PgPool};

use super::ListQuery;

pub async fn insert(db: impl PgExecutor<'_>, t: &Topic) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO topics (id, organization_id, name, description, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6)",
        t.id as _,
        t.organization_id as _,
        &t.name,
        t.description.as_deref(),
        t.created_at,
        t.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn update(db: impl PgExecutor<'_>, t: &Topic) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE topics SET name = $3, description = $4, updated_at = $5
         WHERE organization_id = $1 AND id = $2",
        t.organization_id as _,
        t.id as _,
        &t.name,
        t.description.as_deref(),
        t.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

/// The organization's topics, counted under a lock on the organization's row: two creations
/// at once cannot both pass the limit.
pub async fn count_locked(conn: &mut PgConnection, org: OrgId) -> Result<i64, sqlx::Error> {
    sqlx::query!(
        "SELECT id FROM organizations WHERE id = $1 FOR NO KEY UPDATE",
        org as _
    )
    .fetch_optional(&mut *conn)
    .await?;
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM topics WHERE organization_id = $1"#,
        org as _,
    )
    .fetch_one(conn)
    .await
}

pub async fn get(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: TopicId,
    lock: bool,
) -> Result<Option<Topic>, sqlx::Error> {
    let topic = if lock {
        sqlx::query_as!(
            Topic,
            "SELECT * FROM topics WHERE organization_id = $1 AND id = $2 FOR NO KEY UPDATE",
            org as _,
            id as _,
        )
        .fetch_optional(db)
        .await?
    } else {
        sqlx::query_as!(
            Topic,
            "SELECT * FROM topics WHERE organization_id = $1 AND id = $2",
            org as _,
            id as _,
        )
        .fetch_optional(db)
        .await?
    };
    Ok(topic)
}

pub async fn list(
    pool: &PgPool,
    org: OrgId,
    page: &PageRequest,
) -> Result<Page<Topic>, sqlx::Error> {
    let q = ListQuery {
        select: "SELECT t.* FROM topics t".into(),
        count_from: "FROM topics t",
        alias: "t",
    };
    super::page(
        pool,
        q,
        |qb| {
            qb.push(" WHERE t.organization_id = ").push_bind(org);
        },
        page,
    )
    .await
}

/// Deletes a topic no broadcast names (else the foreign key refuses: 409), with its
/// contacts' unsubscribes.
pub async fn delete(db: impl PgExecutor<'_>, org: OrgId, id: TopicId) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM topics WHERE organization_id = $1 AND id = $2",
        org as _,
        id as _,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Every topic of the organization (oldest first, at most `MAX_TOPICS`), with `contact`'s
/// preference for each.
pub async fn preferences(
    db: impl PgExecutor<'_>,
    org: OrgId,
    contact: ContactId,
) -> Result<Vec<TopicPreference>, sqlx::Error> {
    sqlx::query_as!(
        TopicPreference,
        r#"SELECT t.id AS "topic_id: TopicId", t.name, u.contact_id IS NULL AS "subscribed!",
            u.source AS "source?: TopicSource", u.created_at AS "unsubscribed_at?: Timestamp"
         FROM topics t
         LEFT JOIN topic_unsubscribes u ON u.topic_id = t.id AND u.contact_id = $2
         WHERE t.organization_id = $1
         ORDER BY t.created_at, t.id
         LIMIT $3"#,
        org as _,
        contact as _,
        parley_domain::topics::MAX_TOPICS as i64,
    )
    .fetch_all(db)
    .await
}

/// Whether an `unsubscribed` entry of the ledger holds `contact`'s marketing, channel by
/// channel (by the contact, its email, its phone, or the hash an erasure kept of one of them
/// or of its external id; an entry for every channel counts on each).
pub async fn channel_unsubscribes(
    db: impl PgExecutor<'_>,
    org: OrgId,
    contact: ContactId,
) -> Result<Vec<ChannelSubscription>, sqlx::Error> {
    let channels: Vec<&str> = Channel::ALL.iter().map(|c| c.as_str()).collect();
    sqlx::query_as!(
        ChannelSubscription,
        r#"SELECT c.channel AS "channel!: Channel",
            EXISTS (SELECT 1 FROM suppressions s
                    WHERE s.organization_id = $1 AND s.reason = 'unsubscribed'
                      AND (s.channel IS NULL OR s.channel = c.channel)
                      AND (s.contact_id = k.id OR s.email = lower(k.email) OR s.phone = k.phone
                           OR s.address_hash = ANY (ARRAY[address_hash($1, k.email),
                                                          address_hash($1, k.phone),
                                                          address_hash($1, k.external_id)])))
                AS "unsubscribed!"
         FROM contacts k, unnest($3::text[]) WITH ORDINALITY AS c(channel, n)
         WHERE k.organization_id = $1 AND k.id = $2
         ORDER BY c.n"#,
        org as _,
        contact as _,
        &channels as &[&str],
    )
    .fetch_all(db)
    .await
}

/// Unsubscribes `contact` from `topics` (each the organization's); a topic it is unsubscribed
/// from already keeps its first row. The topics newly unsubscribed.
pub async fn unsubscribe(
    db: impl PgExecutor<'_>,
    org: OrgId,
    contact: ContactId,
    topics: &[TopicId],
    source: TopicSource,
) -> Result<Vec<TopicId>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"INSERT INTO topic_unsubscribes (organization_id, contact_id, topic_id, source)
         SELECT $1, $2, t.id, $4 FROM topics t
         WHERE t.organization_id = $1 AND t.id = ANY($3)
         ORDER BY t.id
         ON CONFLICT (contact_id, topic_id) DO NOTHING
         RETURNING topic_id AS "topic_id: TopicId""#,
        org as _,
        contact as _,
        topics as _,
        source.as_str(),
    )
    .fetch_all(db)
    .await
}

/// Subscribes `contact` to `topics` again.
pub async fn resubscribe(
    db: impl PgExecutor<'_>,
    org: OrgId,
    contact: ContactId,
    topics: &[TopicId],
) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM topic_unsubscribes
         WHERE organization_id = $1 AND contact_id = $2 AND topic_id = ANY($3)",
        org as _,
        contact as _,
        topics as _,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}
