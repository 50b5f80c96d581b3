//! The contact import job: reads the file (inline, or downloaded through its presigned URL),
//! parses it on a blocking thread as a stream, and upserts its rows a batch per transaction.
//! Each batch commits with the import's counters and the rows done, so a job that dies
//! resumes after the last batch; a file imported twice changes nothing the second time.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parley_config::Config;
use parley_domain::imports::{ImportFormat, ImportRow, RawRow, RejectedRow};
use parley_jobs::ImportContacts;
use parley_types::ids::{ImportId, OrgId};
use parley_usecases::imports;
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::job::{Backoff, Failure, Job, JobResult, RetryPolicy};
use crate::renewal::Renewal;
use crate::state::WorkerState;

/// Rows per transaction.
const BATCH: usize = 5_000;
/// The longest record a file may have, in bytes, whatever its quotes and line ends: a longer
/// one fails the import (bounds what one row costs to hold and parse: a quote never closed
/// would otherwise make the rest of the file one cell).
const MAX_RECORD: u64 = 1 << 20;
/// Columns a CSV may have.
const MAX_COLUMNS: usize = 100;
/// What a rejected row's reason keeps (a parser's message may quote the whole row).
const MAX_REASON: usize = 200;
/// Rows skipped on resuming between two renewals of the lease.
const SKIP_RENEW_EVERY: i64 = 50_000;

/// A failed job leaves the import unfinished; the ticker enqueues it again once its lease ran
/// out, and it resumes after its last batch. A statement Postgres refuses for its data fails
/// the import at once.
impl Job for ImportContacts {
    const NAME: &'static str = "contact import";

    /// Five jobs in all: a file that kills its worker must not loop.
    fn retry_policy(_: &Config) -> RetryPolicy {
        RetryPolicy {
            retries: Some(4),
            backoff: Backoff::Reconciled,
        }
    }

    /// None: a job renews its lease while it reads, and a large file takes minutes.
    fn timeout(_: &Config) -> Option<Duration> {
        None
    }

    fn span(&self) -> tracing::Span {
        tracing::info_span!("import", import_id = %self.import_id)
    }

    async fn run(self, ctx: &WorkerState) -> JobResult {
        run(ctx, ImportId::from(self.import_id)).await
    }
}

/// Rows read and what became of them, up to a cut the next batch starts after.
#[derive(Default)]
struct Batch {
    rows: Vec<ImportRow>,
    rejected: Vec<RejectedRow>,
    /// Where each key's row is in `rows`.
    keys: HashMap<String, usize>,
    /// Rows folded into an earlier row of theirs (same email or phone): counted unchanged.
    folded: usize,
    /// Data rows read from the file's start when this batch ends.
    rows_read: i64,
}

