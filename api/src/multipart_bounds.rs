//! Bounds on a multipart body's framing, checked on the stream before the parser sees it.
//!
//! multer keeps in memory, and searches again at each chunk, whatever precedes the first
//! boundary and a part's headers until their blank line: a body that never sends either would
//! hold up to the whole body limit in memory, and a core. Parts' contents stream through (the
//! parser keeps a boundary's length of them), so only the framing needs bounds: a boundary of
//! at most [`MAX_BOUNDARY`] characters (RFC 2046's 70: every search costs its length at each
//! byte), at most [`MAX_PREAMBLE`] bytes before the first boundary, at most [`MAX_PARTS`]
//! parts, [`MAX_PART_HEADERS`] bytes of headers in each part, and [`MAX_EPILOGUE`] bytes after
//! the closing boundary.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Bytes;
use futures::{Stream, StreamExt};
use parking_lot::Mutex;

use crate::body_spool::incomplete;
use crate::error::AppError;

/// Bytes a body may send before its first boundary (clients send none).
pub const MAX_PREAMBLE: usize = 1024;
/// A boundary's longest (RFC 2046).
pub const MAX_BOUNDARY: usize = 70;
/// Parts a body may have (an import's form has two).
pub const MAX_PARTS: usize = 16;
/// Bytes a body may send after its closing boundary (clients send none).
pub const MAX_EPILOGUE: usize = 1024;
/// Bytes of one part's headers, up to the blank line that ends them.
pub const MAX_PART_HEADERS: usize = 8 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Where {
    /// Before the first boundary, with this many bytes read.
    Preamble(usize),
    /// In a part's headers, with this many bytes read.
    Headers(usize),
    /// In a part's content.
    Content,
    /// After the closing boundary: nothing left to check.
    Done,
}

/// Follows a multipart body's framing and refuses one that breaks the bounds.
#[derive(Debug)]
pub struct FramingCheck {
    /// `\r\n--<boundary>` (the first boundary may come without its `\r\n`).
    delimiter: Vec<u8>,
    at: Where,
    /// The end of the previous chunk, in case a delimiter or a blank line spans two chunks.
    tail: Vec<u8>,
    /// Parts begun so far.
    parts: usize,
}

impl FramingCheck {
    pub fn new(boundary: &str) -> Self {
        FramingCheck {
            delimiter: format!("\r\n--{boundary}").into_bytes(),
            at: Where::Preamble(0),
            // As if the body started after a line end, so that a first boundary at its very
            // start is found.
            tail: b"\r\n".to_vec(),
            parts: 0,
        }
    }

    /// Takes the next chunk; an error once the framing breaks its bounds.
    pub fn check(&mut self, chunk: &[u8]) -> Result<(), AppError> {
        if self.at == Where::Done {
            return Ok(());
        }
        let mut window = std::mem::take(&mut self.tail);
        let carried = window.len();
        window.extend_from_slice(chunk);
        let mut pos = 0;
        loop {
            match self.at {
                Where::Done => return Ok(()),
                Where::Preamble(_) | Where::Content => {
                    match find(&window[pos..], &self.delimiter) {
                        Some(i) => {
                            let after = pos + i + self.delimiter.len();
                            // `--` right after the delimiter closes the body. (Not yet known when
                            // the chunk ends here: the next chunk's search starts from the tail.)
                            if window.len() < after + 2 {
                                self.keep_from(&window, pos + i);
                                return Ok(());
                            }
                            if &window[after..after + 2] == b"--" {
                                self.at = Where::Done;
                                return Ok(());
                            }
                            self.parts += 1;
                            if self.parts > MAX_PARTS {
                                return Err(refused("the body has too many parts"));
                            }
                            self.at = Where::Headers(0);
                            pos = after;
                        }
                        None => {
                            if let Where::Preamble(read) = self.at {
                                let read = read + window.len().saturating_sub(pos.max(carried));
                                if read > MAX_PREAMBLE {
                                    return Err(refused(
                                        "the body does not start with its boundary",
                                    ));
                                }
                                self.at = Where::Preamble(read);
                            }
                            self.keep_tail(&window, pos, self.delimiter.len() + 1);
                            return Ok(());
                        }
                    }
                }
                Where::Headers(read) => match find(&window[pos..], b"\r\n\r\n") {
                    Some(i) => {
                        if read + i > MAX_PART_HEADERS {
                            return Err(refused("a part's headers are too long"));
                        }
                        self.at = Where::Content;
                        pos += i + 4;
                    }
                    None => {
                        let read = read + window.len().saturating_sub(pos.max(carried));
                        if read > MAX_PART_HEADERS {
                            return Err(refused("a part's headers are too long"));
                        }
                        self.at = Where::Headers(read);
                        self.keep_tail(&window, pos, 3);
                        return Ok(());
                    }
                },
            }
        }
    }

    /// Carries the last `len` bytes of `window` from `pos` on to the next chunk.
    fn keep_tail(&mut self, window: &[u8], pos: usize, len: usize) {
        let from = window.len().saturating_sub(len).max(pos);
        self.tail = window[from..].to_vec();
    }

    fn keep_from(&mut self, window: &[u8], from: usize) {
        self.tail = window[from..].to_vec();
    }
}

/// A body that broke off (its client went away).
/// The boundary of a multipart `content_type`: 1 to [`MAX_BOUNDARY`] characters, else 422.
pub fn boundary(content_type: &str) -> Result<String, AppError> {
    let boundary = multer::parse_boundary(content_type)
        .map_err(|e| AppError::validation("body", "invalid_multipart", e.to_string()))?;
    if boundary.is_empty() || boundary.len() > MAX_BOUNDARY {
        return Err(refused(&format!(
            "the boundary must be 1 to {MAX_BOUNDARY} characters"
        )));
    }
    Ok(boundary)
}

