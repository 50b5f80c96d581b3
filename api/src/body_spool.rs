//! A request body read to its end within a limit: kept in memory up to a threshold and
//! written to a temporary file beyond it, so an upload of many megabytes costs disk, not
//! memory. Every chunk is shown to a callback on the way (the idempotency hash). The bytes on
//! disk of all requests together are bounded ([`DiskBudget`], `PARLEY_SPOOL_BYTES`): past it a
//! request is answered 503 and its file removed.

use std::path::Path;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use futures::{Stream, StreamExt};
use tempfile::TempPath;
use tokio::io::AsyncWriteExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

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
    /// Its bytes on disk, given back to the budget when it is dropped.
    _disk: Option<OwnedSemaphorePermit>,
}

/// The bytes request bodies may hold on the temporary disk at once, all requests together.
#[derive(Clone, Debug)]
pub struct DiskBudget(Arc<Semaphore>);

impl DiskBudget {
    pub fn new(bytes: u64) -> Self {
        let bytes = usize::try_from(bytes)
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS);
        DiskBudget(Arc::new(Semaphore::new(bytes)))
    }

    /// `n` more bytes for `held`, or 503 when the disk holds all it may.
    fn take(&self, held: &mut Option<OwnedSemaphorePermit>, n: usize) -> Result<(), ApiError> {
        let n = u32::try_from(n).map_err(|_| ApiError(AppError::PayloadTooLarge))?;
        let Ok(more) = self.0.clone().try_acquire_many_owned(n) else {
            metrics::counter!(parley_types::metric_names::HTTP_REFUSED, "reason" => "spool_bytes")
                .increment(1);
            return Err(ApiError(AppError::Overloaded(
                "the service's temporary disk holds all the bodies it may; retry shortly"
                    .to_owned(),
            )));
        };
        match held {
            Some(permit) => permit.merge(more),
            None => *held = Some(more),
        }
        Ok(())
    }

    /// Bytes free now.
    pub fn available(&self) -> usize {
        self.0.available_permits()
    }
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

/// A body's chunks, a read error being 422 (the client went away before its end).
fn chunks_of(body: Body) -> impl Stream<Item = Result<Bytes, ApiError>> {
    body.into_data_stream()
        .map(|chunk| chunk.map_err(|e| ApiError(incomplete(e))))
}

/// A body that broke off before its end (the client went away): 422.
pub fn incomplete(e: axum::Error) -> AppError {
    AppError::validation(
        "body",
        "incomplete",
        format!("the body could not be read to its end: {e}"),
    )
}

impl Spool {
    /// Reads `body` to its end, in memory: longer than `max` is 413; a body that breaks off
    /// (the client went away) is 422.
    pub async fn read_in_memory(
        body: Body,
        max: usize,
        mut each_chunk: impl FnMut(&[u8]),
    ) -> Result<Bytes, ApiError> {
        let mut chunks = std::pin::pin!(chunks_of(body));
        let mut memory: Vec<u8> = Vec::new();
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk?;
            if memory.len() + chunk.len() > max {
                return Err(ApiError(AppError::PayloadTooLarge));
            }
            each_chunk(&chunk);
            memory.extend_from_slice(&chunk);
        }
        Ok(Bytes::from(memory))
    }

    /// Reads `body` to its end, to disk past `limits.in_memory`. Longer than `limits.max` is
    /// 413; a body that breaks off (the client went away) is 422.
    pub async fn read(
        body: Body,
        limits: SpoolLimits,
        disk: &DiskBudget,
        each_chunk: impl FnMut(&[u8]),
    ) -> Result<Spool, ApiError> {
        Self::read_chunks(chunks_of(body), limits, disk, each_chunk).await
    }

    /// Reads a stream of chunks (a body, or one part of a multipart body) to its end.
    pub async fn read_chunks(
        chunks: impl Stream<Item = Result<Bytes, ApiError>>,
        limits: SpoolLimits,
        disk: &DiskBudget,
        mut each_chunk: impl FnMut(&[u8]),
    ) -> Result<Spool, ApiError> {
        let mut chunks = std::pin::pin!(chunks);
        let mut memory: Vec<u8> = Vec::new();
        let mut file: Option<(tokio::io::BufWriter<tokio::fs::File>, TempPath)> = None;
        let mut on_disk = None;
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
            disk.take(&mut on_disk, memory.len() + chunk.len())?;
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
        Ok(Spool {
            content,
            len,
            _disk: on_disk,
        })
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

/// A body read by a middleware, handed to the handler that uses it (extensions must be
/// `Clone`; it is taken once).
pub struct Handed<T>(Arc<parking_lot::Mutex<Option<T>>>);

impl<T> Clone for Handed<T> {
    fn clone(&self) -> Self {
        Handed(self.0.clone())
    }
}

impl<T> Handed<T> {
    pub fn new(read: T) -> Self {
        Handed(Arc::new(parking_lot::Mutex::new(Some(read))))
    }

    pub fn take(&self) -> Option<T> {
        self.0.lock().take()
    }
}