async fn run(ctx: &WorkerState, id: ImportId) -> JobResult {
    let per_org = ctx.settings().imports_per_org;
    // A job's hold on its import (PARLEY_IMPORT_LEASE_SECS), renewed every third of it while
    // the job runs (a slow download filling a batch must not lose it) and by every batch.
    let lease = ctx.settings().import_lease;
    let begun = imports::begin(ctx.use_cases(), id, lease, per_org).await;
    let Some(job) = begun.map_err(Failure::of)? else {
        return Ok(());
    };
    let token = job.token;
    let org = OrgId::from(job.organization_id);
    let _lease = {
        let ctx = ctx.clone();
        Renewal::every(lease / 3, move || {
            renew_lease(ctx.clone(), id, token, lease)
        })
    };
    tracing::info!(import_id = %id, rows_done = job.rows_done, attempt = job.attempts, "contact import started");
    let result = async {
        let policy = ImportContacts::retry_policy(&ctx.config);
        let tries = u32::try_from(job.attempts - 1).unwrap_or(0);
        if !policy.allows_another(tries) {
            let why = format!("the import was tried {tries} times without ending");
            return imports::finish(ctx.use_cases(), id, token, Some(&why)).await;
        }
        let reader: Box<dyn Read + Send> = match (job.data, job.download_url) {
            (Some(data), _) => Box::new(std::io::Cursor::new(data)),
            (None, Some(url)) => Box::new(download(url)),
            (None, None) => {
                return imports::finish(ctx.use_cases(), id, token, Some("the import has no file"))
                    .await;
            }
        };
        let reader = RecordGuard::new(reader);
        run_file(ctx, id, token, org, job.format, job.rows_done, reader).await
    }
    .await;
    // The organization's next import waiting for its turn starts now, not at reconciliation
    // (which starts it anyway when this fails: it must not hide how this import ended).
    match imports::next_waiting(ctx.use_cases(), org).await {
        Ok(Some(next)) => {
            if let Err(err) = ctx.jobs.import_contacts(next).await {
                tracing::warn!(%err, import_id = %next, "next import not enqueued; the reconciler will");
            }
        }
        Ok(None) => {}
        Err(err) => tracing::warn!(%err, "next import not looked for; the reconciler will"),
    }
    match result {
        Ok(()) => Ok(()),
        Err(imports::ImportError::LeaseLost) => {
            tracing::warn!(import_id = %id, "import lease lost to another job; leaving it to that job");
            Ok(())
        }
        Err(imports::ImportError::Db(e)) => match Failure::of(e) {
            Failure::GiveUp(err) => {
                // Ended here rather than after every retry refused the same rows.
                let why = "the import stopped on rows the database refused";
                if let Err(end) = imports::finish(ctx.use_cases(), id, token, Some(why)).await {
                    tracing::warn!(error = %end, "given-up import not marked failed; its retries will");
                }
                Err(Failure::GiveUp(err))
            }
            retry => Err(retry),
        },
    }
}

/// Parses `reader` and applies its batches, then ends the import.
#[tracing::instrument(skip_all, fields(organization_id = %org, format = %format, rows_done))]
async fn run_file(
    ctx: &WorkerState,
    id: ImportId,
    token: Uuid,
    org: OrgId,
    format: ImportFormat,
    rows_done: i32,
    reader: RecordGuard,
) -> Result<(), imports::ImportError> {
    let (out, mut batches) = mpsc::channel::<Batch>(2);
    let done = i64::from(rows_done);
    let parser = tokio::task::spawn_blocking(move || parse(reader, format, done, &out));
    while let Some(b) = batches.recv().await {
        imports::apply_batch(
            ctx.use_cases(),
            id,
            token,
            org,
            imports::ImportBatch {
                rows: &b.rows,
                rejected: &b.rejected,
                folded: b.folded,
                rows_read: b.rows_read,
            },
            ctx.settings().import_lease,
        )
        .await?;
    }
    let failure = match parser.await {
        Ok(result) => result.err(),
        Err(e) => Some(format!("the file could not be parsed: {e}")),
    };
    imports::finish(ctx.use_cases(), id, token, failure.as_deref()).await?;
    tracing::info!(import_id = %id, failure, "contact import ended");
    Ok(())
}

/// Renews the import's lease (see [`Renewal`]); a lease lost to another job is that job's now,
/// and this job's writes are refused.
async fn renew_lease(ctx: WorkerState, id: ImportId, token: Uuid, lease: Duration) {
    match imports::renew(ctx.use_cases(), id, token, lease).await {
        Ok(true) => {}
        Ok(false) => tracing::warn!(import_id = %id, "import lease lost to another job"),
        Err(err) => tracing::warn!(import_id = %id, %err, "import lease not renewed"),
    }
}

/// Fails the read when the record being read runs past [`MAX_RECORD`] bytes: the parser
/// marks where each record ends ([`RecordGuard::boundary`]), so the bound follows the
/// format's own records (a quoted CSV cell may hold line ends) and any line end.
struct RecordGuard {
    inner: Box<dyn Read + Send>,
    /// Bytes handed to the parser.
    read: u64,
    /// Where the last record ended, as the parser counts.
    boundary: Arc<AtomicU64>,
}

