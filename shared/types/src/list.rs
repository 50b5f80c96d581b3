//! Lists as docs/api.md (Lists) gives them: `page`/`pageSize` (default 20, at most 100), or `cursor`
//! (keyset on `(created_at, id)`, stable while rows are added), and `sort=createdAt|-createdAt`.

use chrono::DateTime;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::{AppError, FieldError};
use crate::time::Timestamp;

pub const DEFAULT_PAGE_SIZE: u32 = 20;
pub const MAX_PAGE_SIZE: u32 = 100;

/// The highest page number: with the largest page size, the last row it reaches is the
/// ten-millionth. Further on, continue by `cursor`, whose cost does not grow with the depth.
pub const MAX_PAGE: u32 = 100_000;

/// The order of a list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Sort {
    /// Oldest first.
    #[serde(rename = "createdAt")]
    CreatedAt,
    /// Newest first (the default).
    #[default]
    #[serde(rename = "-createdAt")]
    CreatedAtDesc,
}

/// Pagination and sorting query parameters, shared by every list.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct PageParams {
    /// 1-based page number (default 1), at most 100,000 (go further by `cursor`). Ignored
    /// when `cursor` is given.
    #[cfg_attr(feature = "openapi", param(minimum = 1, maximum = 100_000))]
    pub page: Option<u32>,
    /// Items per page, 1 to 100 (default 20).
    #[cfg_attr(feature = "openapi", param(minimum = 1, maximum = 100))]
    pub page_size: Option<u32>,
    /// Continue after this position: the `meta.endCursor` of the previous page
    /// (`<microseconds since 1970>_<id>`, any such position is valid).
    #[cfg_attr(
        feature = "openapi",
        param(
            pattern = r"^[0-9]{1,17}_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
            max_length = 54
        )
    )]
    pub cursor: Option<String>,
    /// `createdAt` (oldest first) or `-createdAt` (newest first, the default).
    #[cfg_attr(feature = "openapi", param(inline))]
    pub sort: Option<Sort>,
}

/// A validated page request.
#[derive(Debug, Clone)]
pub struct PageRequest {
    pub page: u32,
    pub size: u32,
    pub cursor: Option<Cursor>,
    pub descending: bool,
}

impl TryFrom<PageParams> for PageRequest {
    type Error = AppError;

    fn try_from(p: PageParams) -> Result<Self, AppError> {
        let mut errors = Vec::new();
        let page = p.page.unwrap_or(1);
        if !(1..=MAX_PAGE).contains(&page) {
            errors.push(FieldError::new(
                "page",
                "out_of_range",
                format!("must be between 1 and {MAX_PAGE}; continue further by cursor"),
            ));
        }
        let size = p.page_size.unwrap_or(DEFAULT_PAGE_SIZE);
        if !(1..=MAX_PAGE_SIZE).contains(&size) {
            errors.push(FieldError::new(
                "pageSize",
                "out_of_range",
                format!("must be between 1 and {MAX_PAGE_SIZE}"),
            ));
        }
        let descending = p.sort.unwrap_or_default() == Sort::CreatedAtDesc;
        let cursor = match p.cursor.as_deref() {
            None => None,
            Some(raw) => {
                let parsed = Cursor::decode(raw);
                if parsed.is_none() {
                    errors.push(FieldError::new(
                        "cursor",
                        "invalid_value",
                        "is not a cursor returned by this list",
                    ));
                }
                parsed
            }
        };
        if !errors.is_empty() {
            return Err(AppError::Validation(errors));
        }
        Ok(PageRequest {
            page,
            size,
            cursor,
            descending,
        })
    }
}

impl PageRequest {
    pub fn first(size: u32) -> Self {
        PageRequest {
            page: 1,
            size,
            cursor: None,
            descending: true,
        }
    }
}

/// A position in a list: the sort key of the last item seen, written
/// `<microseconds since 1970>_<id>`. Any such pair is a position (keyset pagination needs no
/// row there), so the format is the whole rule: at most 17 digits keep the time between 1970
/// and the year 5138, inside what both chrono and Postgres can hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub created_at: Timestamp,
    pub id: Uuid,
}

impl Cursor {
    const MAX_DIGITS: usize = 17;

    pub fn encode(&self) -> String {
        let micros = self.created_at.0.timestamp_micros().max(0);
        format!("{micros}_{}", self.id.hyphenated())
    }

    pub fn decode(raw: &str) -> Option<Self> {
        let (micros, id) = raw.split_once('_')?;
        if micros.is_empty()
            || micros.len() > Self::MAX_DIGITS
            || !micros.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let id = Uuid::try_parse(id).ok()?;
        // Only the form `encode` writes: hyphenated, lowercase.
        if id.hyphenated().to_string() != raw[micros.len() + 1..] {
            return None;
        }
        Some(Cursor {
            created_at: Timestamp(DateTime::from_timestamp_micros(micros.parse().ok()?)?),
            id,
        })
    }
}

/// Items that can be listed with a cursor.
pub trait Keyed {
    fn cursor(&self) -> Cursor;
}

