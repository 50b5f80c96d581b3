//! Parley's leaf types: ids, timestamps, validated field types and the errors of their rules,
//! lists and pages, the enumerations every layer speaks of, and metric names. No I/O, no HTTP:
//! the `openapi` feature adds each type's OpenAPI schema, for the API's document.

pub mod enums;
pub mod error;
pub mod fields;
pub mod ids;
pub mod list;
pub mod metric_names;
pub mod time;

pub use error::{AppError, AppResult, FieldError};
