//! What a preview of a send reads: a broadcast's audience a page at a time, each contact with
//! what the send's rule needs of it, as the send job reads a recipient
//! (`sending::send_job::pending_for_send`: the same columns and the same suppression rule).

use parley_domain::Channel;
use parley_domain::ab_tests::AbSettings;
use parley_domain::segments::SegmentFilter;
use parley_domain::sending::Claimed;
use parley_domain::suppressions::SuppressionReason;
use parley_types::ids::{BroadcastId, ContactId, OrgId, RecipientId, TopicId};
use sqlx::PgConnection;
use sqlx::types::Json;
use uuid::Uuid;

/// Whom a broadcast would send to: its contacts as named, or its segment's filter.
pub enum Audience {
    Contacts(Vec<Uuid>),
    Segment(SegmentFilter),
}

/// A broadcast's audience and its A/B test, as a preview reads them.
pub struct Previewed {
    pub audience: Audience,
    /// An A/B broadcast's settings, and its variants' names (A first).
    pub ab: Option<(AbSettings, Vec<String>)>,
}

/// A broadcast's audience: its `contactIds`, or its segment's filter (as the fan-out reads it:
/// the one it kept, else the segment's now);
/// and its A/B test. `None` when the organization has no such broadcast.
pub async fn audience(
    conn: &mut PgConnection,
    org: OrgId,
    id: BroadcastId,
) -> Result<Option<Previewed>, sqlx::Error> {
    let row = sqlx::query!(
        r#"SELECT b.contact_ids, b.segment_id IS NOT NULL AS "segment!",
            coalesce(b.audience_filter, s.filter) AS "filter: Json<SegmentFilter>",
            b.ab_test AS "ab_test: Json<AbSettings>",
            (SELECT array_agg(v.name ORDER BY v.variant_no) FROM broadcast_variants v
             WHERE v.broadcast_id = b.id) AS "variants: Vec<String>"
         FROM broadcasts b LEFT JOIN segments s ON s.id = b.segment_id
         WHERE b.organization_id = $1 AND b.id = $2"#,
        org as _,
        id as _,
    )
    .fetch_optional(conn)
    .await?;
    let Some(r) = row else { return Ok(None) };
    let audience = match (r.segment, r.filter) {
        (false, _) => Audience::Contacts(r.contact_ids),
        (true, Some(Json(filter))) => Audience::Segment(filter),
        // The segment cannot be deleted while a broadcast names it (as the fan-out says).
        (true, None) => {
            return Err(sqlx::Error::Protocol(format!(
                "broadcast {id} names no segment filter"
            )));
        }
    };
    Ok(Some(Previewed {
        audience,
        ab: r
            .ab_test
            .map(|Json(settings)| (settings, r.variants.unwrap_or_default())),
    }))
}

/// The next `limit` contacts of a segment's filter after `after`, by id (as the fan-out walks
/// it).
pub async fn segment_page(
    conn: &mut PgConnection,
    org: OrgId,
    filter: &SegmentFilter,
    after: Option<Uuid>,
    limit: i64,
) -> Result<Vec<Uuid>, sqlx::Error> {
    crate::segments::contacts_after(conn, org, filter, after, limit).await
}

/// `ids`' contacts, in their order, as a send job reads its recipients: a contact not (or no
/// longer) the organization's has no `contact_id` (the send skips it as deleted). Each is
/// given the contact's id as its recipient id (a preview writes no recipient).
pub async fn as_claimed(
    conn: &mut PgConnection,
    org: OrgId,
    ids: &[Uuid],
    channel: Channel,
    reasons: &[SuppressionReason],
    topic: Option<TopicId>,
) -> Result<Vec<(ContactId, Claimed)>, sqlx::Error> {
    let reasons: Vec<&str> = reasons.iter().map(|r| r.as_str()).collect();
    let rows = sqlx::query!(
        r#"SELECT u.id AS "named!",
                k.id AS "contact_id?: ContactId", k.name AS "name?", k.email AS "email?", k.phone AS "phone?",
                k.country AS "country?", k.language AS "language?", k.position AS "position?",
                k.external_id AS "external_id?", co.name AS "company_name?",
                k.do_not_contact AS "do_not_contact?",
                k.messaging_a_opted_out AS "messaging_a_opted_out?", k.timezone AS "timezone?",
                (SELECT s.reason FROM suppressions s
                 WHERE s.organization_id = $1 AND (s.channel IS NULL OR s.channel = $3)
                   AND s.reason = ANY($4)
                   AND (s.contact_id = k.id OR s.email = lower(k.email) OR s.phone = k.phone
                        OR s.address_hash = ANY (ARRAY[address_hash($1, k.email),
                                                       address_hash($1, k.phone),
                                                       address_hash($1, k.external_id)]))
                 ORDER BY array_position($4, s.reason) LIMIT 1)
                   AS "suppressed?: SuppressionReason",
                EXISTS (SELECT 1 FROM topic_unsubscribes tu
                        WHERE tu.contact_id = k.id AND tu.topic_id = $5) AS "topic_unsubscribed!"
         FROM unnest($2::uuid[]) WITH ORDINALITY AS u(id, n)
         LEFT JOIN contacts k ON k.id = u.id AND k.organization_id = $1
         LEFT JOIN companies co ON co.id = k.company_id
         ORDER BY u.n"#,
        org as _,
        ids,
        channel.as_str(),
        &reasons as &[&str],
        topic as _,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let named = ContactId::from(r.named);
            let claimed = Claimed {
                id: RecipientId::from(r.named),
                contact_id: r.contact_id,
                name: r.name,
                email: r.email,
                phone: r.phone,
                country: r.country,
                language: r.language,
                position: r.position,
                external_id: r.external_id,
                company_name: r.company_name,
                do_not_contact: r.do_not_contact,
                messaging_a_opted_out: r.messaging_a_opted_out,
                timezone: r.timezone,
                send_generation: 0,
                variant_no: None,
                suppressed: r.suppressed,
                topic_unsubscribed: r.topic_unsubscribed,
            };
            (named, claimed)
        })
        .collect())
}
