//! Contact imports: a CSV or NDJSON file of contacts, upserted by email or phone as a job.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::suppressions::{Subject, Suppression, SuppressionReason, SuppressionSource};
use parley_types::error::AppError;
use parley_types::fields::{Email, Label, Locale, Name, Phone, ShortText, TimeZone};
use parley_types::ids::OrgId;
use parley_types::time::Timestamp;

parley_types::text_enum!(
    /// How the file is written: CSV with a header row, or one JSON object per line.
    ImportFormat { Csv = "csv", Ndjson = "ndjson" }
);

parley_types::text_enum!(
    /// Where an import stands.
    ImportStatus { Queued = "queued", Running = "running", Completed = "completed", Failed = "failed" }
);

impl ImportFormat {
    /// The media type of a file in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            ImportFormat::Csv => "text/csv",
            ImportFormat::Ndjson => "application/x-ndjson",
        }
    }

    /// The format a media type names (`text/csv`; `application/x-ndjson` or
    /// `application/jsonl`), any case, with parameters; `None` for another type or a
    /// `charset` other than UTF-8 (or its subset US-ASCII).
    pub fn from_content_type(value: &str) -> Option<Self> {
        let mut parts = value.split(';');
        let format = match parts.next()?.trim().to_ascii_lowercase().as_str() {
            "text/csv" => ImportFormat::Csv,
            "application/x-ndjson" | "application/jsonl" => ImportFormat::Ndjson,
            _ => return None,
        };
        for param in parts {
            let Some((name, charset)) = param.split_once('=') else {
                continue;
            };
            let charset = charset.trim().trim_matches('"').to_ascii_lowercase();
            if name.trim().eq_ignore_ascii_case("charset")
                && !matches!(charset.as_str(), "utf-8" | "utf8" | "us-ascii")
            {
                return None;
            }
        }
        Some(format)
    }

    /// The format a file name's extension names: `.csv`, `.ndjson` or `.jsonl`.
    pub fn from_filename(name: &str) -> Option<Self> {
        let (_, extension) = name.rsplit_once('.')?;
        match extension.to_ascii_lowercase().as_str() {
            "csv" => Some(ImportFormat::Csv),
            "ndjson" | "jsonl" => Some(ImportFormat::Ndjson),
            _ => None,
        }
    }

    /// The name a file sent without one is stored under.
    pub fn default_filename(self) -> &'static str {
        match self {
            ImportFormat::Csv => "contacts.csv",
            ImportFormat::Ndjson => "contacts.ndjson",
        }
    }
}

/// Rejected rows an import lists (it counts them all).
pub const MAX_LISTED_ERRORS: usize = 1_000;

/// `POST /contacts/imports`: the file inline (`data`), or an uploaded file (`fileId`).
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"format": "csv", "data": "email,name\nada@example.com,Ada\n"})))]
pub struct CreateImport {
    pub format: ImportFormat,
    /// The file itself, within the body limit (`PARLEY_MAX_BODY_BYTES`).
    pub data: Option<String>,
    /// A file uploaded through `POST /files/presigned-upload` and completed.
    pub file_id: Option<Uuid>,
}

impl CreateImport {
    /// Exactly one source.
    pub fn check(&self) -> Result<(), AppError> {
        match (&self.data, self.file_id) {
            (Some(_), Some(_)) => Err(AppError::validation(
                "fileId",
                "invalid_value",
                "give data or fileId, not both",
            )),
            (None, None) => Err(AppError::validation(
                "data",
                "required",
                "give the file inline (data) or an uploaded file (fileId)",
            )),
            (Some(d), None) if d.contains('\0') => Err(AppError::validation(
                "data",
                "invalid_format",
                "must not contain the NUL character (U+0000)",
            )),
            _ => Ok(()),
        }
    }
}