impl RecordGuard {
    fn new(inner: Box<dyn Read + Send>) -> Self {
        RecordGuard {
            inner,
            read: 0,
            boundary: Arc::new(AtomicU64::new(0)),
        }
    }
}

/// The parser's side of a [`RecordGuard`]: where the last whole record ended.
#[derive(Clone)]
struct Boundary(Arc<AtomicU64>);

impl Boundary {
    fn set(&self, at: u64) {
        self.0.store(at, Ordering::Relaxed);
    }
}

/// What a parser may hold ahead of its records (its read buffer): on top of [`MAX_RECORD`].
const READ_AHEAD: u64 = 64 * 1024;

impl Read for RecordGuard {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let boundary = self.boundary.load(Ordering::Relaxed);
        if self.read.saturating_sub(boundary) > MAX_RECORD + READ_AHEAD {
            return Err(std::io::Error::other(record_too_long()));
        }
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

fn record_too_long() -> String {
    format!(
        "a record is longer than {} KiB (a quote never closed makes the rest of the file one cell)",
        MAX_RECORD / 1024
    )
}

fn short(reason: String) -> String {
    if reason.chars().count() <= MAX_REASON {
        reason
    } else {
        let mut s: String = reason.chars().take(MAX_REASON).collect();
        s.push('…');
        s
    }
}

/// The file at `url`, read as it arrives: a task downloads it into a channel the blocking
/// parser reads from.
fn download(url: String) -> ChannelReader {
    let (tx, rx) = mpsc::channel::<Result<bytes::Bytes, String>>(8);
    tokio::spawn(async move {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(Duration::from_secs(60))
            .build();
        let response = match client {
            Ok(c) => c.get(&url).send().await.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        let mut response = match response {
            Ok(r) if r.status().is_success() => r,
            Ok(r) => {
                let _ = tx
                    .send(Err(format!(
                        "the file could not be downloaded: {}",
                        r.status()
                    )))
                    .await;
                return;
            }
            Err(e) => {
                let _ = tx
                    .send(Err(format!("the file could not be downloaded: {e}")))
                    .await;
                return;
            }
        };
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if tx.send(Ok(chunk)).await.is_err() {
                        return;
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    let _ = tx.send(Err(format!("the download broke off: {e}"))).await;
                    return;
                }
            }
        }
    });
    ChannelReader {
        rx,
        chunk: bytes::Bytes::new(),
    }
}

/// A blocking reader over chunks a task sends.
struct ChannelReader {
    rx: mpsc::Receiver<Result<bytes::Bytes, String>>,
    chunk: bytes::Bytes,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.chunk.is_empty() {
            match self.rx.blocking_recv() {
                Some(Ok(chunk)) => self.chunk = chunk,
                Some(Err(why)) => return Err(std::io::Error::other(why)),
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.chunk.len());
        buf[..n].copy_from_slice(&self.chunk[..n]);
        let _ = self.chunk.split_to(n);
        Ok(n)
    }
}

