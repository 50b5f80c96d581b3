//! Subscription topics: kept per organization, a contact's preferences read and changed by the
//! API and by its links' page, a broadcast naming one skipping who left it (marketing only),
//! and one-click leaving only the broadcast's topic.

use parley_tests::TestApp;
use parley_tests::provider::FakeProvider;
use reqwest::Method;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::broadcasts::recipients;
use crate::suppressions::{contact, email_template_with as email_template};

async fn topic(app: &TestApp, name: &str) -> String {
    app.post("/api/v1/topics", json!({"name": name}))
        .await
        .expect(201)
        .id()
}

/// Another organization's API key, and a topic of it.
async fn foreign_topic(app: &TestApp) -> (String, String) {
    let (_, other) = app.new_org("Organization B").await;
    let topic = app
        .send(
            Method::POST,
            "/api/v1/topics",
            Some(&other),
            Some(&json!({"name": "Theirs"})),
        )
        .await
        .expect(201)
        .id();
    (other, topic)
}

/// A broadcast of `template` to `contacts` now, naming `topic` if any.
async fn send_on(app: &TestApp, template: &str, topic: Option<&str>, contacts: &[Uuid]) -> String {
    let mut body = json!({"broadcastName": "B", "templateId": template, "contactIds": contacts,
                          "sendNow": true});
    if let Some(topic) = topic {
        body["topicId"] = json!(topic);
    }
    app.post("/api/v1/broadcasts", body).await.expect(201).id()
}

/// Each recipient's status and error code, in `contacts`' order.
async fn outcomes(app: &TestApp, broadcast: &str, contacts: &[Uuid]) -> Vec<(String, Value)> {
    let all = recipients(app, broadcast).await;
    contacts
        .iter()
        .map(|c| {
            let r = all
                .iter()
                .find(|r| r["contactId"] == c.to_string())
                .expect("a recipient per contact");
            (
                r["status"].as_str().unwrap().to_owned(),
                r["errorCode"].clone(),
            )
        })
        .collect()
}