/// One rejected row: its number in the file (the header is row 1 of a CSV; the first line is
/// row 1 of NDJSON) and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RejectedRow {
    pub row: i64,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContactImport {
    pub id: Uuid,
    pub format: ImportFormat,
    pub file_id: Option<Uuid>,
    pub status: ImportStatus,
    /// Data rows read so far.
    pub rows: i32,
    pub created: i32,
    /// Rows that changed an existing contact.
    pub updated: i32,
    /// Rows that matched a contact and changed nothing (a file imported again).
    pub unchanged: i32,
    pub rejected: i32,
    /// The first 1,000 rejected rows.
    pub errors: Vec<RejectedRow>,
    /// Why the import as a whole failed (the file could not be read).
    pub error_message: Option<String>,
    pub started_at: Option<Timestamp>,
    pub completed_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A row's fields, by their API names (camelCase, as `POST /contacts` takes them; a CSV's
/// header names the columns); unknown ones are ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawRow {
    pub name: Option<String>,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub source: Option<String>,
    pub country: Option<String>,
    pub language: Option<String>,
    pub position: Option<String>,
    pub timezone: Option<String>,
    pub external_id: Option<String>,
    /// `true` adds an `unsubscribed` entry for every channel to the suppression ledger (source
    /// `import`) by the row's email, else its phone.
    pub unsubscribed: Option<Flag>,
}