/// Parses the file and sends its batches; rows up to `done` were done by an earlier job. An
/// error is why the file cannot be read at all (a bad row is rejected, never the file).
fn parse(
    reader: RecordGuard,
    format: ImportFormat,
    done: i64,
    out: &mpsc::Sender<Batch>,
) -> Result<(), String> {
    let boundary = Boundary(reader.boundary.clone());
    let mut batch = Batch::default();
    let mut n = 0i64;
    // `false` when the receiving side stopped (a database error): nothing more to do.
    let take = |batch: &mut Batch, n: i64, parsed: Result<ImportRow, RejectedRow>| {
        if n <= done {
            // Rows an earlier job did are read past; now and then the lease is renewed
            // meanwhile (an empty batch), so a slow download does not lose it.
            if n % SKIP_RENEW_EVERY == 0 {
                let renew = Batch {
                    rows_read: done,
                    ..Batch::default()
                };
                return out.blocking_send(renew).is_ok();
            }
            return true;
        }
        if batch.rows.len() + batch.rejected.len() + batch.folded >= BATCH {
            batch.rows_read = n - 1;
            if out.blocking_send(std::mem::take(batch)).is_err() {
                return false;
            }
        }
        match parsed {
            Ok(r) => match batch.keys.get(&r.key()) {
                // The same contact again in this batch: its non-empty cells win.
                Some(&at) => {
                    batch.rows[at].fold(r);
                    batch.folded += 1;
                }
                None => {
                    batch.keys.insert(r.key(), batch.rows.len());
                    batch.rows.push(r);
                }
            },
            Err(mut rejected) => {
                rejected.reason = short(rejected.reason);
                batch.rejected.push(rejected);
            }
        }
        true
    };
    match format {
        ImportFormat::Csv => {
            let mut csv = csv::ReaderBuilder::new()
                .flexible(true)
                .trim(csv::Trim::All)
                .from_reader(reader);
            let headers = csv
                .headers()
                .map_err(|e| format!("the file has no CSV header row: {e}"))?
                .clone();
            if headers.len() > MAX_COLUMNS {
                return Err(format!("the CSV has more than {MAX_COLUMNS} columns"));
            }
            if !headers.iter().any(|h| h == "email" || h == "phone") {
                return Err("the CSV header names neither an email nor a phone column".to_owned());
            }
            boundary.set(csv.position().byte());
            let mut records = csv.records();
            while let Some(record) = records.next() {
                let end = records.reader().position().byte();
                if end.saturating_sub(boundary.0.load(Ordering::Relaxed)) > MAX_RECORD {
                    return Err(record_too_long());
                }
                boundary.set(end);
                n += 1;
                // The line the record starts on (the header is line 1; a quoted cell may span
                // lines, and empty lines are skipped).
                let line = match &record {
                    Ok(r) => r.position().map(|p| p.line()),
                    Err(e) => e.position().map(|p| p.line()),
                };
                let row = line.and_then(|l| i64::try_from(l).ok()).unwrap_or(n + 1);
                let parsed = match record {
                    Ok(r) if r.len() > MAX_COLUMNS => Err(RejectedRow {
                        row,
                        reason: format!("more than {MAX_COLUMNS} cells"),
                    }),
                    Ok(r) => r
                        .deserialize::<RawRow>(Some(&headers))
                        .map_err(|e| RejectedRow {
                            row,
                            reason: e.to_string(),
                        })
                        .and_then(|raw| ImportRow::parse(row, raw)),
                    Err(e) if e.is_io_error() => {
                        return Err(match e.into_kind() {
                            csv::ErrorKind::Io(io) if io.to_string() == record_too_long() => {
                                record_too_long()
                            }
                            csv::ErrorKind::Io(io) => format!("the file broke off: {io}"),
                            other => format!("the file broke off: {other:?}"),
                        });
                    }
                    Err(e) => Err(RejectedRow {
                        row,
                        reason: e.to_string(),
                    }),
                };
                if !take(&mut batch, n, parsed) {
                    return Ok(());
                }
            }
        }
        ImportFormat::Ndjson => {
            let mut lines = BufReader::new(reader);
            let mut line = Vec::new();
            let mut row = 0i64;
            let mut at = 0u64;
            loop {
                let read = next_line(&mut lines, &mut line)?;
                if read == 0 {
                    break;
                }
                at += read as u64;
                boundary.set(at);
                row += 1;
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                n += 1;
                let parsed = serde_json::from_slice::<RawRow>(&line)
                    .map_err(|e| RejectedRow {
                        row,
                        reason: format!("not a JSON object of contact fields: {e}"),
                    })
                    .and_then(|raw| ImportRow::parse(row, raw));
                if !take(&mut batch, n, parsed) {
                    return Ok(());
                }
            }
        }
    }
    batch.rows_read = n;
    if !batch.rows.is_empty() || !batch.rejected.is_empty() || n > done {
        let _ = out.blocking_send(batch);
    }
    Ok(())
}

