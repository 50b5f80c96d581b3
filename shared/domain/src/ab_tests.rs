//! A/B broadcasts: the broadcast's own template and variables are variant A, and
//! `abTest.variants` gives 1 to 3 more (B, C, D). A test share of the audience, drawn at random,
//! is split among them at random; when the wait ends the variant with the best rate of the
//! winner metric (from receipts) is sent to the rest, unless the caller picked one first
//! (`POST /broadcasts/{id}/pick-variant`).

use parley_types::ids::{BroadcastId, ContactId};
use serde::{Deserialize, Serialize};
use sqlx::types::Json;
use uuid::Uuid;

use crate::template_variables::TemplateVariables;
use parley_types::error::AppError;
use parley_types::fields::ShortText;
use parley_types::time::Timestamp;

/// Variants in all, the broadcast's own (A) included.
pub const MIN_VARIANTS: usize = 2;
pub const MAX_VARIANTS: usize = 4;
/// The longest wait for a winner: a week, in minutes.
pub const MAX_WAIT_MINUTES: u32 = 10_080;
const DEFAULT_NAMES: [&str; MAX_VARIANTS] = ["A", "B", "C", "D"];

parley_types::text_enum!(
    /// What picks the winner: the highest rate of `delivered` or `read` recipients among a
    /// variant's, or the lowest of `failed`.
    WinnerMetric {
        Delivered = "delivered",
        Read = "read",
        Failed = "failed",
    }
);

parley_types::text_enum!(
    /// Who picked the winner: the worker when the wait ended, or the caller.
    PickedBy {
        Auto = "auto",
        Api = "api",
    }
);

/// A variant besides the broadcast's own.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self", rename_all = "camelCase", deny_unknown_fields)]
pub struct NewVariant {
    /// Unique within the broadcast; B, C, D by default.
    pub name: Option<ShortText>,
    /// A template of the organization on the broadcast's channel.
    pub template_id: Uuid,
    pub template_variables: Option<TemplateVariables>,
}

/// `abTest` of a create request.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self", rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "openapi", schema(example = json!({
    "variants": [{"name": "B", "templateId": "0193a1f2-7c4e-7d2a-9b1c-2f3e4d5c6b7c"}],
    "testPercent": 20, "winnerMetric": "read", "waitMinutes": 240
})))]
pub struct AbTestRequest {
    /// 1 to 3 variants besides the broadcast's own `templateId` and `templateVariables`
    /// (variant A; `variantAName` renames it).
    #[serde(deserialize_with = "parley_types::fields::at_most::<_, _, 3>")]
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 3))]
    pub variants: Vec<NewVariant>,
    pub variant_a_name: Option<ShortText>,
    /// The share of the audience, in percent (1 to 100), that the variants are tested on.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 100))]
    pub test_percent: u32,
    pub winner_metric: WinnerMetric,
    /// Minutes from when the test share is written until the winner is picked (1 to 10,080).
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 10080))]
    pub wait_minutes: u32,
}

parley_types::objects_only!(NewVariant, AbTestRequest);

/// `POST /broadcasts/{id}/pick-variant`.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", schema(example = json!({"variant": "B"})))]
pub struct PickVariant {
    /// The name of the variant to send the rest of the audience.
    pub variant: ShortText,
}

/// What the broadcast keeps of the test (`broadcasts.ab_test`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AbSettings {
    pub test_percent: u32,
    pub winner_metric: WinnerMetric,
    pub wait_minutes: u32,
    /// How many variants, A included.
    pub variants: u32,
}

/// A variant to write: its number (1 is A), name, template and variables (A's are the
/// broadcast's own, kept there).
#[derive(Debug, Clone)]
pub struct VariantRow {
    pub variant_no: i16,
    pub name: String,
    pub template_id: Uuid,
    pub template_variables: Option<Json<TemplateVariables>>,
}