/// A yes-or-no cell: a JSON boolean, or `true`/`false`, `yes`/`no`, `1`/`0` (any case; the
/// integers 1 and 0 however written, `01` too); empty is no. Whatever a reader makes of the cell (a CSV reader reads `1` as a
/// number, `true` as a boolean) is kept as given, for [`ImportRow::parse`] to judge with its
/// own error.
#[derive(Debug, Clone, PartialEq)]
pub enum Flag {
    Bool(bool),
    Text(String),
}

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Cell;
        impl serde::de::Visitor<'_> for Cell {
            type Value = Flag;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("true or false")
            }
            fn visit_bool<E>(self, v: bool) -> Result<Flag, E> {
                Ok(Flag::Bool(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Flag, E> {
                Ok(Flag::Text(v.to_string()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Flag, E> {
                Ok(Flag::Text(v.to_string()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Flag, E> {
                // `1.0` stays `1.0`: a number that is not 1 or 0 is refused.
                Ok(Flag::Text(format!("{v:?}")))
            }
            fn visit_str<E>(self, v: &str) -> Result<Flag, E> {
                Ok(Flag::Text(v.to_owned()))
            }
        }
        d.deserialize_any(Cell)
    }
}

impl Flag {
    fn value(self) -> Result<bool, String> {
        match self {
            Flag::Bool(b) => Ok(b),
            Flag::Text(t) => match t.trim().to_ascii_lowercase().as_str() {
                "true" | "yes" | "1" => Ok(true),
                "false" | "no" | "0" | "" => Ok(false),
                _ => Err("must be true or false".to_owned()),
            },
        }
    }
}

/// A row that passed its rules: what it sets on the contact it creates or updates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportRow {
    /// Its number in the file.
    pub row: i64,
    pub name: Option<String>,
    /// As given; matched without case.
    pub email: Option<String>,
    pub phone: Option<String>,
    pub source: Option<String>,
    pub country: Option<String>,
    pub language: Option<String>,
    pub position: Option<String>,
    pub timezone: Option<String>,
    pub external_id: Option<String>,
    /// The row asks for an `unsubscribed` entry (by its email, else its phone).
    pub unsubscribed: bool,
}

impl ImportRow {
    /// The row's rules: an email or a phone, each field as `POST /contacts` checks it. Empty
    /// cells are absent.
    pub fn parse(row: i64, raw: RawRow) -> Result<ImportRow, RejectedRow> {
        let reject = |field: &str, why: String| RejectedRow {
            row,
            reason: format!("{field}: {why}"),
        };
        fn given(v: Option<String>) -> Option<String> {
            v.filter(|s| !s.trim().is_empty())
        }
        macro_rules! checked {
            ($value:expr, $ty:ty, $field:literal) => {
                match given($value) {
                    Some(v) => Some(
                        <$ty>::parse(v)
                            .map(String::from)
                            .map_err(|(_, why)| reject($field, why))?,
                    ),
                    None => None,
                }
            };
        }
        let r = ImportRow {
            row,
            name: checked!(raw.name, Name, "name"),
            email: checked!(raw.email, Email, "email"),
            phone: checked!(raw.phone, Phone, "phone"),
            source: checked!(raw.source, Label, "source"),
            country: checked!(raw.country, ShortText, "country"),
            language: checked!(raw.language, Locale, "language"),
            position: checked!(raw.position, ShortText, "position"),
            timezone: checked!(raw.timezone, TimeZone, "timezone"),
            external_id: checked!(raw.external_id, ShortText, "externalId"),
            unsubscribed: match raw.unsubscribed {
                Some(flag) => flag.value().map_err(|why| reject("unsubscribed", why))?,
                None => false,
            },
        };
        if r.email.is_none() && r.phone.is_none() {
            return Err(RejectedRow {
                row,
                reason: "email or phone is required to match or create a contact".to_owned(),
            });
        }
        Ok(r)
    }

    /// Takes a later row of the same contact: its non-empty cells win.
    pub fn fold(&mut self, later: ImportRow) {
        fn take(to: &mut Option<String>, from: Option<String>) {
            if from.is_some() {
                *to = from;
            }
        }
        take(&mut self.name, later.name);
        take(&mut self.phone, later.phone);
        take(&mut self.source, later.source);
        take(&mut self.country, later.country);
        take(&mut self.language, later.language);
        take(&mut self.position, later.position);
        take(&mut self.timezone, later.timezone);
        take(&mut self.external_id, later.external_id);
        self.unsubscribed |= later.unsubscribed;
        // The email is the key (or absent on both): the first spelling stays.
    }

    /// The ledger entry the row asks for: `unsubscribed` on every channel, by its email (the
    /// ledger lowercases it), else its phone; from source `import` at `now`.
    pub fn unsubscribe(&self, org: OrgId, now: Timestamp) -> Option<Suppression> {
        if !self.unsubscribed {
            return None;
        }
        let subject = match (&self.email, &self.phone) {
            (Some(e), _) => Subject::Email(e.clone()),
            (None, Some(p)) => Subject::Phone(p.clone()),
            (None, None) => return None,
        };
        Some(Suppression::new(
            org,
            subject,
            None,
            SuppressionReason::Unsubscribed,
            SuppressionSource::Import,
            now,
        ))
    }

    /// What identifies the contact: the email without case, else the phone.
    pub fn key(&self) -> String {
        match (&self.email, &self.phone) {
            (Some(e), _) => format!("e:{}", e.to_lowercase()),
            (None, Some(p)) => format!("p:{p}"),
            (None, None) => String::new(),
        }
    }
}

/// A batch's rows split by what they name: contacts that exist (each once, with the rows
/// that name it folded into the first) and contacts to create.
#[derive(Debug, Default, PartialEq)]
pub struct MatchedRows {
    pub existing: Vec<(ImportRow, Uuid)>,
    pub new: Vec<ImportRow>,
}

/// The emails (lowercase) a batch looks its contacts up by.
pub fn emails_of(rows: &[ImportRow]) -> Vec<String> {
    rows.iter()
        .filter_map(|r| r.email.as_ref().map(|e| e.to_lowercase()))
        .collect()
}

/// The phones a batch looks its contacts up by: those of the rows whose email found no
/// contact (or that have none).
pub fn phones_of(rows: &[ImportRow], by_email: &HashMap<String, Uuid>) -> Vec<String> {
    rows.iter()
        .filter(|r| {
            r.email
                .as_ref()
                .is_none_or(|e| !by_email.contains_key(&e.to_lowercase()))
        })
        .filter_map(|r| r.phone.clone())
        .collect()
}

/// Matches each row to the contact with its email (without case), else to the contact found
/// by its phone; rows naming one contact by different keys (its email on one row, only its
/// phone on another) fold into the first, so one row per contact reaches each statement. Of
/// the rest, a phone-only row joins a new row with that phone (rows with an email first).
pub fn match_rows(
    rows: &[ImportRow],
    by_email: &HashMap<String, Uuid>,
    by_phone: &HashMap<String, Uuid>,
) -> MatchedRows {
    let matched = |r: &ImportRow| {
        r.email
            .as_ref()
            .and_then(|e| by_email.get(&e.to_lowercase()))
            .or_else(|| r.phone.as_ref().and_then(|p| by_phone.get(p)))
            .copied()
    };
    let mut existing: Vec<(ImportRow, Uuid)> = Vec::new();
    let mut existing_at: HashMap<Uuid, usize> = HashMap::new();
    let mut unmatched: Vec<ImportRow> = Vec::new();
    for r in rows {
        match matched(r) {
            Some(id) => match existing_at.get(&id) {
                Some(&i) => existing[i].0.fold(r.clone()),
                None => {
                    existing_at.insert(id, existing.len());
                    existing.push((r.clone(), id));
                }
            },
            None => unmatched.push(r.clone()),
        }
    }
    let (with_email, phone_only): (Vec<ImportRow>, Vec<ImportRow>) =
        unmatched.into_iter().partition(|r| r.email.is_some());
    let mut new: Vec<ImportRow> = Vec::new();
    let mut new_by_phone: HashMap<String, usize> = HashMap::new();
    for r in with_email {
        if let Some(p) = &r.phone {
            new_by_phone.entry(p.clone()).or_insert(new.len());
        }
        new.push(r);
    }
    for r in phone_only {
        let phone = r.phone.clone().unwrap_or_default();
        match new_by_phone.get(&phone) {
            Some(&at) => new[at].fold(r),
            None => {
                new_by_phone.insert(phone, new.len());
                new.push(r);
            }
        }
    }
    MatchedRows { existing, new }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(email: Option<&str>, phone: Option<&str>) -> RawRow {
        RawRow {
            email: email.map(str::to_owned),
            phone: phone.map(str::to_owned),
            ..RawRow::default()
        }
    }

    fn row(n: i64, email: Option<&str>, phone: Option<&str>, name: &str) -> ImportRow {
        ImportRow {
            row: n,
            email: email.map(str::to_owned),
            phone: phone.map(str::to_owned),
            name: Some(name.to_owned()),
            ..ImportRow::default()
        }
    }

    #[test]
    fn rows_match_by_email_then_phone_and_fold_into_one_row_per_contact() {
        let ada = Uuid::from_u128(1);
        let bob = Uuid::from_u128(2);
        let by_email = HashMap::from([("ada@example.com".to_owned(), ada)]);
        let by_phone = HashMap::from([("+14155550100".to_owned(), bob)]);
        let rows = [
            row(2, Some("ADA@example.com"), None, "Ada"),
            row(3, None, Some("+14155550100"), "Bob"),
            // Ada again by email, Bob again by phone: folded, later cells win.
            row(4, Some("ada@example.com"), None, "Ada L."),
            row(
                5,
                Some("unknown@example.com"),
                Some("+14155550100"),
                "Bob B.",
            ),
            // New: an email row with a phone, then a phone-only row with that phone.
            row(6, Some("cy@example.com"), Some("+14155550199"), "Cy"),
            row(7, None, Some("+14155550199"), "Cyrus"),
            row(8, None, Some("+14155550111"), "Di"),
        ];
        assert_eq!(emails_of(&rows).len(), 4);
        assert_eq!(
            phones_of(&rows, &by_email),
            [
                "+14155550100",
                "+14155550100",
                "+14155550199",
                "+14155550199",
                "+14155550111"
            ]
        );
        let m = match_rows(&rows, &by_email, &by_phone);
        let existing: Vec<(i64, Uuid, Option<&str>)> = m
            .existing
            .iter()
            .map(|(r, id)| (r.row, *id, r.name.as_deref()))
            .collect();
        assert_eq!(
            existing,
            [(2, ada, Some("Ada L.")), (3, bob, Some("Bob B."))]
        );
        let new: Vec<(i64, Option<&str>)> =
            m.new.iter().map(|r| (r.row, r.name.as_deref())).collect();
        assert_eq!(new, [(6, Some("Cyrus")), (8, Some("Di"))]);
    }

    #[test]
    fn formats_from_media_types_and_file_names() {
        use ImportFormat::{Csv, Ndjson};
        for (value, want) in [
            ("text/csv", Some(Csv)),
            ("Text/CSV; charset=UTF-8", Some(Csv)),
            ("text/csv; header=present", Some(Csv)),
            ("application/x-ndjson", Some(Ndjson)),
            ("application/jsonl; charset=\"us-ascii\"", Some(Ndjson)),
            ("text/csv; charset=latin1", None),
            ("text/plain", None),
            ("application/json", None),
            ("", None),
        ] {
            assert_eq!(ImportFormat::from_content_type(value), want, "{value:?}");
        }
        for (name, want) in [
            ("contacts.csv", Some(Csv)),
            ("export.2026.CSV", Some(Csv)),
            ("people.jsonl", Some(Ndjson)),
            ("people.ndjson", Some(Ndjson)),
            ("contacts", None),
            ("contacts.txt", None),
        ] {
            assert_eq!(ImportFormat::from_filename(name), want, "{name:?}");
        }
    }

    #[test]
    fn a_row_needs_an_email_or_a_phone_and_valid_fields() {
        assert!(ImportRow::parse(2, raw(Some("ada@example.com"), None)).is_ok());
        let phone = ImportRow::parse(3, raw(None, Some("+44 20 7123 4567"))).unwrap();
        assert_eq!(phone.phone.as_deref(), Some("+442071234567"));
        assert_eq!(phone.key(), "p:+442071234567");
        let none = ImportRow::parse(4, raw(Some(" "), None)).unwrap_err();
        assert_eq!(none.row, 4);
        let bad = ImportRow::parse(5, raw(Some("not-an-email"), None)).unwrap_err();
        assert!(bad.reason.starts_with("email: "), "{}", bad.reason);
        let upper = ImportRow::parse(6, raw(Some("Ada@Example.com"), None)).unwrap();
        assert_eq!(upper.key(), "e:ada@example.com");
        assert_eq!(upper.email.as_deref(), Some("Ada@Example.com"));
    }

    #[test]
    fn an_unsubscribed_cell_is_a_yes_or_no_and_asks_for_an_entry_by_the_address() {
        let org = OrgId::from(Uuid::from_u128(9));
        let now = Timestamp::now();
        // As NDJSON gives them.
        for (cell, want) in [
            ("true", Some(true)),
            ("1", Some(true)),
            ("0", Some(false)),
            ("2", None),
            ("1.5", None),
            ("1.0", None),
            ("\" YES \"", Some(true)),
            ("\"false\"", Some(false)),
            ("\"\"", Some(false)),
            ("\"maybe\"", None),
            ("null", Some(false)),
        ] {
            let line = format!(
                r#"{{"email": "Ada@Example.com", "phone": "+14155550100", "unsubscribed": {cell}}}"#
            );
            let r: RawRow = serde_json::from_str(&line).unwrap();
            match (ImportRow::parse(2, r), want) {
                (Ok(row), Some(w)) => {
                    assert_eq!(row.unsubscribed, w, "{cell:?}");
                    let entry = row.unsubscribe(org, now);
                    assert_eq!(entry.is_some(), w, "{cell:?}");
                    if let Some(e) = entry {
                        assert_eq!(e.email.as_deref(), Some("Ada@Example.com"));
                        assert_eq!((e.phone, e.channel), (None, None));
                        assert_eq!(e.reason, SuppressionReason::Unsubscribed);
                        assert_eq!(e.source, SuppressionSource::Import);
                    }
                }
                (Err(e), None) => assert!(e.reason.starts_with("unsubscribed: "), "{e:?}"),
                (got, w) => panic!("{cell:?}: {got:?}, wanted {w:?}"),
            }
        }
        // Neither an array nor an object is a cell.
        assert!(serde_json::from_str::<RawRow>(r#"{"unsubscribed": [true]}"#).is_err());
        let mut phone_only = ImportRow::parse(3, raw(None, Some("+14155550100"))).unwrap();
        phone_only.unsubscribed = true;
        let e = phone_only.unsubscribe(org, now).unwrap();
        assert_eq!(e.phone.as_deref(), Some("+14155550100"));
        // A later row of the same contact may ask for it; none takes it back.
        let mut first = row(2, Some("a@example.com"), None, "A");
        let mut later = row(3, Some("a@example.com"), None, "A");
        later.unsubscribed = true;
        first.fold(later);
        assert!(first.unsubscribed);
        first.fold(row(4, Some("a@example.com"), None, "A"));
        assert!(first.unsubscribed);
    }
}
