//! A contact's data on request: its export holds everything kept of it and nothing of
//! another; its erasure removes it and keeps its addresses only as hashes, which the send, the
//! preview and the ledger's filters still find when an import brings an address back.

use std::collections::HashSet;

use parley_tests::TestApp;
use parley_tests::provider::FakeProvider;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::broadcasts::send_now;
use crate::imports::import;
use crate::suppressions::{contact, email_template_with};

fn ids(items: &Value) -> HashSet<String> {
    items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect()
}

fn set(ids: &[&str]) -> HashSet<String> {
    ids.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test]
async fn a_contacts_export_holds_everything_kept_of_it_and_nothing_of_another() {
    let app = TestApp::builder().start().await;
    let lead = app
        .post(
            "/api/v1/leads",
            json!({"name": "Ada", "email": "ada@example.com", "phone": "+14155550100"}),
        )
        .await
        .id();
    let converted = app
        .post(&format!("/api/v1/leads/{lead}/convert"), json!({}))
        .await;
    converted.expect(200);
    let ada = converted.id();
    app.patch(
        &format!("/api/v1/contacts/{ada}"),
        json!({"name": "Ada L."}),
    )
    .await
    .expect(200);
    let bob = contact(&app, "bob@example.com").await;

    let mut conversations = Vec::new();
    for who in [ada.clone(), bob.to_string()] {
        let c = app
            .post(
                "/api/v1/conversations",
                json!({"contactId": who, "channel": "email"}),
            )
            .await
            .id();
        app.post(
            &format!("/api/v1/conversations/{c}/messages"),
            json!({"content": format!("Hello from {who}")}),
        )
        .await
        .expect(201);
        conversations.push(c);
    }
    let ticket = app
        .post(
            "/api/v1/tickets",
            json!({"subject": "Broken", "customerId": ada}),
        )
        .await
        .id();
    app.post(
        "/api/v1/tickets",
        json!({"subject": "Bob's", "customerId": bob}),
    )
    .await
    .expect(201);
    let added = app
        .post(
            "/api/v1/suppressions",
            json!({"entries": [
                {"email": "ADA@example.com", "reason": "unsubscribed", "channel": "email"},
                {"contactId": ada, "reason": "manual"},
                {"phone": "+14155550100", "reason": "manual"},
                {"email": "bob@example.com"},
            ]}),
        )
        .await;
    added.expect(201);
    let topic = app
        .post("/api/v1/topics", json!({"name": "News"}))
        .await
        .id();
    app.patch(
        &format!("/api/v1/contacts/{ada}/subscriptions"),
        json!({"topics": [{"topicId": topic, "subscribed": false}]}),
    )
    .await
    .expect(200);

    let export = app.get(&format!("/api/v1/contacts/{ada}/export")).await;
    export.expect(200);
    let e = export.data();
    assert_eq!(e["contact"]["id"], ada.as_str());
    assert_eq!(e["contact"]["name"], "Ada L.");
    assert_eq!(e["contact"]["phone"], "+14155550100");
    let activities = e["contact"]["activities"].as_array().unwrap();
    assert!(
        activities.iter().any(|a| a["newValue"] == "Ada L."),
        "{activities:?}"
    );
    assert_eq!(e["messages"], json!([]));
    let exported: Vec<&Value> = e["conversations"].as_array().unwrap().iter().collect();
    assert_eq!(exported.len(), 1, "{e}");
    assert_eq!(exported[0]["conversation"]["id"], conversations[0].as_str());
    assert_eq!(
        exported[0]["messages"][0]["content"],
        format!("Hello from {ada}")
    );
    assert_eq!(ids(&e["tickets"]), set(&[&ticket]));
    assert_eq!(ids(&e["leads"]), set(&[&lead]));
    assert_eq!(e["subscriptions"]["topics"][0]["topicId"], topic.as_str());
    assert_eq!(e["subscriptions"]["topics"][0]["subscribed"], false);
    let email_channel = e["subscriptions"]["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["channel"] == "email")
        .unwrap();
    assert_eq!(email_channel["unsubscribed"], true);
    // Its three entries, by its email, its id and its phone; not Bob's.
    let entries = e["suppressions"].as_array().unwrap();
    assert_eq!(entries.len(), 3, "{entries:?}");
    assert!(entries.iter().all(|s| s["email"] != "bob@example.com"));
    assert!(entries.iter().all(|s| s["erased"] == false));
    assert_eq!(e["truncated"], json!([]));

    // Another organization's contact, and no contact at all, are 404.
    let (_, other) = app.new_org("Other").await;
    for key in [&other, &app.key] {
        let path = if key == &app.key {
            format!("/api/v1/contacts/{}/export", Uuid::now_v7())
        } else {
            format!("/api/v1/contacts/{ada}/export")
        };
        app.send(reqwest::Method::GET, &path, Some(key), None)
            .await
            .expect(404);
        let erase = path.replace("/export", "/erase");
        app.send(reqwest::Method::POST, &erase, Some(key), None)
            .await
            .expect(404);
    }
    app.get(&format!("/api/v1/contacts/{ada}"))
        .await
        .expect(200);
}

#[tokio::test]
async fn erasing_a_contact_keeps_its_addresses_hashed_and_a_reimport_is_sent_nothing() {
    let provider = FakeProvider::start().await;
    let app = TestApp::builder().own_database().start().await;
    let _worker = app
        .spawn_worker(&[("PARLEY_CHANNEL_EMAIL_URL", &provider.url)])
        .await;
    let ada: Uuid = app
        .post(
            "/api/v1/contacts",
            json!({"source": "web", "email": "Ada@Example.com", "phone": "+14155550100",
                   "externalId": "ADA-1"}),
        )
        .await
        .id()
        .parse()
        .unwrap();
    let keeper = contact(&app, "keeper@example.com").await;
    // Two contacts sharing a phone: erasing one keeps the other's number.
    let shared_phone = json!("+14155550199");
    let mut sharing = Vec::new();
    for email in ["bea@example.com", "carol@example.com"] {
        let id: Uuid = app
            .post(
                "/api/v1/contacts",
                json!({"source": "web", "email": email, "phone": shared_phone}),
            )
            .await
            .id()
            .parse()
            .unwrap();
        sharing.push(id);
    }
    let (bea, carol) = (sharing[0], sharing[1]);
    let marketing = email_template_with(&app, "marketing", "Hello").await;
    let utility = email_template_with(&app, "utility", "Your receipt").await;
    let first = send_now(&app, &marketing, &[ada, keeper]).await;
    app.ended_broadcast(&first, 30).await;
    // What names Ada's address outside the ledger: a soft bounce counted against it, and a
    // provider's error that quotes it.
    sqlx::query(
        "INSERT INTO soft_bounces (recipient_id, organization_id, channel, subject, occurred_at)
         VALUES ($1, $2, 'email', 'ada@example.com', now())",
    )
    .bind(Uuid::now_v7())
    .bind(app.org_id)
    .execute(&app.pool)
    .await
    .unwrap();
    sqlx::query(
        "UPDATE broadcast_recipients SET error_message = 'mailbox Ada@Example.com is full'
         WHERE contact_id = $1",
    )
    .bind(ada)
    .execute(&app.pool)
    .await
    .unwrap();
    // A recipient record a send has not decided yet (a draft's, written as the fan-out would).
    let draft_for_ada = app
        .post(
            "/api/v1/broadcasts",
            json!({"broadcastName": "Later", "templateId": marketing, "contactIds": [ada]}),
        )
        .await
        .id();
    let undecided = Uuid::now_v7();
    sqlx::query(
        "INSERT INTO broadcast_recipients (id, organization_id, broadcast_id, contact_id)
         VALUES ($1, $2, $3, $4)",
    )
    .bind(undecided)
    .bind(app.org_id)
    .bind(draft_for_ada.parse::<Uuid>().unwrap())
    .bind(ada)
    .execute(&app.pool)
    .await
    .unwrap();
    // Another organization knows the same address: its own, untouched.
    let (_, other) = app.new_org("Other").await;
    let other_ada = app
        .send(
            reqwest::Method::POST,
            "/api/v1/contacts",
            Some(&other),
            Some(&json!({"source": "web", "email": "ada@example.com"})),
        )
        .await
        .id();
    let conversation = app
        .post(
            "/api/v1/conversations",
            json!({"contactId": ada, "channel": "email"}),
        )
        .await
        .id();
    let ticket = app
        .post(
            "/api/v1/tickets",
            json!({"subject": "Help", "customerId": ada}),
        )
        .await
        .id();
    let lead = app
        .post("/api/v1/leads", json!({"email": "ADA@example.com"}))
        .await
        .id();
    app.post(
        "/api/v1/suppressions",
        json!({"entries": [
            {"email": "ada@example.com", "reason": "unsubscribed", "channel": "email"},
            {"email": "held@example.com", "reason": "hard_bounce"},
            {"contactId": ada, "reason": "hard_bounce", "channel": "social_a"},
        ]}),
    )
    .await
    .expect(201);

    let erased = app
        .post(&format!("/api/v1/contacts/{ada}/erase"), json!({}))
        .await;
    erased.expect(200);
    // Three addresses (email, phone, external id; the email its message went to is its own);
    // entries: `erased` for each, the unsubscribe by the email's hash, the bounce by each
    // address's hash.
    assert_eq!(
        erased.data().clone(),
        json!({"id": ada, "hashedAddresses": 3, "ledgerEntries": 7})
    );
    let (status, code): (String, Option<String>) =
        sqlx::query_as("SELECT status, error_code FROM broadcast_recipients WHERE id = $1")
            .bind(undecided)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(
        (status.as_str(), code.as_deref()),
        ("skipped", Some("contact_deleted"))
    );
    for gone in [
        format!("/api/v1/contacts/{ada}"),
        format!("/api/v1/conversations/{conversation}"),
        format!("/api/v1/tickets/{ticket}"),
        format!("/api/v1/leads/{lead}"),
    ] {
        app.get(&gone).await.expect(404);
    }
    app.post(&format!("/api/v1/contacts/{ada}/erase"), json!({}))
        .await
        .expect(404);
    // No row names an address any more; the recipient record stays, without its address.
    let named: i64 = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM suppressions
                 WHERE organization_id = $1
                   AND (email = 'ada@example.com' OR phone = '+14155550100'
                        OR contact_id = $2))
              + (SELECT count(*) FROM broadcast_recipients
                 WHERE contact_id = $2
                   AND (sent_to IS NOT NULL OR error_message ILIKE '%ada@example.com%'))
              + (SELECT count(*) FROM leads WHERE organization_id = $1)
              + (SELECT count(*) FROM soft_bounces WHERE organization_id = $1)",
    )
    .bind(app.org_id)
    .bind(ada)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(named, 0);
    let kept = app
        .get(&format!("/api/v1/contacts/{keeper}/messages?pageSize=10"))
        .await;
    assert_eq!(kept.data()[0]["status"], "sent");

    // The ledger finds the hashes by the address, in any case, and shows no address.
    let listed = app.get("/api/v1/suppressions?email=ADA@EXAMPLE.COM").await;
    let entries = listed.data().as_array().unwrap().clone();
    let mut reasons: Vec<&str> = entries
        .iter()
        .map(|e| e["reason"].as_str().unwrap())
        .collect();
    reasons.sort();
    assert_eq!(reasons, ["erased", "hard_bounce", "unsubscribed"]);
    for e in &entries {
        assert_eq!(e["erased"], true, "{e}");
        assert_eq!(
            (&e["email"], &e["phone"], &e["contactId"]),
            (&Value::Null, &Value::Null, &Value::Null)
        );
    }
    let by_phone = app.get("/api/v1/suppressions?phone=%2B14155550100").await;
    assert_eq!(by_phone.data().as_array().unwrap().len(), 2);
    // The other organization's ledger holds nothing of it, and its preview would send.
    let theirs = app
        .send(
            reqwest::Method::GET,
            "/api/v1/suppressions?email=ada@example.com",
            Some(&other),
            None,
        )
        .await;
    assert_eq!(theirs.data(), &json!([]));
    let their_template = app
        .send(
            reqwest::Method::POST,
            "/api/v1/templates",
            Some(&other),
            Some(
                &json!({"name": "T", "channel": "email", "body": "Hello", "subject": "Hello",
                         "status": "active", "category": "utility"}),
            ),
        )
        .await
        .id();
    let their_draft = app
        .send(
            reqwest::Method::POST,
            "/api/v1/broadcasts",
            Some(&other),
            Some(&json!({"broadcastName": "D", "templateId": their_template,
                         "contactIds": [other_ada]})),
        )
        .await
        .id();
    let their_preview = app
        .send(
            reqwest::Method::POST,
            &format!("/api/v1/broadcasts/{their_draft}/preview"),
            Some(&other),
            None,
        )
        .await;
    assert_eq!(
        their_preview.data()["wouldSend"],
        1,
        "{}",
        their_preview.body
    );

    // Erasing Bea erases her email, not the phone Carol still has.
    let bea_erased = app
        .post(&format!("/api/v1/contacts/{bea}/erase"), json!({}))
        .await;
    assert_eq!(
        bea_erased.data().clone(),
        json!({"id": bea, "hashedAddresses": 1, "ledgerEntries": 1})
    );
    let phone = app.get("/api/v1/suppressions?phone=%2B14155550199").await;
    assert_eq!(phone.data(), &json!([]));
    // `erased` entries are the erasure's only.
    let refused = app
        .post(
            "/api/v1/suppressions",
            json!({"entries": [{"email": "x@example.com", "reason": "erased"}]}),
        )
        .await;
    refused.expect(422);
    assert_eq!(refused.field(), "entries[0].reason");

    // An import brings the address back (in another case): marketing and transactional
    // messages skip it, and the preview says so. The import's `unsubscribed` column adds an
    // entry of its own (source `import`), which only marketing obeys; `no` adds none.
    let imported = import(
        &app,
        json!({"format": "csv", "data": "email,name,unsubscribed,externalId\n\
            ADA@example.COM,Ada,,\nnew@example.com,New,yes,\nfree@example.com,Free,no,\n\
            ext@example.com,Ext,,ada-1\nHELD@example.com,Held,,\n"}),
    )
    .await;
    assert_eq!(imported["created"], 5, "{imported}");
    let by_email = |email: &'static str| {
        let pool = app.pool.clone();
        let org = app.org_id;
        async move {
            sqlx::query_scalar::<_, Uuid>(
                "SELECT id FROM contacts WHERE organization_id = $1 AND lower(email) = $2",
            )
            .bind(org)
            .bind(email)
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    let again = by_email("ada@example.com").await;
    let new = by_email("new@example.com").await;
    let free = by_email("free@example.com").await;
    // Found by its external id alone (the social channels' address), in another case.
    let ext = by_email("ext@example.com").await;
    // An address the ledger held before any contact had it stays held when imported.
    let held = by_email("held@example.com").await;
    let entry = app.get("/api/v1/suppressions?email=new@example.com").await;
    let entry = entry.data().as_array().unwrap().clone();
    assert_eq!(entry.len(), 1, "{entry:?}");
    assert_eq!(
        (
            &entry[0]["reason"],
            &entry[0]["source"],
            &entry[0]["channel"]
        ),
        (&json!("unsubscribed"), &json!("import"), &Value::Null)
    );
    let none = app.get("/api/v1/suppressions?email=free@example.com").await;
    assert_eq!(none.data(), &json!([]));
    let draft = app
        .post(
            "/api/v1/broadcasts",
            json!({"broadcastName": "Draft", "templateId": marketing,
                   "contactIds": [again, keeper],
                   "templateVariables": {"body": [{"type": "text", "value": "A-1"}]}}),
        )
        .await
        .id();
    let preview = app
        .post(&format!("/api/v1/broadcasts/{draft}/preview"), json!({}))
        .await;
    preview.expect(200);
    let skipped: Vec<&Value> = preview.data()["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["status"] == "skipped")
        .collect();
    assert_eq!(skipped.len(), 1, "{}", preview.data());
    assert_eq!(skipped[0]["errorCode"], "suppressed_erased");
    assert_eq!(skipped[0]["sampleContactIds"], json!([again]));
    for (template, new_code) in [
        (&marketing, json!("suppressed_unsubscribed")),
        (&utility, Value::Null),
    ] {
        let b = send_now(
            &app,
            template,
            &[again, keeper, new, free, carol, ext, held],
        )
        .await;
        app.ended_broadcast(&b, 30).await;
        let rs = crate::broadcasts::recipients(&app, &b).await;
        assert_eq!(rs.len(), 7);
        for r in rs {
            let code = match r["contactId"].as_str().unwrap().parse::<Uuid>().unwrap() {
                c if c == again || c == ext => json!("suppressed_erased"),
                c if c == held => json!("suppressed_hard_bounce"),
                c if c == new => new_code.clone(),
                _ => Value::Null,
            };
            let status = if code.is_null() { "sent" } else { "skipped" };
            assert_eq!(
                (&r["status"], &r["errorCode"]),
                (&json!(status), &code),
                "{r}"
            );
        }
    }
    // Its records show where each message went; the contact's export shows the hashed
    // entries that hold it.
    let sent = app
        .get(&format!("/api/v1/contacts/{keeper}/messages?pageSize=1"))
        .await;
    assert_eq!(sent.data()[0]["sentTo"], "keeper@example.com");
    let export = app.get(&format!("/api/v1/contacts/{again}/export")).await;
    let held = export.data()["suppressions"].as_array().unwrap().clone();
    assert_eq!(held.len(), 3, "{held:?}");
    assert!(held.iter().all(|e| e["erased"] == true));
}
