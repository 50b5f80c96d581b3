//! Lists as CONTRACT.md gives them: `page`/`pageSize` (default 20, at most 100), or `cursor`
//! (keyset on `(created_at, id)`, stable while rows are added), and `sort=createdAt|-createdAt`.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::DateTime;
use serde::{Deserialize, Serialize};
use sqlx::{Postgres, QueryBuilder};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::error::{AppError, FieldError};
use crate::time::Timestamp;

pub const DEFAULT_PAGE_SIZE: u32 = 20;
pub const MAX_PAGE_SIZE: u32 = 100;

/// Pagination and sorting query parameters, shared by every list.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct PageParams {
    /// 1-based page number (default 1). Ignored when `cursor` is given.
    #[param(minimum = 1)]
    pub page: Option<u32>,
    /// Items per page, 1 to 100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    pub page_size: Option<u32>,
    /// Continue after this item: the `meta.endCursor` of the previous page.
    pub cursor: Option<String>,
    /// `createdAt` (oldest first) or `-createdAt` (newest first, the default).
    pub sort: Option<String>,
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
        if page == 0 {
            errors.push(FieldError::new("page", "out_of_range", "must be 1 or more"));
        }
        let size = p.page_size.unwrap_or(DEFAULT_PAGE_SIZE);
        if !(1..=MAX_PAGE_SIZE).contains(&size) {
            errors.push(FieldError::new(
                "pageSize",
                "out_of_range",
                format!("must be between 1 and {MAX_PAGE_SIZE}"),
            ));
        }
        let descending = match p.sort.as_deref() {
            None | Some("-createdAt") => true,
            Some("createdAt") => false,
            Some(_) => {
                errors.push(FieldError::new(
                    "sort",
                    "invalid_value",
                    "must be createdAt or -createdAt",
                ));
                true
            }
        };
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

    /// Appends the keyset condition (when continuing from a cursor), the order and the limit.
    /// `alias` is the table alias whose `created_at` and `id` order the list.
    pub fn push_window(&self, qb: &mut QueryBuilder<Postgres>, alias: &'static str) {
        let (cmp, dir) = if self.descending {
            ("<", "DESC")
        } else {
            (">", "ASC")
        };
        if let Some(c) = &self.cursor {
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
        .push_bind(i64::from(self.size) + 1);
        if self.cursor.is_none() {
            qb.push(" OFFSET ")
                .push_bind(i64::from(self.page - 1) * i64::from(self.size));
        }
    }
}

/// A position in a list: the sort key of the last item seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub created_at: Timestamp,
    pub id: Uuid,
}

impl Cursor {
    pub fn encode(&self) -> String {
        let micros = self.created_at.0.timestamp_micros();
        URL_SAFE_NO_PAD.encode(format!("{micros}:{}", self.id))
    }

    pub fn decode(raw: &str) -> Option<Self> {
        let bytes = URL_SAFE_NO_PAD.decode(raw).ok()?;
        let text = String::from_utf8(bytes).ok()?;
        let (micros, id) = text.split_once(':')?;
        Some(Cursor {
            created_at: Timestamp(DateTime::from_timestamp_micros(micros.parse().ok()?)?),
            id: id.parse().ok()?,
        })
    }
}

/// Items that can be listed with a cursor.
pub trait Keyed {
    fn cursor(&self) -> Cursor;
}

/// Pagination fields of `meta`.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PageMeta {
    /// Absent when the page was asked for with a cursor.
    pub page: Option<u32>,
    pub page_size: u32,
    /// Equals `pageSize`.
    pub limit: u32,
    pub total: i64,
    pub total_pages: i64,
    /// Items on this page.
    pub count: usize,
    pub has_next: bool,
    pub has_previous: bool,
    pub start_cursor: Option<String>,
    pub end_cursor: Option<String>,
}

/// One page of a list and what `meta` says about it.
#[derive(Debug)]
pub struct Page<T> {
    items: Vec<T>,
    meta: PageMeta,
}

impl<T> Page<T> {
    /// `rows` is what the windowed query returned: up to `size + 1` rows, the extra one only
    /// telling that there is a next page.
    pub fn new(mut rows: Vec<T>, req: &PageRequest, total: i64) -> Self
    where
        T: Keyed,
    {
        let has_next = rows.len() > req.size as usize;
        rows.truncate(req.size as usize);
        let size = i64::from(req.size);
        let meta = PageMeta {
            page: req.cursor.is_none().then_some(req.page),
            page_size: req.size,
            limit: req.size,
            total,
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
        assert_eq!(Cursor::decode("not a cursor"), None);
        assert_eq!(Cursor::decode(&URL_SAFE_NO_PAD.encode("12:nope")), None);
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
