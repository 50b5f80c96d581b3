use parley_types::ids::{OrgId, TemplateId};
use sqlx::PgPool;

use parley_domain::Channel;
use parley_domain::analytics::{DailyFigures, TemplateAnalytics, Totals};

/// Analytics of a template: sums of its broadcasts' counters (for an A/B broadcast, those of
/// the variants sent with this template) and its daily figures; both read precomputed rows, so
/// the cost does not grow with recipients.
pub async fn template(
    pool: &PgPool,
    org: OrgId,
    template: TemplateId,
    channel: Option<Channel>,
) -> Result<TemplateAnalytics, sqlx::Error> {
    let channel_text = channel.map(|c| c.as_str());
    let totals: Totals = sqlx::query_as!(
        Totals,
        r#"WITH figures AS (
            SELECT b.id AS broadcast_id, b.started_at, k.total, k.sent, k.delivered, k.read,
                k.replied, k.failed
            FROM broadcasts b LEFT JOIN broadcast_totals k ON k.broadcast_id = b.id
            WHERE b.organization_id = $1 AND b.template_id = $2 AND b.ab_test IS NULL
              AND ($3::text IS NULL OR b.channel = $3)
            UNION ALL
            SELECT b.id, b.started_at, k.total, k.sent, k.delivered, k.read, k.replied, k.failed
            FROM broadcast_variants v JOIN broadcasts b ON b.id = v.broadcast_id
            LEFT JOIN LATERAL (
                SELECT sum(c.total) AS total, sum(c.sent) AS sent, sum(c.delivered) AS delivered,
                    sum(c.read) AS read, sum(c.replied) AS replied, sum(c.failed) AS failed
                FROM broadcast_variant_counters c
                WHERE c.broadcast_id = v.broadcast_id AND c.variant_no = v.variant_no) k ON true
            WHERE v.organization_id = $1 AND v.template_id = $2
              AND ($3::text IS NULL OR b.channel = $3))
         SELECT count(DISTINCT broadcast_id) FILTER (WHERE started_at IS NOT NULL) AS "broadcast_count!",
                coalesce(sum(total), 0)::int8 AS "total_recipients!",
                coalesce(sum(sent), 0)::int8 AS "sent_count!",
                coalesce(sum(delivered), 0)::int8 AS "delivered_count!",
                coalesce(sum(read), 0)::int8 AS "read_count!",
                coalesce(sum(replied), 0)::int8 AS "replied_count!",
                coalesce(sum(failed), 0)::int8 AS "failed_count!",
                max(started_at) FILTER (WHERE sent > 0) AS last_sent_at
         FROM figures"#,
        org.uuid(),
        template.uuid(),
        channel_text,
    )
    .fetch_one(pool)
    .await?;
    let daily: Vec<DailyFigures> = sqlx::query_as!(
        DailyFigures,
        r#"SELECT to_char(day, 'YYYY-MM-DD') AS "date!", sum(sent)::int8 AS "sent!",
                sum(delivered)::int8 AS "delivered!", sum(read)::int8 AS "read!",
                sum(failed)::int8 AS "failed!"
         FROM template_daily_stats
         WHERE template_id = $1 AND organization_id = $2 AND ($3::text IS NULL OR channel = $3)
         GROUP BY day ORDER BY day"#,
        template.uuid(),
        org.uuid(),
        channel_text,
    )
    .fetch_all(pool)
    .await?;
    Ok(TemplateAnalytics::new(
        template.uuid(),
        channel,
        totals,
        daily,
    ))
}
