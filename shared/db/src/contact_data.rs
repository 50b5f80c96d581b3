//! A contact's data on request: what its export reads that no list does, and the statements of
//! its erasure (docs/api.md, "A contact's data").

use parley_domain::Channel;
use parley_domain::suppressions::{Suppression, SuppressionReason, SuppressionSource};
use parley_types::ids::{ContactId, OrgId};
use parley_types::time::Timestamp;
use sqlx::{PgConnection, PgExecutor};

/// The ledger's entries that name `contact` or one of `addresses` (compared lowercase), or
/// the hash an erasure kept of one; oldest first, up to `n`.
pub async fn ledger_entries(
    db: impl PgExecutor<'_>,
    org: OrgId,
    contact: ContactId,
    addresses: &[String],
    n: i64,
) -> Result<Vec<Suppression>, sqlx::Error> {
    sqlx::query_as!(
        Suppression,
        r#"WITH addresses AS (SELECT DISTINCT lower(a) AS address FROM unnest($3::text[]) a)
         SELECT id, organization_id, email, phone, contact_id,
                address_hash IS NOT NULL AS "erased!",
                channel AS "channel: Channel", reason AS "reason: SuppressionReason",
                source AS "source: SuppressionSource", created_at
         FROM suppressions s
         WHERE s.organization_id = $1
           AND (s.contact_id = $2
                OR s.email = ANY (ARRAY(SELECT address FROM addresses))
                OR s.phone = ANY (ARRAY(SELECT address FROM addresses))
                OR s.address_hash = ANY (ARRAY(SELECT address_hash($1, address) FROM addresses)))
         ORDER BY s.created_at, s.id
         LIMIT $4"#,
        org as _,
        contact as _,
        addresses,
        n,
    )
    .fetch_all(db)
    .await
}

/// Waits for any other erasure of the organization, for the rest of the transaction: two
/// contacts sharing an address, erased at once, would each see the other still holding it,
/// and neither would erase it.
pub async fn serialize_erasures(conn: &mut PgConnection, org: OrgId) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "SELECT pg_advisory_xact_lock(hashtext('parley.erasure'), hashtext($1::uuid::text))",
        org as _,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Of `own` (the contact's addresses) and `sent` (those its messages went to), lowercase and
/// each once, those no other contact of the organization has (an email, a phone or an
/// external id of another contact is that contact's data), each with whether it is the
/// contact's own. Each address is looked up by the index of its column.
pub async fn erasable(
    db: impl PgExecutor<'_>,
    org: OrgId,
    contact: ContactId,
    own: &[&str],
    sent: &[String],
) -> Result<Vec<(String, bool)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT c.address AS "address!", c.own AS "own!"
         FROM (SELECT lower(a) AS address, bool_or(o) AS own
               FROM (SELECT a, true FROM unnest($3::text[]) a
                     UNION ALL SELECT a, false FROM unnest($4::text[]) a) u(a, o)
               WHERE a <> '' GROUP BY lower(a)) c
         WHERE NOT EXISTS (SELECT 1 FROM contacts k
                           WHERE k.organization_id = $1 AND lower(k.email) = c.address
                             AND k.id <> $2)
           AND NOT EXISTS (SELECT 1 FROM contacts k
                           WHERE k.organization_id = $1 AND k.phone = c.address
                             AND k.id <> $2)
           AND NOT EXISTS (SELECT 1 FROM contacts k
                           WHERE k.organization_id = $1 AND lower(k.external_id) = c.address
                             AND k.external_id IS NOT NULL AND k.id <> $2)
         ORDER BY c.address"#,
        org as _,
        contact as _,
        own as &[&str],
        sent,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.address, r.own)).collect())
}

/// The distinct addresses `contact`'s messages went to (`sent_to`).
pub async fn sent_addresses(
    db: impl PgExecutor<'_>,
    org: OrgId,
    contact: ContactId,
) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT DISTINCT sent_to AS "sent_to!" FROM broadcast_recipients
         WHERE contact_id = $2 AND organization_id = $1 AND sent_to IS NOT NULL"#,
        org as _,
        contact as _,
    )
    .fetch_all(db)
    .await
}