impl AbTestRequest {
    /// Checks the number of variants: before their templates are looked up.
    pub fn check_count(&self) -> Result<(), AppError> {
        let n = self.variants.len() + 1;
        if !(MIN_VARIANTS..=MAX_VARIANTS).contains(&n) {
            return Err(AppError::validation(
                "abTest.variants",
                "out_of_range",
                "give 1 to 3 variants besides the broadcast's own",
            ));
        }
        Ok(())
    }

    /// Checks the settings and names the variants; `own_template` is the broadcast's.
    pub fn rows(&self, own_template: Uuid) -> Result<(AbSettings, Vec<VariantRow>), AppError> {
        self.check_count()?;
        if !(1..=100).contains(&self.test_percent) {
            return Err(AppError::validation(
                "abTest.testPercent",
                "out_of_range",
                "must be 1 to 100",
            ));
        }
        if !(1..=MAX_WAIT_MINUTES).contains(&self.wait_minutes) {
            return Err(AppError::validation(
                "abTest.waitMinutes",
                "out_of_range",
                format!("must be 1 to {MAX_WAIT_MINUTES}"),
            ));
        }
        let name = |given: &Option<ShortText>, i: usize| {
            given
                .as_ref()
                .map_or_else(|| DEFAULT_NAMES[i].to_owned(), |s| s.as_str().to_owned())
        };
        let mut rows = vec![VariantRow {
            variant_no: 1,
            name: name(&self.variant_a_name, 0),
            template_id: own_template,
            template_variables: None,
        }];
        for (i, v) in self.variants.iter().enumerate() {
            rows.push(VariantRow {
                variant_no: i as i16 + 2,
                name: name(&v.name, i + 1),
                template_id: v.template_id,
                template_variables: Some(Json(v.template_variables.clone().unwrap_or_default())),
            });
        }
        for (i, row) in rows.iter().enumerate() {
            if rows[..i].iter().any(|r| r.name == row.name) {
                return Err(AppError::validation(
                    format!("abTest.variants[{}].name", i.saturating_sub(1)),
                    "duplicate",
                    format!("two variants are named {:?}", row.name),
                ));
            }
        }
        let settings = AbSettings {
            test_percent: self.test_percent,
            winner_metric: self.winner_metric,
            wait_minutes: self.wait_minutes,
            variants: rows.len() as u32,
        };
        Ok((settings, rows))
    }
}

/// A variant as the broadcast shows it, with its counters.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Variant {
    pub name: String,
    pub template_id: Uuid,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<TemplateVariables>))]
    pub template_variables: Option<Json<TemplateVariables>>,
    /// Recipients sent (or to be sent) this variant: in the test, and the rest once it won.
    pub total_recipients: i32,
    pub sent_count: i32,
    pub delivered_count: i32,
    pub read_count: i32,
    pub failed_count: i32,
    pub skipped_count: i32,
    /// `deliveredCount / (sentCount + failedCount)`, over the recipients attempted so far (0
    /// with none); `readRate` and `failedRate` likewise.
    pub delivered_rate: f64,
    pub read_rate: f64,
    pub failed_rate: f64,
}

impl Variant {
    /// Fills the rates from the counters.
    pub fn fill_rates(&mut self) {
        let attempted = self.attempted();
        let of = |n: i32| {
            if attempted > 0 {
                f64::from(n) / f64::from(attempted)
            } else {
                0.0
            }
        };
        (self.delivered_rate, self.read_rate, self.failed_rate) = (
            of(self.delivered_count),
            of(self.read_count),
            of(self.failed_count),
        );
    }

    fn attempted(&self) -> i32 {
        self.sent_count.saturating_add(self.failed_count)
    }

    fn rate(&self, metric: WinnerMetric) -> f64 {
        match metric {
            WinnerMetric::Delivered => self.delivered_rate,
            WinnerMetric::Read => self.read_rate,
            WinnerMetric::Failed => -self.failed_rate,
        }
    }
}

