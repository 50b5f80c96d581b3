//! One record of every kind in an organization, made through the API, and path templates
//! filled with their ids.

use serde_json::json;

use crate::TestApp;

#[derive(Debug, Clone)]
pub struct Fixture {
    pub api_key: String,
    pub tag: String,
    pub segment: String,
    pub company: String,
    pub contact: String,
    pub user: String,
    pub team: String,
    pub lead: String,
    pub template: String,
    pub collection: String,
    pub faq_category: String,
    pub faq: String,
    pub category: String,
    pub attribute: String,
    pub broadcast: String,
    pub webhook: String,
    pub delivery: String,
    pub sla_policy: String,
    pub conversation: String,
    pub ticket: String,
    /// An uploaded file (written to Postgres: the fixture's tests run without object storage).
    pub file: String,
    /// An entry of the suppression ledger.
    pub suppression: String,
    /// A subscription topic.
    pub topic: String,
}

impl Fixture {
    pub async fn create(app: &TestApp) -> Fixture {
        let api_key = app
            .post(
                "/api/v1/api-keys",
                json!({"name": "fixture", "scopes": ["contacts:read"]}),
            )
            .await
            .expect(201)
            .id();
        let tag = app
            .post("/api/v1/tags", json!({"name": "vip"}))
            .await
            .expect(201)
            .id();
        let segment = app
            .post(
                "/api/v1/segments",
                json!({"name": "VIPs", "filter": {"tagIds": [tag]}}),
            )
            .await
            .expect(201)
            .id();
        let company = app
            .post("/api/v1/companies", json!({"name": "Engines Ltd"}))
            .await
            .expect(201)
            .id();
        let contact = app
            .post(
                "/api/v1/contacts",
                json!({"source": "website", "name": "Ada", "email": "ada@example.com",
                       "companyId": company, "tagIds": [tag]}),
            )
            .await
            .expect(201)
            .id();
        let user = app
            .post(
                "/api/v1/users",
                json!({"firstName": "Grace", "lastName": "Hopper", "email": "grace@example.com"}),
            )
            .await
            .expect(201)
            .id();
        let team = app
            .post(
                "/api/v1/teams",
                json!({"name": "support", "memberIds": [user], "createdBy": user}),
            )
            .await
            .expect(201)
            .id();
        let lead = app
            .post(
                "/api/v1/leads",
                json!({"name": "Charles", "assigneeId": user}),
            )
            .await
            .expect(201)
            .id();
        let template = app
            .post(
                "/api/v1/templates",
                json!({"name": "Hello", "channel": "email", "body": "Hi {{contact.name}}"}),
            )
            .await
            .expect(201)
            .id();
        let collection = app
            .post(
                "/api/v1/faq-collections",
                json!({"name": "Getting started"}),
            )
            .await
            .expect(201)
            .id();
        let faq_category = app
            .post(
                &format!("/api/v1/faq-collections/{collection}/categories"),
                json!({"name": "Basics"}),
            )
            .await
            .expect(201)
            .id();
        let faq = app
            .post(
                &format!("/api/v1/faq-collections/{collection}/faqs"),
                json!({"title": "What is Parley?", "content": "A service.", "categoryId": faq_category}),
            )
            .await
            .expect(201)
            .id();
        let category = app
            .post("/api/v1/categories", json!({"name": "Billing"}))
            .await
            .expect(201)
            .id();
        let topic = app
            .post("/api/v1/topics", json!({"name": "Newsletter"}))
            .await
            .expect(201)
            .id();
        let suppression = app
            .post(
                "/api/v1/suppressions",
                json!({"entries": [{"email": "fixture@example.com"}]}),
            )
            .await
            .expect(201)
            .data()["added"][0]["id"]
            .as_str()
            .expect("an entry's id")
            .to_owned();
        let attribute = app
            .post(
                "/api/v1/message-attributes",
                json!({"key": "order_number", "label": "Order"}),
            )
            .await
            .expect(201)
            .id();
        let broadcast = app
            .post(
                "/api/v1/broadcasts",
                json!({"broadcastName": "Draft", "templateId": template, "contactIds": [contact]}),
            )
            .await
            .expect(201)
            .id();
        let webhook = app
            .post(
                "/api/v1/webhooks",
                json!({"url": "https://hooks.example.com/parley", "events": ["lead.created"]}),
            )
            .await
            .expect(201)
            .id();
        let delivery = app
            .post(&format!("/api/v1/webhooks/{webhook}/test"), json!({}))
            .await
            .expect(200)
            .data()["deliveryId"]
            .as_str()
            .expect("a delivery id")
            .to_owned();
        let sla_policy = app
            .post(
                "/api/v1/sla-policies",
                json!({"name": "Standard", "firstResponseSeconds": 3600, "nextResponseSeconds": 7200,
                       "resolutionSeconds": 86400, "businessHoursOnly": false, "warningThresholdSeconds": 600}),
            )
            .await
            .expect(201)
            .id();
        let conversation = app
            .post(
                "/api/v1/conversations",
                json!({"contactId": contact, "channel": "email", "subject": "Order", "categoryId": category,
                       "tagIds": [tag], "message": {"content": "Where is my order?"}}),
            )
            .await
            .expect(201)
            .id();
        app.post(
            &format!("/api/v1/conversations/{conversation}/assignees"),
            json!({"userIds": [user]}),
        )
        .await
        .expect(200);
        app.post(
            &format!("/api/v1/conversations/{conversation}/teams"),
            json!({"teamIds": [team]}),
        )
        .await
        .expect(200);
        let ticket = app
            .post(
                "/api/v1/tickets",
                json!({"subject": "Refund", "customerId": contact, "teamId": team, "assigneeIds": [user],
                       "tagIds": [tag], "conversationId": conversation}),
            )
            .await
            .expect(201)
            .id();
        let file = crate::seed::file(app, "image").await.to_string();
        Fixture {
            file,
            suppression,
            topic,
            sla_policy,
            conversation,
            ticket,
            webhook,
            delivery,
            broadcast,
            api_key,
            tag,
            segment,
            company,
            contact,
            user,
            team,
            lead,
            template,
            collection,
            faq_category,
            faq,
            category,
            attribute,
        }
    }

