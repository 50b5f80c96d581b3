//! An app with one worker sending email through a [`FakeProvider`] on 127.0.0.1: what the
//! broadcast and fair-share tests send through.

use std::time::Duration;

use crate::provider::FakeProvider;
use crate::{AppBuilder, TestApp, TestWorker};

pub struct EmailWorker {
    pub app: TestApp,
    pub provider: FakeProvider,
    pub worker: TestWorker,
}

impl EmailWorker {
    /// Starts `app` on a database of its own (the worker's ticker reconciles every broadcast
    /// in its database), a provider that answers after `delay`, and one worker with
    /// `worker_env`, its email channel pointed at the provider.
    pub async fn start(
        app: AppBuilder,
        delay: Duration,
        worker_env: &[(&str, &str)],
    ) -> EmailWorker {
        let provider = FakeProvider::start().await;
        provider.delay(delay);
        let app = app.own_database().start().await;
        let mut env = vec![("PARLEY_CHANNEL_EMAIL_URL", provider.url.as_str())];
        env.extend_from_slice(worker_env);
        let worker = app.spawn_worker(&env).await;
        EmailWorker {
            app,
            provider,
            worker,
        }
    }
}