/// Pagination fields of `meta`.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PageMeta {
    /// Absent when the page was asked for with a cursor.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, minimum = 1, maximum = 100_000)
    )]
    pub page: Option<u32>,
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 100))]
    pub page_size: u32,
    /// Equals `pageSize`.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 100))]
    pub limit: u32,
    /// Matching items: exact at any size for a list without filters whose total is kept
    /// (contacts); otherwise counted exactly up to [`EXACT_TOTAL_UP_TO`] (10,000), and past it
    /// 10,000 with `totalExact` false: there are more (`hasNext` is always exact).
    pub total: i64,
    /// Whether `total` is the exact count (false: at least that many).
    pub total_exact: bool,
    /// Pages of `total` (a lower bound when `totalExact` is false).
    pub total_pages: i64,
    /// Items on this page.
    pub count: usize,
    pub has_next: bool,
    pub has_previous: bool,
    pub start_cursor: Option<String>,
    pub end_cursor: Option<String>,
}

/// Lists count their matching rows exactly up to this many; a count of all rows would cost
/// as much as the table is large, on every page of every list (docs/api.md, Lists).
pub const EXACT_TOTAL_UP_TO: i64 = 10_000;

/// How many items a list holds, as a page learned it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Total {
    /// Counted, up to [`EXACT_TOTAL_UP_TO`] + 1: past the bound, at least that many.
    Counted(i64),
    /// Kept as rows are added and deleted: exact at any size.
    Kept(i64),
}

/// One page of a list and what `meta` says about it.
#[derive(Debug)]
pub struct Page<T> {
    items: Vec<T>,
    meta: PageMeta,
}

impl<T> Page<T> {
    /// `rows` is what the windowed query returned: up to `size + 1` rows, the extra one only
    /// telling that there is a next page; `total` is what the list holds.
    pub fn new(mut rows: Vec<T>, req: &PageRequest, total: Total) -> Self
    where
        T: Keyed,
    {
        let has_next = rows.len() > req.size as usize;
        rows.truncate(req.size as usize);
        let size = i64::from(req.size);
        let (total, total_exact) = match total {
            Total::Counted(n) => (n.min(EXACT_TOTAL_UP_TO), n <= EXACT_TOTAL_UP_TO),
            Total::Kept(n) => (n.max(0), true),
        };
        let meta = PageMeta {
            page: req.cursor.is_none().then_some(req.page),
            page_size: req.size,
            limit: req.size,
            total,
            total_exact,
            total_pages: (total + size - 1) / size,
            count: rows.len(),
            has_next,
            has_previous: req.cursor.is_some() || req.page > 1,
            start_cursor: rows.first().map(|r| r.cursor().encode()),
            end_cursor: rows.last().map(|r| r.cursor().encode()),
        };
        Page { items: rows, meta }
    }

    pub fn items(&self) -> &[T] {
        &self.items
    }

    pub fn items_mut(&mut self) -> &mut [T] {
        &mut self.items
    }

    pub fn into_parts(self) -> (Vec<T>, PageMeta) {
        (self.items, self.meta)
    }

    /// The same page with its items replaced by what `read` makes of them (the rows a page
    /// of keys stands for; a row deleted in between is left out).
    pub async fn read<U, E, F>(self, read: impl FnOnce(Vec<T>) -> F) -> Result<Page<U>, E>
    where
        F: Future<Output = Result<Vec<U>, E>>,
    {
        let items = read(self.items).await?;
        let mut meta = self.meta;
        meta.count = items.len();
        Ok(Page { items, meta })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_survives_encoding() {
        let c = Cursor {
            created_at: Timestamp::parse("2026-11-22T14:27:27.123456Z").unwrap(),
            id: Uuid::now_v7(),
        };
        assert_eq!(Cursor::decode(&c.encode()), Some(c));
    }

    #[test]
    fn garbage_is_not_a_cursor() {
        let id = "0193a1f2-7c4e-7d2a-9b1c-2f3e4d5c6b7a";
        for bad in [
            "not a cursor".to_owned(),
            "12_nope".to_owned(),
            format!("_{id}"),
            format!("-1_{id}"),
            format!("{}_{id}", "9".repeat(18)),
            format!("12_{}", id.to_uppercase()),
            format!("12_{}", id.replace('-', "")),
        ] {
            assert_eq!(Cursor::decode(&bad), None, "{bad}");
        }
        let far = Cursor::decode(&format!("{}_{id}", "9".repeat(17))).unwrap();
        assert!(far.created_at.0.to_string().starts_with("5138-"));
    }

    #[test]
    fn page_size_is_bounded() {
        for size in [0, 101, 1000] {
            let err = PageRequest::try_from(PageParams {
                page_size: Some(size),
                ..Default::default()
            })
            .unwrap_err();
            assert!(matches!(err, AppError::Validation(ref e) if e[0].field == "pageSize"));
        }
        let ok = PageRequest::try_from(PageParams::default()).unwrap();
        assert_eq!((ok.page, ok.size, ok.descending), (1, 20, true));
    }
}