    /// The record id a path's `{id}` stands for, by the path's resource.
    fn id_for(&self, path: &str) -> &str {
        let resource = path
            .trim_start_matches("/api/v1/")
            .split('/')
            .next()
            .unwrap_or("");
        match resource {
            "api-keys" => &self.api_key,
            "contacts" => &self.contact,
            "tags" => &self.tag,
            "segments" => &self.segment,
            "companies" => &self.company,
            "users" => &self.user,
            "teams" => &self.team,
            "leads" => &self.lead,
            "templates" => &self.template,
            "faq-collections" => &self.collection,
            "categories" => &self.category,
            "message-attributes" => &self.attribute,
            "broadcasts" => &self.broadcast,
            "webhooks" => &self.webhook,
            "sla-policies" => &self.sla_policy,
            "conversations" => &self.conversation,
            "tickets" => &self.ticket,
            "files" => &self.file,
            "suppressions" => &self.suppression,
            "topics" => &self.topic,
            other => panic!("the fixture has no record for /{other}: add one"),
        }
    }

    /// `path` with every `{...}` replaced by a fixture id.
    pub fn fill(&self, path: &str) -> String {
        if !path.contains('{') {
            return path.to_owned();
        }
        path.replace("{id}", self.id_for(path))
            .replace("{faqId}", &self.faq)
            .replace("{categoryId}", &self.faq_category)
            .replace("{userId}", &self.user)
            .replace("{teamId}", &self.team)
            .replace("{channel}", "email")
            .replace("{deliveryId}", &self.delivery)
            // No recovery is made for the fixture: a recovery id names none (404).
            .replace("{recoveryId}", "01900000-0000-7000-8000-000000000000")
    }
}
