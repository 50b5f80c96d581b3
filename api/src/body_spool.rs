//! A request body read to its end within a limit: kept in memory up to a threshold and
//! written to a temporary file beyond it, so an upload of many megabytes costs disk, not
//! memory. Every chunk is shown to a callback on the way (the idempotency hash).

use std::path::Path;

use axum::body::{Body, Bytes};
use futures::{Stream, StreamExt};
use tempfile::TempPath;
use tokio::io::AsyncWriteExt;

use crate::error::{ApiError, AppError};

/// Where a spooled body is.
#[derive(Debug)]
pub enum Spooled {
    Memory(Bytes),
    /// Removed from the disk when dropped.
    File(TempPath),
}

#[derive(Debug)]
pub struct Spool {
    pub content: Spooled,
    pub len: u64,
}

/// The bounds of one read.
#[derive(Debug, Clone, Copy)]
pub struct SpoolLimits {
    /// A longer body is 413 `payload_too_large`.
    pub max: u64,
    /// A longer body goes to a temporary file.
    pub in_memory: usize,
}

impl SpoolLimits {
    /// Up to `max` bytes, all in memory.
    pub fn in_memory(max: usize) -> Self {
        SpoolLimits {
            max: max as u64,
            in_memory: max,
        }
    }
}

/// Written to disk in pieces of this size.
const WRITE_BUFFER: usize = 256 * 1024;

impl Spool {
    /// Reads `body` to its end. Longer than `limits.max` is 413; a body that breaks off (the
    /// client went away) is 422.
    pub async fn read(
        body: Body,
        limits: SpoolLimits,
        each_chunk: impl FnMut(&[u8]),
    ) -> Result<Spool, ApiError> {
        let chunks = body.into_data_stream().map(|chunk| {
            chunk.map_err(|e| {
                ApiError(AppError::validation(
                    "body",
                    "incomplete",
                    format!("the body could not be read to its end: {e}"),
                ))
            })
        });
        Self::read_chunks(chunks, limits, each_chunk).await
    }

    /// Reads a stream of chunks (a body, or one part of a multipart body) to its end.
    pub async fn read_chunks(
        chunks: impl Stream<Item = Result<Bytes, ApiError>>,
        limits: SpoolLimits,
        mut each_chunk: impl FnMut(&[u8]),
    ) -> Result<Spool, ApiError> {
        let mut chunks = std::pin::pin!(chunks);
        let mut memory: Vec<u8> = Vec::new();
        let mut file: Option<(tokio::io::BufWriter<tokio::fs::File>, TempPath)> = None;
        let mut len: u64 = 0;
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk?;
            len += chunk.len() as u64;
            if len > limits.max {
                return Err(ApiError(AppError::PayloadTooLarge));
            }
            each_chunk(&chunk);
            if file.is_none() && memory.len() + chunk.len() <= limits.in_memory {
                memory.extend_from_slice(&chunk);
                continue;
            }
            if file.is_none() {
                let (std_file, path) = tokio::task::spawn_blocking(tempfile::NamedTempFile::new)
                    .await
                    .map_err(|e| AppError::Internal(e.into()))?
                    .map_err(disk_failed)?
                    .into_parts();
                let mut writer = tokio::io::BufWriter::with_capacity(
                    WRITE_BUFFER,
                    tokio::fs::File::from_std(std_file),
                );
                write(&mut writer, &std::mem::take(&mut memory)).await?;
                file = Some((writer, path));
            }
            if let Some((writer, _)) = file.as_mut() {
                write(writer, &chunk).await?;
            }
        }
        let content = match file {
            None => Spooled::Memory(Bytes::from(memory)),
            Some((mut writer, path)) => {
                writer.flush().await.map_err(disk_failed)?;
                Spooled::File(path)
            }
        };
        Ok(Spool { content, len })
    }

    /// The body again, as a request body (read from the file when it is on disk).
    pub async fn body(&self) -> Result<Body, ApiError> {
        Ok(match &self.content {
            Spooled::Memory(bytes) => Body::from(bytes.clone()),
            Spooled::File(path) => Body::from_stream(tokio_util::io::ReaderStream::with_capacity(
                open(path).await?,
                WRITE_BUFFER,
            )),
        })
    }
}

/// The process' temporary disk failed (full, most likely): 503, as a dependency down is.
fn disk_failed(e: std::io::Error) -> AppError {
    AppError::ServiceUnavailable(format!("temporary file: {e}"))
}

async fn write(
    writer: &mut tokio::io::BufWriter<tokio::fs::File>,
    bytes: &[u8],
) -> Result<(), ApiError> {
    writer
        .write_all(bytes)
        .await
        .map_err(|e| ApiError(disk_failed(e)))
}

async fn open(path: &Path) -> Result<tokio::fs::File, ApiError> {
    tokio::fs::File::open(path)
        .await
        .map_err(|e| ApiError(disk_failed(e)))
}

/// A spooled body handed from a middleware to the handler that reads it (extensions must be
/// `Clone`; the spool is taken once).
#[derive(Clone, Default)]
pub struct Handed(std::sync::Arc<parking_lot::Mutex<Option<Spool>>>);

impl Handed {
    pub fn new(spool: Spool) -> Self {
        Handed(std::sync::Arc::new(parking_lot::Mutex::new(Some(spool))))
    }

    pub fn take(&self) -> Option<Spool> {
        self.0.lock().take()
    }
}