/// Takes the addresses out of `contact`'s recipient records: the address each went to, and a
/// provider's error that quotes one of `addresses`; a record still `pending` or `held` ends
/// `skipped` (`contact_deleted`, as the send would skip it), so that a send job that decided
/// it before cannot record its address after. The rows are locked first, in the order
/// receipts lock them (by id), and before the ledger changes, so a receipt that bounces one of
/// these messages either commits first (and its entry is hashed) or finds no address.
pub async fn unrecord(
    conn: &mut PgConnection,
    org: OrgId,
    contact: ContactId,
    addresses: &[String],
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "SELECT id FROM broadcast_recipients WHERE contact_id = $2 AND organization_id = $1
         ORDER BY id FOR UPDATE",
        org as _,
        contact as _,
    )
    .fetch_all(&mut *conn)
    .await?;
    sqlx::query!(
        "UPDATE broadcast_recipients r SET sent_to = NULL,
            error_message = CASE
                WHEN r.status IN ('pending', 'held') THEN 'the contact was erased'
                WHEN EXISTS (SELECT 1 FROM unnest($3::text[]) a
                             WHERE a <> '' AND strpos(lower(r.error_message), lower(a)) > 0)
                THEN NULL ELSE r.error_message END,
            error_code = CASE WHEN r.status IN ('pending', 'held') THEN 'contact_deleted'
                              ELSE r.error_code END,
            hold_until = CASE WHEN r.status = 'held' THEN NULL ELSE r.hold_until END,
            status = CASE WHEN r.status IN ('pending', 'held') THEN 'skipped' ELSE r.status END
         WHERE r.contact_id = $2 AND r.organization_id = $1",
        org as _,
        contact as _,
        addresses,
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Keeps `contact`'s erasable addresses ([`erasable`]: each with whether it is the contact's
/// own) in the ledger as hashes only. Every entry naming the contact or one of them is
/// replaced by the same entry (channel, reason, source, time) naming the address's hash, an
/// entry naming the contact by each of its own; and each gets an `erased` entry for every
/// channel, from source `api` at `now`. Returns the entries written.
pub async fn hash_ledger(
    conn: &mut PgConnection,
    org: OrgId,
    contact: ContactId,
    erasable: &[(String, bool)],
    now: Timestamp,
) -> Result<i64, sqlx::Error> {
    let addresses: Vec<&str> = erasable.iter().map(|(a, _)| a.as_str()).collect();
    let own: Vec<bool> = erasable.iter().map(|(_, o)| *o).collect();
    sqlx::query_scalar!(
        r#"WITH erased AS (
                SELECT address, own FROM unnest($3::text[], $4::bool[]) AS e(address, own)),
            old AS (
                DELETE FROM suppressions s
                WHERE s.organization_id = $1
                  AND (s.contact_id = $2
                       OR s.email = ANY ($3::text[]) OR s.phone = ANY ($3::text[]))
                RETURNING s.email, s.phone, s.contact_id, s.channel, s.reason, s.source,
                          s.created_at),
            kept AS (
                SELECT coalesce(o.email, o.phone) AS address, o.channel, o.reason, o.source,
                       o.created_at
                FROM old o WHERE o.contact_id IS NULL
                UNION ALL
                SELECT e.address, o.channel, o.reason, o.source, o.created_at
                FROM old o CROSS JOIN erased e WHERE o.contact_id IS NOT NULL AND e.own
                UNION ALL
                SELECT e.address, NULL::text, 'erased'::text, 'api'::text, $5::timestamptz
                FROM erased e),
            written AS (
                INSERT INTO suppressions
                    (id, organization_id, address_hash, channel, reason, source, created_at)
                SELECT uuid_v7(), $1, address_hash($1, k.address), k.channel, k.reason,
                       k.source, k.created_at
                FROM kept k
                ON CONFLICT (organization_id, address_hash, (coalesce(channel, '')), reason)
                    WHERE address_hash IS NOT NULL DO NOTHING
                RETURNING 1)
         SELECT count(*) AS "entries!" FROM written"#,
        org as _,
        contact as _,
        &addresses as &[&str],
        &own as &[bool],
        now as _,
    )
    .fetch_one(conn)
    .await
}

/// Removes what names `contact` or one of its erased `addresses` (lowercase) outside its own
/// rows, which go with it: the soft bounces counted against them (their subjects lowercased
/// by Rust: `folded` holds each of `originals` so, and a subject goes when its original is
/// erased), the leads converted into it or holding one of them, and the tickets it is the
/// customer of (with their replies, attachments' links and SLA states).
pub async fn forget(
    conn: &mut PgConnection,
    org: OrgId,
    contact: ContactId,
    addresses: &[String],
    originals: &[String],
    folded: &[String],
) -> Result<(), sqlx::Error> {
    let channels: Vec<&str> = Channel::ALL.iter().map(|c| c.as_str()).collect();
    sqlx::query!(
        "DELETE FROM soft_bounces
         WHERE organization_id = $1 AND channel = ANY ($6)
           AND subject = ANY ($3::text[] || $2::uuid::text
                             || ARRAY(SELECT u.f FROM unnest($4::text[], $5::text[]) u(a, f)
                                      WHERE lower(u.a) = ANY ($3)))",
        org as _,
        contact as _,
        addresses,
        originals,
        folded,
        &channels as &[&str],
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "DELETE FROM leads l
         WHERE l.organization_id = $1
           AND (l.contact_id = $2 OR lower(l.email) = ANY ($3) OR l.phone = ANY ($3))",
        org as _,
        contact as _,
        addresses,
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "DELETE FROM tickets WHERE organization_id = $1 AND customer_id = $2",
        org as _,
        contact as _,
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}
