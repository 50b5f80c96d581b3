//! Subscription topics (docs/api.md, Topics): an organization's kinds of marketing message
//! (a newsletter, offers, product news). A contact gets every topic until it unsubscribes from
//! one; a broadcast naming a topic skips the contacts unsubscribed from it
//! (`topic_unsubscribed`). Transactional messages obey no topic.

use serde::{Deserialize, Serialize};

use crate::Channel;
use parley_types::error::AppError;
use parley_types::fields::{Name, Text, non_null, nullable};
use parley_types::ids::{OrgId, TopicId};
use parley_types::time::Timestamp;

/// The most topics an organization keeps: the page lists them all, and a preferences call
/// names at most this many.
pub const MAX_TOPICS: usize = 100;

/// The `errorCode` of a recipient skipped for its topic.
pub const TOPIC_UNSUBSCRIBED: &str = "topic_unsubscribed";

parley_types::text_enum!(
    /// Who unsubscribed a contact from a topic: the API, the contact by a link or its page,
    /// or an import.
    TopicSource { Api = "api", Unsubscribe = "unsubscribe", Import = "import" }
);

#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Topic {
    pub id: TopicId,
    pub organization_id: OrgId,
    /// Unique in the organization, compared without case; shown on the unsubscribe page.
    pub name: String,
    pub description: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl parley_types::list::Keyed for Topic {
    fn cursor(&self) -> parley_types::list::Cursor {
        parley_types::list::Cursor {
            created_at: self.created_at,
            id: self.id.uuid(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"name": "Newsletter", "description": "News of the month"})))]
pub struct CreateTopic {
    pub name: Name,
    pub description: Option<Text>,
}

impl CreateTopic {
    pub fn into_topic(self, organization_id: OrgId, now: Timestamp) -> Topic {
        Topic {
            id: TopicId::generate(),
            organization_id,
            name: self.name.into(),
            description: self.description.map(Into::into),
            created_at: now,
            updated_at: now,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"description": "Offers, twice a month"})))]
pub struct UpdateTopic {
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub name: Option<Name>,
    #[serde(default, deserialize_with = "nullable")]
    pub description: Option<Option<Text>>,
}

impl UpdateTopic {
    pub fn apply(self, t: &mut Topic, now: Timestamp) {
        if let Some(name) = self.name {
            t.name = name.into();
        }
        if let Some(description) = self.description {
            t.description = description.map(Into::into);
        }
        t.updated_at = now;
    }
}

/// A contact's preference for one topic.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TopicPreference {
    pub topic_id: TopicId,
    pub name: String,
    /// False once the contact unsubscribed from the topic.
    pub subscribed: bool,
    /// Who unsubscribed it, while it is unsubscribed.
    pub source: Option<TopicSource>,
    /// When it unsubscribed, while it is unsubscribed.
    pub unsubscribed_at: Option<Timestamp>,
}

/// Whether the ledger's `unsubscribed` entries hold the contact's marketing on a channel.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ChannelSubscription {
    pub channel: Channel,
    /// An `unsubscribed` entry of the suppression ledger holds the contact's marketing on this
    /// channel (every topic): changed through `/suppressions` or the contact's links.
    pub unsubscribed: bool,
}

/// `GET /contacts/{id}/subscriptions`: every topic of the organization, and the channels.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Subscriptions {
    pub contact_id: parley_types::ids::ContactId,
    /// The organization's topics, oldest first.
    pub topics: Vec<TopicPreference>,
    pub channels: Vec<ChannelSubscription>,
}

/// One topic's new preference.
#[derive(Debug, Clone, Copy, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TopicChoice {
    pub topic_id: TopicId,
    pub subscribed: bool,
}

/// `PATCH /contacts/{id}/subscriptions`: the topics named change; the others stay.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"topics": [{"topicId": "0193a1f2-7c4e-7d2a-9b1c-2f3e4d5c6b7a", "subscribed": false}]})))]
pub struct UpdateSubscriptions {
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 100))]
    pub topics: Vec<TopicChoice>,
}

impl UpdateSubscriptions {
    /// The choices, each topic once: 1 to [`MAX_TOPICS`], a topic named twice refused.
    pub fn check(self) -> Result<Vec<TopicChoice>, AppError> {
        if self.topics.is_empty() {
            return Err(AppError::validation("topics", "required", "at least one"));
        }
        if self.topics.len() > MAX_TOPICS {
            return Err(AppError::validation(
                "topics",
                "too_long",
                format!("at most {MAX_TOPICS}"),
            ));
        }
        let mut seen = std::collections::HashSet::with_capacity(self.topics.len());
        for (i, c) in self.topics.iter().enumerate() {
            if !seen.insert(c.topic_id) {
                return Err(AppError::validation(
                    format!("topics[{i}].topicId"),
                    "duplicate",
                    "each topic once",
                ));
            }
        }
        Ok(self.topics)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preferences_call_names_each_topic_once_and_at_most_the_limit() {
        let one = TopicId::generate();
        let choice = |topic_id, subscribed| TopicChoice {
            topic_id,
            subscribed,
        };
        assert!(UpdateSubscriptions { topics: vec![] }.check().is_err());
        let twice = UpdateSubscriptions {
            topics: vec![choice(one, true), choice(one, false)],
        };
        match twice.check().unwrap_err() {
            AppError::Validation(errors) => assert_eq!(errors[0].field, "topics[1].topicId"),
            other => panic!("{other:?}"),
        }
        let many = UpdateSubscriptions {
            topics: (0..=MAX_TOPICS)
                .map(|_| choice(TopicId::generate(), false))
                .collect(),
        };
        assert!(many.check().is_err());
        let fine = UpdateSubscriptions {
            topics: vec![choice(one, false)],
        };
        assert_eq!(fine.check().unwrap().len(), 1);
    }
}