/// The test as the broadcast shows it.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AbTest {
    pub test_percent: u32,
    pub winner_metric: WinnerMetric,
    pub wait_minutes: u32,
    /// When the winner is picked: `waitMinutes` after the test share was written (`null`
    /// before).
    pub test_ends_at: Option<Timestamp>,
    /// The winning variant's name, once picked.
    pub winner: Option<String>,
    pub picked_at: Option<Timestamp>,
    pub picked_by: Option<PickedBy>,
}

/// The winner among `variants` (in variant order) by `metric`: the best rate among those with
/// a recipient attempted (any, when none has), the first variant on a tie. Its index.
pub fn winner(variants: &[Variant], metric: WinnerMetric) -> usize {
    let tried = variants.iter().any(|v| v.attempted() > 0);
    let mut best: Option<usize> = None;
    for (i, v) in variants.iter().enumerate() {
        if tried && v.attempted() == 0 {
            continue;
        }
        if best.is_none_or(|b| v.rate(metric) > variants[b].rate(metric)) {
            best = Some(i);
        }
    }
    best.unwrap_or(0)
}

/// Where one contact of an A/B broadcast goes: `Some(variant)` (1-based) in the test share,
/// `None` in the rest. A draw by a hash of the broadcast and the contact, so the same contact
/// always draws the same (a fan-out slice written twice splits the same way).
pub fn draw(
    broadcast: BroadcastId,
    contact: ContactId,
    test_percent: u32,
    variants: usize,
) -> Option<i16> {
    let (b, c) = (broadcast.uuid().as_u128(), contact.uuid().as_u128());
    let mut x = (b ^ c.rotate_left(64)) as u64 ^ ((b >> 64) as u64).wrapping_add(c as u64);
    // splitmix64's finalizer.
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    let in_test = (x % 10_000) < u64::from(test_percent) * 100;
    in_test.then(|| ((x >> 32) % variants.max(1) as u64) as i16 + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_draw_takes_the_share_and_splits_it_evenly() {
        let broadcast = BroadcastId::generate();
        let mut counts = [0usize; 5];
        let n = 40_000;
        for _ in 0..n {
            match draw(broadcast, ContactId::generate(), 20, 3) {
                Some(v) => counts[v as usize] += 1,
                None => counts[0] += 1,
            }
        }
        let tested = n - counts[0];
        assert!((7_600..8_400).contains(&tested), "20% of 40,000: {tested}");
        for v in 1..=3 {
            assert!(
                (2_400..2_950).contains(&counts[v]),
                "a third each: {counts:?}"
            );
        }
        assert_eq!(counts[4], 0);
        let c = ContactId::generate();
        assert_eq!(draw(broadcast, c, 20, 3), draw(broadcast, c, 20, 3));
        assert!(draw(broadcast, c, 100, 2).is_some());
    }

    fn variant(sent: i32, delivered: i32, read: i32, failed: i32) -> Variant {
        let mut v = Variant {
            name: String::new(),
            template_id: Uuid::nil(),
            template_variables: None,
            total_recipients: sent + failed,
            sent_count: sent,
            delivered_count: delivered,
            read_count: read,
            failed_count: failed,
            skipped_count: 0,
            delivered_rate: 0.0,
            read_rate: 0.0,
            failed_rate: 0.0,
        };
        v.fill_rates();
        v
    }

    #[test]
    fn the_winner_has_the_best_rate_and_the_first_wins_a_tie() {
        let vs = [
            variant(9, 9, 2, 1),
            variant(20, 10, 8, 0),
            variant(9, 9, 2, 1),
        ];
        assert_eq!(winner(&vs, WinnerMetric::Delivered), 0);
        assert_eq!(winner(&vs, WinnerMetric::Read), 1);
        assert_eq!(winner(&vs, WinnerMetric::Failed), 1);
        assert_eq!(
            winner(
                &[variant(0, 0, 0, 0), variant(0, 0, 0, 0)],
                WinnerMetric::Read
            ),
            0
        );
        // A variant nobody was sent yet does not win on its empty failure rate.
        let unsent = [variant(5, 5, 0, 1), variant(0, 0, 0, 0)];
        assert_eq!(winner(&unsent, WinnerMetric::Failed), 0);
    }
}
