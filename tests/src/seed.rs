//! Test data: single records made through the API as a client would (`contact`, `user`), and
//! bulk rows written straight to Postgres for tests that need many fast.

use uuid::Uuid;

use crate::TestApp;

/// A broadcast sent now by email ("Hi") to `n` new contacts, made through the API; its id.
pub async fn email_broadcast(app: &TestApp, n: usize) -> String {
    let contacts = contacts(app, n).await;
    let template = app
        .post(
            "/api/v1/templates",
            serde_json::json!({"name": "T", "channel": "email", "body": "Hi"}),
        )
        .await
        .id();
    app.post(
        "/api/v1/broadcasts",
        serde_json::json!({"broadcastName": "B", "templateId": template, "contactIds": contacts, "sendNow": true}),
    )
    .await
    .expect(201)
    .id()
}

/// A contact named `name`, made through the API; its id.
pub async fn contact(app: &TestApp, name: &str) -> String {
    app.post(
        "/api/v1/contacts",
        serde_json::json!({"source": "test", "name": name}),
    )
    .await
    .expect(201)
    .id()
}

/// A user with the email `email`, made through the API; its id.
pub async fn user(app: &TestApp, email: &str) -> String {
    app.post(
        "/api/v1/users",
        serde_json::json!({"firstName": "Grace", "lastName": "Hopper", "email": email}),
    )
    .await
    .expect(201)
    .id()
}

/// `n` contacts with an email and a phone in the test's organization, in creation order.
pub async fn contacts(app: &TestApp, n: usize) -> Vec<Uuid> {
    let ids: Vec<Uuid> = (0..n).map(|_| Uuid::now_v7()).collect();
    let emails: Vec<String> = (0..n)
        .map(|i| format!("c{i}-{}@example.com", &ids[i].simple().to_string()[20..]))
        .collect();
    let phones: Vec<String> = (0..n).map(|i| format!("+1555{:07}", i)).collect();
    sqlx::query(
        "INSERT INTO contacts (id, organization_id, name, email, phone, source)
         SELECT id, $1, 'Contact ' || n, email, phone, 'seed'
         FROM unnest($2::uuid[], $3::text[], $4::text[]) WITH ORDINALITY AS u(id, email, phone, n)",
    )
    .bind(app.org_id)
    .bind(&ids)
    .bind(&emails)
    .bind(&phones)
    .execute(&app.pool)
    .await
    .expect("seed contacts");
    ids
}

/// A file record (as an upload would leave it), of `file_type` (`image`, `document`, ...).
pub async fn file(app: &TestApp, file_type: &str) -> Uuid {
    let id = Uuid::now_v7();
    sqlx::query(
        "INSERT INTO files (id, organization_id, filename, file_type, content_type, file_size,
            storage_key, status)
         VALUES ($1, $2, 'photo.png', $3, 'image/png', 1024, $4, 'uploaded')",
    )
    .bind(id)
    .bind(app.org_id)
    .bind(file_type)
    .bind(format!("org/{}/{id}/photo.png", app.org_id))
    .execute(&app.pool)
    .await
    .expect("seed file");
    id
}
