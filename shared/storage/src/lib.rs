//! Object storage: S3 or any S3-compatible store (MinIO, Ceph, Garage, R2, s3s-fs). Clients
//! upload and download straight to and from the bucket with URLs Parley presigns; Parley
//! itself signs, looks at (HEAD) and deletes objects, and stores the imports sent to it.

use secrecy::ExposeSecret;
use std::time::Duration;

use aws_sdk_s3::Client;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region, RequestChecksumCalculation};
use aws_sdk_s3::error::SdkError;
use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;

use parley_config::StorageSettings;

/// A storage call failed: the store is down, refused our credentials, or answered nonsense.
#[derive(Debug, thiserror::Error)]
#[error("object storage: {0}")]
pub struct StorageError(String);

fn failed(err: impl std::fmt::Display) -> StorageError {
    StorageError(err.to_string())
}

/// What HEAD found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    pub size: i64,
    /// The ETag without its quotes (the MD5 of the body for a single-part upload).
    pub etag: Option<String>,
}

/// What [`Storage::put`] stores: bytes in memory or a file on disk.
pub enum ObjectBody {
    Bytes(bytes::Bytes),
    File(std::path::PathBuf),
}

#[derive(Clone, Debug)]
pub struct Storage {
    client: Client,
    bucket: String,
    /// Where an object lives, unsigned: `<base>/<key>`.
    object_base: String,
}

impl Storage {
    pub fn new(s: &StorageSettings) -> Self {
        let mut config = aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(s.region.clone()))
            .credentials_provider(Credentials::new(
                &s.access_key_id,
                s.secret_access_key.expose_secret(),
                s.session_token
                    .as_ref()
                    .map(|t| t.expose_secret().to_owned()),
                None,
                "parley-environment",
            ))
            .force_path_style(s.force_path_style)
            // A presigned PUT must not carry a checksum of an empty body; the store checks
            // the size and Parley records the ETag.
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(3))
                    .operation_timeout(Duration::from_secs(10))
                    .build(),
            );
        if let Some(endpoint) = &s.endpoint {
            config = config.endpoint_url(endpoint);
        }
        let object_base = match (&s.endpoint, s.force_path_style) {
            (Some(endpoint), true) => format!("{}/{}", endpoint.trim_end_matches('/'), s.bucket),
            (Some(endpoint), false) => match endpoint.split_once("://") {
                Some((scheme, host)) => format!("{scheme}://{}.{host}", s.bucket),
                None => format!("{endpoint}/{}", s.bucket),
            },
            (None, _) => format!("https://{}.s3.{}.amazonaws.com", s.bucket, s.region),
        };
        Storage {
            client: Client::from_conf(config.build()),
            bucket: s.bucket.clone(),
            object_base: object_base.trim_end_matches('/').to_owned(),
        }
    }

    /// The object's unsigned URL (readable only where the bucket is public).
    pub fn object_url(&self, key: &str) -> String {
        format!("{}/{key}", self.object_base)
    }

    /// A URL that lets its holder PUT exactly `size` bytes of `content_type` at `key` until
    /// it expires: both headers are part of the signature.
    pub async fn presign_upload(
        &self,
        key: &str,
        content_type: &str,
        size: i64,
        expires_in: Duration,
    ) -> Result<String, StorageError> {
        let request = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type(content_type)
            .content_length(size)
            .presigned(PresigningConfig::expires_in(expires_in).map_err(failed)?)
            .await
            .map_err(failed)?;
        Ok(request.uri().to_owned())
    }

    /// A URL that lets its holder GET the object until it expires.
    pub async fn presign_download(
        &self,
        key: &str,
        expires_in: Duration,
    ) -> Result<String, StorageError> {
        let request = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .presigned(PresigningConfig::expires_in(expires_in).map_err(failed)?)
            .await
            .map_err(failed)?;
        Ok(request.uri().to_owned())
    }

    /// Stores `body` at `key` (Parley's own uploads: an import sent in the request). The
    /// operation may take up to `timeout` (a long body over a slow store). Returns the ETag
    /// without its quotes.
    pub async fn put(
        &self,
        key: &str,
        content_type: &str,
        body: ObjectBody,
        timeout: Duration,
    ) -> Result<Option<String>, StorageError> {
        let body = match body {
            ObjectBody::Bytes(bytes) => ByteStream::from(bytes),
            ObjectBody::File(path) => ByteStream::from_path(path).await.map_err(failed)?,
        };
        let put = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type(content_type)
            .body(body)
            .customize()
            .config_override(
                aws_sdk_s3::Config::builder().timeout_config(
                    TimeoutConfig::builder()
                        .operation_timeout(timeout)
                        .operation_attempt_timeout(timeout)
                        .build(),
                ),
            )
            .send()
            .await
            .map_err(|e| failed(aws_sdk_s3::error::DisplayErrorContext(e)))?;
        Ok(put.e_tag().map(|e| e.trim_matches('"').to_owned()))
    }

    /// The object's size and ETag; `None` when there is no such object.
    pub async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, StorageError> {
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(head) => Ok(Some(ObjectInfo {
                size: head.content_length().unwrap_or(0),
                etag: head.e_tag().map(|e| e.trim_matches('"').to_owned()),
            })),
            // HEAD answers carry no body, so a 404 is the whole of "no such object".
            Err(SdkError::ServiceError(e)) if e.raw().status().as_u16() == 404 => Ok(None),
            Err(err) => Err(failed(aws_sdk_s3::error::DisplayErrorContext(err))),
        }
    }

    /// Removes the object; removing a missing object succeeds.
    pub async fn delete(&self, key: &str) -> Result<(), StorageError> {
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| failed(aws_sdk_s3::error::DisplayErrorContext(e)))?;
        Ok(())
    }

    /// Creates the bucket unless it exists (development and tests; production buckets are
    /// made by whoever owns the store).
    pub async fn ensure_bucket(&self) -> Result<(), StorageError> {
        if self
            .client
            .head_bucket()
            .bucket(&self.bucket)
            .send()
            .await
            .is_ok()
        {
            return Ok(());
        }
        match self
            .client
            .create_bucket()
            .bucket(&self.bucket)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(SdkError::ServiceError(e))
                if e.err().is_bucket_already_owned_by_you()
                    || e.err().is_bucket_already_exists() =>
            {
                Ok(())
            }
            Err(err) => Err(failed(aws_sdk_s3::error::DisplayErrorContext(err))),
        }
    }
}
