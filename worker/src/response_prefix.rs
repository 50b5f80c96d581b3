//! Reading what a third party answers (a provider, a webhook receiver) without trusting its
//! size.

/// The first `limit` bytes of an answer, as text (invalid UTF-8 replaced), without reading
/// the rest. Callers still pass it through `fields::storable` before storing it.
pub async fn read_prefix(mut response: reqwest::Response, limit: usize) -> String {
    let mut kept = Vec::new();
    while kept.len() < limit {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                kept.extend_from_slice(&chunk[..chunk.len().min(limit - kept.len())])
            }
            _ => break,
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}