fn refused(why: &str) -> AppError {
    AppError::validation("body", "invalid_multipart", why)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A body's stream that the parser reads and, once the parser is done with it, its reader
/// reads to the end too ([`read_epilogue`]): the parser stops at the closing boundary.
pub struct SharedBody(Arc<Mutex<BodyStream>>);

/// A body's chunks, boxed.
type BodyStream = Pin<Box<dyn Stream<Item = Result<Bytes, axum::Error>> + Send>>;

impl SharedBody {
    pub fn new(stream: impl Stream<Item = Result<Bytes, axum::Error>> + Send + 'static) -> Self {
        SharedBody(Arc::new(Mutex::new(Box::pin(stream))))
    }
}

impl Clone for SharedBody {
    fn clone(&self) -> Self {
        SharedBody(self.0.clone())
    }
}

impl Stream for SharedBody {
    type Item = Result<Bytes, axum::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.lock().as_mut().poll_next(cx)
    }
}

/// Reads what a body sends after the parser stopped at its closing boundary, so that all of
/// it passes through the stream's observers (the idempotency key's hash); more than
/// [`MAX_EPILOGUE`] bytes is 422.
pub async fn read_epilogue(mut rest: SharedBody) -> Result<(), AppError> {
    let mut read = 0;
    while let Some(chunk) = rest.next().await {
        let chunk = chunk.map_err(incomplete)?;
        read += chunk.len();
        if read > MAX_EPILOGUE {
            return Err(refused("the body goes on after its closing boundary"));
        }
    }
    Ok(())
}

/// `chunks` with their framing checked as they pass. The error is an [`AppError`] (the parser
/// hands it back in `multer::Error::StreamReadFailed`).
pub fn checked<S>(chunks: S, boundary: &str) -> impl Stream<Item = Result<Bytes, AppError>> + use<S>
where
    S: Stream<Item = Result<Bytes, axum::Error>>,
{
    let mut framing = FramingCheck::new(boundary);
    chunks.map(move |chunk| {
        let chunk = chunk.map_err(incomplete)?;
        framing.check(&chunk)?;
        Ok(chunk)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(chunks: &[&[u8]]) -> Result<(), AppError> {
        let mut check = FramingCheck::new("XyZ");
        for c in chunks {
            check.check(c)?;
        }
        Ok(())
    }

    fn form() -> Vec<u8> {
        let mut body = b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n".to_vec();
        body.extend(std::iter::repeat_n(b'a', 100_000));
        body.extend_from_slice(b"\r\n--XyZ\r\nContent-Disposition: form-data; name=\"format\"\r\n\r\ncsv\r\n--XyZ--\r\n");
        body
    }

    #[test]
    fn a_well_formed_body_passes_in_any_chunking() {
        let body = form();
        for size in [1, 2, 3, 5, 7, 64, 4096, body.len()] {
            let chunks: Vec<&[u8]> = body.chunks(size).collect();
            assert!(run(&chunks).is_ok(), "chunks of {size}");
        }
    }

    #[test]
    fn a_body_without_its_boundary_or_with_endless_headers_is_refused() {
        let no_boundary = vec![b'x'; MAX_PREAMBLE + 10];
        for size in [1, 100, no_boundary.len()] {
            let chunks: Vec<&[u8]> = no_boundary.chunks(size).collect();
            assert!(run(&chunks).is_err(), "chunks of {size}");
        }
        let mut endless =
            b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\nX-Pad: ".to_vec();
        endless.extend(std::iter::repeat_n(b'p', MAX_PART_HEADERS + 10));
        for size in [1, 100, endless.len()] {
            let chunks: Vec<&[u8]> = endless.chunks(size).collect();
            assert!(run(&chunks).is_err(), "chunks of {size}");
        }
        // The same headers in the second part.
        let mut second =
            b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx\r\n--XyZ\r\nX-Pad: "
                .to_vec();
        second.extend(std::iter::repeat_n(b'p', MAX_PART_HEADERS + 10));
        assert!(run(&[&second]).is_err());
    }

    #[test]
    fn a_long_boundary_or_many_parts_are_refused() {
        let ok = format!("multipart/form-data; boundary={}", "b".repeat(MAX_BOUNDARY));
        assert_eq!(boundary(&ok).unwrap().len(), MAX_BOUNDARY);
        let long = format!(
            "multipart/form-data; boundary={}",
            "b".repeat(MAX_BOUNDARY + 1)
        );
        assert!(boundary(&long).is_err());
        assert!(boundary("multipart/form-data").is_err());
        let part = b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx\r\n";
        let many: Vec<u8> = part.repeat(MAX_PARTS + 1);
        assert!(run(&[&many]).is_err());
        let mut enough: Vec<u8> = part.repeat(MAX_PARTS);
        enough.extend_from_slice(b"--XyZ--\r\n");
        assert!(run(&[&enough]).is_ok());
    }

    #[test]
    fn a_short_preamble_and_an_epilogue_pass() {
        let mut body = b"a short preamble".to_vec();
        body.extend_from_slice(b"\r\n");
        body.extend(form());
        body.extend(std::iter::repeat_n(b'e', 20_000));
        for size in [1, 3, 1000] {
            let chunks: Vec<&[u8]> = body.chunks(size).collect();
            assert!(run(&chunks).is_ok(), "chunks of {size}");
        }
    }
}