/// Reads the next NDJSON line into `line` (without its end): a line ends at `\n`, `\r\n` or
/// `\r` (JSON escapes both inside strings, so neither is part of a value). Returns the bytes
/// consumed, 0 at the end; a line past [`MAX_RECORD`] is an error, found before it is held.
fn next_line(reader: &mut impl BufRead, line: &mut Vec<u8>) -> Result<usize, String> {
    line.clear();
    let mut consumed = 0;
    loop {
        let buf = reader
            .fill_buf()
            .map_err(|e| format!("the file broke off: {e}"))?;
        if buf.is_empty() {
            return Ok(consumed);
        }
        match buf.iter().position(|b| *b == b'\n' || *b == b'\r') {
            Some(end) => {
                line.extend_from_slice(&buf[..end]);
                let cr = buf[end] == b'\r';
                reader.consume(end + 1);
                consumed += end + 1;
                // A `\r\n` is one line end.
                if cr {
                    let next = reader
                        .fill_buf()
                        .map_err(|e| format!("the file broke off: {e}"))?;
                    if next.first() == Some(&b'\n') {
                        reader.consume(1);
                        consumed += 1;
                    }
                }
                if line.len() as u64 > MAX_RECORD {
                    return Err(record_too_long());
                }
                return Ok(consumed);
            }
            None => {
                let n = buf.len();
                line.extend_from_slice(buf);
                reader.consume(n);
                consumed += n;
                if line.len() as u64 > MAX_RECORD {
                    return Err(record_too_long());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8]) -> Vec<String> {
        let mut reader = BufReader::with_capacity(4, input);
        let mut line = Vec::new();
        let mut out = Vec::new();
        while next_line(&mut reader, &mut line).unwrap() > 0 {
            out.push(String::from_utf8(line.clone()).unwrap());
        }
        out
    }

    #[test]
    fn an_unsubscribed_cell_of_a_csv_is_judged_whatever_the_reader_makes_of_it() {
        let text = "email,unsubscribed\na@example.com,1\nb@example.com,TRUE\nc@example.com,No\n\
                    d@example.com,\ne@example.com,1.0\nf@example.com,nan\ng@example.com,2\n";
        let mut reader = csv::ReaderBuilder::new().from_reader(text.as_bytes());
        let headers = reader.headers().unwrap().clone();
        let got: Vec<Result<bool, String>> = reader
            .records()
            .enumerate()
            .map(|(i, r)| {
                let raw: RawRow = r.unwrap().deserialize(Some(&headers)).unwrap();
                ImportRow::parse(i as i64 + 2, raw)
                    .map(|row| row.unsubscribed)
                    .map_err(|e| e.reason)
            })
            .collect();
        let refused = || Err("unsubscribed: must be true or false".to_owned());
        assert_eq!(
            got,
            [
                Ok(true),
                Ok(true),
                Ok(false),
                Ok(false),
                refused(),
                refused(),
                refused()
            ]
        );
    }

    #[test]
    fn ndjson_lines_end_at_any_line_end() {
        assert_eq!(lines(b"a\nb\r\nc\rd"), ["a", "b", "c", "d"]);
        assert_eq!(lines(b"a\r\r\nb\n"), ["a", "", "b"]);
    }

    #[test]
    fn a_line_past_the_bound_is_refused_before_it_is_held() {
        let long = vec![b'x'; MAX_RECORD as usize + 10];
        let mut reader = BufReader::new(&long[..]);
        let mut line = Vec::new();
        assert!(next_line(&mut reader, &mut line).is_err());
    }

    #[test]
    fn a_guarded_reader_stops_past_a_record_and_its_read_ahead() {
        let data = vec![b'"'; (MAX_RECORD + READ_AHEAD) as usize * 2];
        let mut guard = RecordGuard::new(Box::new(std::io::Cursor::new(data)));
        let mut buf = [0u8; 8192];
        let mut total = 0u64;
        let err = loop {
            match guard.read(&mut buf) {
                Ok(n) => total += n as u64,
                Err(e) => break e,
            }
        };
        assert_eq!(err.to_string(), record_too_long());
        assert!(total <= MAX_RECORD + READ_AHEAD + 8192, "{total}");
    }
}
