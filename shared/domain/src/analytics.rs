//! Template analytics, from the broadcasts' counters and the daily figures.

use serde::Serialize;
use uuid::Uuid;

use crate::Channel;
use parley_types::time::Timestamp;

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TemplateAnalytics {
    pub template_id: Uuid,
    /// The `?channel=` asked for; absent for all channels.
    pub channel: Option<Channel>,
    /// Broadcasts of this template that started sending.
    pub broadcast_count: i64,
    pub total_recipients: i64,
    pub sent_count: i64,
    pub delivered_count: i64,
    pub read_count: i64,
    pub replied_count: i64,
    pub failed_count: i64,
    /// `deliveredCount / sentCount`; 0 when nothing was sent.
    pub delivery_rate: f64,
    /// `readCount / sentCount`.
    pub read_rate: f64,
    /// `repliedCount / sentCount`.
    pub reply_rate: f64,
    /// `failedCount / (sentCount + failedCount)`; 0 when nothing was attempted.
    pub failure_rate: f64,
    /// When the latest of these broadcasts that sent anything started sending.
    pub last_sent_at: Option<Timestamp>,
    /// Per UTC day: messages that reached each milestone that day.
    pub daily: Vec<DailyFigures>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DailyFigures {
    /// `YYYY-MM-DD` (UTC).
    pub date: String,
    pub sent: i64,
    pub delivered: i64,
    pub read: i64,
    pub failed: i64,
}

#[derive(Debug, Clone, Default)]
pub struct Totals {
    pub broadcast_count: i64,
    pub total_recipients: i64,
    pub sent_count: i64,
    pub delivered_count: i64,
    pub read_count: i64,
    pub replied_count: i64,
    pub failed_count: i64,
    pub last_sent_at: Option<Timestamp>,
}

fn rate(part: i64, whole: i64) -> f64 {
    if whole <= 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

impl TemplateAnalytics {
    pub fn new(
        template_id: Uuid,
        channel: Option<Channel>,
        t: Totals,
        daily: Vec<DailyFigures>,
    ) -> Self {
        TemplateAnalytics {
            template_id,
            channel,
            broadcast_count: t.broadcast_count,
            total_recipients: t.total_recipients,
            sent_count: t.sent_count,
            delivered_count: t.delivered_count,
            read_count: t.read_count,
            replied_count: t.replied_count,
            failed_count: t.failed_count,
            delivery_rate: rate(t.delivered_count, t.sent_count),
            read_rate: rate(t.read_count, t.sent_count),
            reply_rate: rate(t.replied_count, t.sent_count),
            failure_rate: rate(t.failed_count, t.sent_count + t.failed_count),
            last_sent_at: t.last_sent_at,
            daily,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_zero_without_sends() {
        let a = TemplateAnalytics::new(Uuid::nil(), None, Totals::default(), vec![]);
        assert_eq!(
            (a.delivery_rate, a.read_rate, a.reply_rate, a.failure_rate),
            (0.0, 0.0, 0.0, 0.0)
        );
        let t = Totals {
            sent_count: 4,
            delivered_count: 3,
            read_count: 2,
            replied_count: 1,
            failed_count: 1,
            ..Default::default()
        };
        let a = TemplateAnalytics::new(Uuid::nil(), None, t, vec![]);
        assert_eq!(
            (a.delivery_rate, a.read_rate, a.reply_rate, a.failure_rate),
            (0.75, 0.5, 0.25, 0.2)
        );
    }
}
