//! Unsubscribe links' statements: the keys that sign them, what a link's page shows, its
//! removal of `unsubscribed` entries, and its count on the broadcast.

use parley_domain::unsubscribe::{
    KEY_WARM_UP_SECS, SECRET_BYTES, Subscription, UnsubscribeKey, UnsubscribeToken,
};
use parley_types::ids::TopicId;
use sqlx::{PgConnection, PgExecutor, PgPool};

/// Every key; `warm` by the database's clock (every process's read of the keys is at most a
/// minute old by then).
pub async fn keys(pool: &PgPool) -> Result<Vec<UnsubscribeKey>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT id, secret, created_at,
                created_at + make_interval(secs => $1) <= statement_timestamp() AS "warm!"
         FROM unsubscribe_keys ORDER BY id"#,
        KEY_WARM_UP_SECS as f64,
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            Some(UnsubscribeKey {
                id: u8::try_from(r.id).ok()?,
                secret: <[u8; SECRET_BYTES]>::try_from(r.secret.as_slice()).ok()?,
                created_at: r.created_at,
                warm: r.warm,
            })
        })
        .collect())
}

/// Adds a key: `id`, unless taken; with none, the next id (while one is left). Returns its id,
/// or `None` when none was added.
pub async fn add_key(
    pool: &PgPool,
    id: Option<u8>,
    secret: &[u8; SECRET_BYTES],
) -> Result<Option<u8>, sqlx::Error> {
    let added = sqlx::query_scalar!(
        "INSERT INTO unsubscribe_keys (id, secret)
         SELECT coalesce($1, (SELECT coalesce(max(id), 0) + 1 FROM unsubscribe_keys)), $2
         WHERE coalesce($1, (SELECT coalesce(max(id), 0) + 1 FROM unsubscribe_keys)) <= 255
         ON CONFLICT (id) DO NOTHING
         RETURNING id",
        id.map(i32::from),
        secret.as_slice(),
    )
    .fetch_optional(pool)
    .await?;
    Ok(added.and_then(|id| u8::try_from(id).ok()))
}

/// What `t`'s page shows: the organization's name, whether its contact unsubscribed on the
/// link's channel through a link (an `unsubscribed` entry from source `unsubscribe` for that
/// channel, by the contact, its email or its phone, or an erasure's hash of one of them or of
/// its external id), and whether anything else keeps
/// marketing from it there (another entry, an erased contact's included, or `doNotContact`);
/// `None` when the organization is gone.
pub async fn lookup(
    pool: &PgPool,
    t: &UnsubscribeToken,
) -> Result<Option<Subscription>, sqlx::Error> {
    let row = sqlx::query!(
        r#"SELECT o.name, k.id IS NULL AS "contact_deleted!",
            EXISTS (SELECT 1 FROM suppressions s
                    WHERE s.organization_id = o.id AND s.reason = 'unsubscribed'
                      AND s.source = 'unsubscribe' AND s.channel = $3
                      AND (s.contact_id = k.id OR s.email = lower(k.email) OR s.phone = k.phone
                           OR s.address_hash = ANY (ARRAY[address_hash(o.id, k.email),
                                                          address_hash(o.id, k.phone),
                                                          address_hash(o.id, k.external_id)])))
                AS "unsubscribed!",
            coalesce(k.do_not_contact, false)
            OR ($3 = 'messaging_a' AND coalesce(k.messaging_a_opted_out, false))
            OR EXISTS (SELECT 1 FROM suppressions s
                    WHERE s.organization_id = o.id
                      AND NOT (s.reason = 'unsubscribed' AND s.source = 'unsubscribe'
                               AND s.channel IS NOT DISTINCT FROM $3)
                      AND (s.channel IS NULL OR s.channel = $3)
                      AND (s.contact_id = k.id OR s.email = lower(k.email) OR s.phone = k.phone
                           OR s.address_hash = ANY (ARRAY[address_hash(o.id, k.email),
                                                          address_hash(o.id, k.phone),
                                                          address_hash(o.id, k.external_id)])))
                AS "held_otherwise!",
            (SELECT b.topic_id FROM broadcasts b WHERE b.organization_id = o.id AND b.id = $4)
                AS "topic: TopicId"
         FROM organizations o
         LEFT JOIN contacts k ON k.organization_id = o.id AND k.id = $2
         WHERE o.id = $1"#,
        t.organization_id as _,
        t.contact_id as _,
        t.channel.as_str(),
        t.broadcast_id as _,
    )
    .fetch_optional(pool)
    .await?;
    let Some(r) = row else { return Ok(None) };
    let topics = crate::topics::preferences(pool, t.organization_id, t.contact_id).await?;
    Ok(Some(Subscription {
        organization_name: r.name,
        channel: t.channel,
        unsubscribed: r.unsubscribed,
        held_otherwise: r.held_otherwise,
        contact_deleted: r.contact_deleted,
        topic: r.topic,
        topics,
    }))
}

/// Removes the `unsubscribed` entries links made for `t`'s contact on its channel (by the
/// contact, its email or its phone, or an erasure's hash of one of them or of its external
/// id); entries from elsewhere (the API, an import) and for every channel stay.
pub async fn remove(db: impl PgExecutor<'_>, t: &UnsubscribeToken) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM suppressions s USING contacts k
         WHERE k.organization_id = $1 AND k.id = $2
           AND s.organization_id = $1 AND s.reason = 'unsubscribed'
           AND s.source = 'unsubscribe' AND s.channel = $3
           AND (s.contact_id = k.id OR s.email = lower(k.email) OR s.phone = k.phone
                OR s.address_hash = ANY (ARRAY[address_hash($1, k.email),
                                               address_hash($1, k.phone),
                                               address_hash($1, k.external_id)]))",
        t.organization_id as _,
        t.contact_id as _,
        t.channel.as_str(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Counts `t`'s contact as unsubscribed through its broadcast (if the broadcast still exists),
/// once: `true` the first time.
pub async fn count(conn: &mut PgConnection, t: &UnsubscribeToken) -> Result<bool, sqlx::Error> {
    let first = sqlx::query!(
        "INSERT INTO broadcast_unsubscribes (organization_id, broadcast_id, contact_id)
         SELECT b.organization_id, b.id, $3 FROM broadcasts b
         WHERE b.organization_id = $1 AND b.id = $2
         ON CONFLICT DO NOTHING",
        t.organization_id as _,
        t.broadcast_id as _,
        t.contact_id as _,
    )
    .execute(&mut *conn)
    .await?
    .rows_affected()
        == 1;
    if first {
        sqlx::query!(
            "INSERT INTO broadcast_counters AS k (organization_id, broadcast_id, shard, unsubscribed)
             VALUES ($1, $2, counter_shard(), 1)
             ON CONFLICT (broadcast_id, shard) DO UPDATE SET unsubscribed = k.unsubscribed + 1",
            t.organization_id as _,
            t.broadcast_id as _,
        )
        .execute(conn)
        .await?;
    }
    Ok(first)
}