/// A contact's preference for `topic`: subscribed, and the source while it is not.
async fn preference(app: &TestApp, contact: Uuid, topic: &str) -> (bool, Value) {
    let s = app
        .get(&format!("/api/v1/contacts/{contact}/subscriptions"))
        .await;
    s.expect(200);
    let p = s.data()["topics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["topicId"] == topic)
        .expect("every topic is listed")
        .clone();
    (p["subscribed"].as_bool().unwrap(), p["source"].clone())
}

#[tokio::test]
async fn topics_are_the_organizations_and_a_contacts_preferences_change_through_the_api() {
    let app = TestApp::builder().start().await;
    let news = topic(&app, "News").await;
    app.post("/api/v1/topics", json!({"name": "news"}))
        .await
        .expect_error(409, "conflict");
    let offers = topic(&app, "Offers").await;
    let renamed = app
        .patch(
            &format!("/api/v1/topics/{offers}"),
            json!({"name": "Deals", "description": "Twice a month"}),
        )
        .await;
    renamed.expect(200);
    assert_eq!(renamed.data()["name"], "Deals");
    let list = app.get("/api/v1/topics").await;
    assert_eq!(list.data().as_array().unwrap().len(), 2);

    let c = contact(&app, "c@example.com").await;
    let s = app
        .get(&format!("/api/v1/contacts/{c}/subscriptions"))
        .await;
    s.expect(200);
    assert_eq!(s.data()["topics"][0]["topicId"], news, "oldest first");
    assert_eq!(s.data()["topics"][0]["subscribed"], true);
    assert_eq!(s.data()["channels"].as_array().unwrap().len(), 4);
    assert!(
        s.data()["channels"]
            .as_array()
            .unwrap()
            .iter()
            .all(|ch| ch["unsubscribed"] == false)
    );

    let changed = app
        .patch(
            &format!("/api/v1/contacts/{c}/subscriptions"),
            json!({"topics": [{"topicId": news, "subscribed": false}]}),
        )
        .await;
    changed.expect(200);
    assert_eq!(preference(&app, c, &news).await, (false, json!("api")));
    assert_eq!(preference(&app, c, &offers).await, (true, Value::Null));
    assert!(changed.data()["topics"][0]["unsubscribedAt"].is_string());

    // Another organization's topic, an unknown one, a repeat: 422, nothing changes.
    let (other, foreign) = foreign_topic(&app).await;
    for (body, field) in [
        (
            json!({"topics": [{"topicId": offers, "subscribed": false},
                              {"topicId": foreign, "subscribed": false}]}),
            "topics[1].topicId",
        ),
        (
            json!({"topics": [{"topicId": offers, "subscribed": false},
                              {"topicId": offers, "subscribed": true}]}),
            "topics[1].topicId",
        ),
        (json!({"topics": []}), "topics"),
    ] {
        let refused = app
            .patch(&format!("/api/v1/contacts/{c}/subscriptions"), body)
            .await;
        refused.expect(422);
        assert_eq!(refused.field(), field, "{}", refused.body);
    }
    assert_eq!(preference(&app, c, &offers).await, (true, Value::Null));
    app.patch(
        &format!("/api/v1/contacts/{}/subscriptions", Uuid::now_v7()),
        json!({"topics": [{"topicId": news, "subscribed": true}]}),
    )
    .await
    .expect(404);
    for path in [
        format!("/api/v1/contacts/{c}/subscriptions"),
        format!("/api/v1/topics/{news}"),
    ] {
        app.send(Method::GET, &path, Some(&other), None)
            .await
            .expect(404);
    }

    // Subscribing again removes the row.
    app.patch(
        &format!("/api/v1/contacts/{c}/subscriptions"),
        json!({"topics": [{"topicId": news, "subscribed": true}]}),
    )
    .await
    .expect(200);
    assert_eq!(preference(&app, c, &news).await, (true, Value::Null));

    // A broadcast names a topic of its organization; the topic stays while one does.
    let t = email_template(&app, "marketing", "Hi").await;
    let draft = app
        .post(
            "/api/v1/broadcasts",
            json!({"broadcastName": "B", "templateId": t, "contactIds": [c], "isDraft": true,
                   "topicId": foreign}),
        )
        .await;
    draft.expect(422);
    assert_eq!(draft.field(), "topicId");
    let draft = app
        .post(
            "/api/v1/broadcasts",
            json!({"broadcastName": "B", "templateId": t, "contactIds": [c], "isDraft": true,
                   "topicId": news}),
        )
        .await;
    draft.expect(201);
    assert_eq!(draft.data()["topicId"], news);
    let draft = draft.id();
    app.delete(&format!("/api/v1/topics/{news}"))
        .await
        .expect_error(409, "conflict");
    let cleared = app
        .patch(
            &format!("/api/v1/broadcasts/{draft}"),
            json!({"topicId": null}),
        )
        .await;
    cleared.expect(200);
    assert_eq!(cleared.data()["topicId"], Value::Null);
    app.delete(&format!("/api/v1/topics/{news}"))
        .await
        .expect(200);
    app.get(&format!("/api/v1/topics/{news}")).await.expect(404);
}

#[tokio::test]
async fn an_organization_keeps_at_most_a_hundred_topics() {
    let app = TestApp::builder().start().await;
    for i in 0..100 {
        topic(&app, &format!("Topic {i}")).await;
    }
    app.post("/api/v1/topics", json!({"name": "One more"}))
        .await
        .expect_error(409, "invalid_state");
}

#[tokio::test]
async fn a_topic_broadcast_skips_who_left_the_topic_and_one_click_leaves_only_that_topic() {
    let provider = FakeProvider::start().await;
    let app = TestApp::builder().own_database().start().await;
    let _worker = app
        .spawn_worker(&[
            ("PARLEY_CHANNEL_EMAIL_URL", provider.url.as_str()),
            ("PARLEY_PUBLIC_URL", app.base.as_str()),
        ])
        .await;
    let a = contact(&app, "a@example.com").await;
    let b = contact(&app, "b@example.com").await;
    let c = contact(&app, "c@example.com").await;
    let news = topic(&app, "News").await;
    let offers = topic(&app, "Offers").await;
    app.patch(
        &format!("/api/v1/contacts/{c}/subscriptions"),
        json!({"topics": [{"topicId": news, "subscribed": false}]}),
    )
    .await
    .expect(200);
    let marketing = email_template(&app, "marketing", "News: {{unsubscribe_url}}").await;
    let receipt = email_template(&app, "utility", "Your receipt").await;

    let first = send_on(&app, &marketing, Some(&news), &[a, b, c]).await;
    app.ended_broadcast(&first, 30).await;
    let skipped = ("skipped".to_owned(), json!("topic_unsubscribed"));
    let sent = ("sent".to_owned(), Value::Null);
    assert_eq!(
        outcomes(&app, &first, &[a, b, c]).await,
        vec![sent.clone(), sent.clone(), skipped.clone()]
    );
    // Transactional messages obey no topic.
    let transactional = send_on(&app, &receipt, Some(&news), &[c]).await;
    app.ended_broadcast(&transactional, 30).await;
    assert_eq!(
        outcomes(&app, &transactional, &[c]).await,
        vec![sent.clone()]
    );

    let link_of = |to: &str| -> String {
        provider
            .calls()
            .iter()
            .find(|call| call.body["to"] == to && call.body["unsubscribeUrl"].is_string())
            .expect("sent with a link")
            .body["unsubscribeUrl"]
            .as_str()
            .unwrap()
            .to_owned()
    };

    // One-click from a topic broadcast leaves its topic, not everything.
    let r = app
        .client
        .post(link_of("a@example.com"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("List-Unsubscribe=One-Click")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        preference(&app, a, &news).await,
        (false, json!("unsubscribe"))
    );
    assert_eq!(preference(&app, a, &offers).await, (true, Value::Null));
    assert!(
        app.get("/api/v1/suppressions?reason=unsubscribed")
            .await
            .data()
            .as_array()
            .unwrap()
            .is_empty(),
        "no ledger entry: the contact left one topic"
    );
    let events: Vec<Value> = app
        .events()
        .await
        .into_iter()
        .filter(|(name, _)| name == "contact.unsubscribed")
        .map(|(_, data)| data)
        .collect();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["topicId"], news);
    assert_eq!(events[0]["source"], "one_click");
    let counted = app.get(&format!("/api/v1/broadcasts/{first}")).await;
    assert_eq!(counted.data()["unsubscribedCount"], 1);

    // The page lists the topics; its form keeps the topics checked and leaves the others.
    let link_b = link_of("b@example.com");
    let page = app.client.get(&link_b).send().await.unwrap();
    let html = page.text().await.unwrap();
    assert!(
        html.contains(&format!("value=\"{news}\" checked>")),
        "{html}"
    );
    assert!(
        html.contains(&format!("value=\"{offers}\" checked>")),
        "{html}"
    );
    // A topic added after the page was shown, and another organization's, change nothing.
    let later = topic(&app, "Later").await;
    let (_, foreign) = foreign_topic(&app).await;
    let r = app
        .client
        .post(&link_b)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!(
            "action=topics&shown={news}&shown={offers}&shown={foreign}&topic={news}"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(preference(&app, b, &news).await, (true, Value::Null));
    assert_eq!(
        preference(&app, b, &offers).await,
        (false, json!("unsubscribe"))
    );
    assert_eq!(preference(&app, b, &later).await, (true, Value::Null));
    let left: Vec<Value> = app
        .events()
        .await
        .into_iter()
        .filter(|(name, data)| name == "contact.unsubscribed" && data["contactId"] == b.to_string())
        .map(|(_, data)| data)
        .collect();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["topicId"], offers);
    assert_eq!(left[0]["source"], "page");
    let counted = app.get(&format!("/api/v1/broadcasts/{first}")).await;
    assert_eq!(counted.data()["unsubscribedCount"], 2, "a and b, once each");

    // The next sends: a topic's broadcast skips who left it; one naming no topic skips nobody.
    let on_offers = send_on(&app, &marketing, Some(&offers), &[a, b]).await;
    app.ended_broadcast(&on_offers, 30).await;
    assert_eq!(
        outcomes(&app, &on_offers, &[a, b]).await,
        vec![sent.clone(), skipped.clone()]
    );
    let general = send_on(&app, &marketing, None, &[a, b, c]).await;
    app.ended_broadcast(&general, 30).await;
    assert_eq!(
        outcomes(&app, &general, &[a, b, c]).await,
        vec![sent.clone(), sent.clone(), sent]
    );
}
