//! FAQ collections, the FAQ categories and FAQ entries inside them.

use parley_types::ids::{FaqCollectionId, OrgId};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use parley_types::error::AppError;
use parley_types::fields::{
    Color, DisplayOrder, Locale, LongText, Name, ShortText, Slug, Text, check_len, non_null,
    nullable,
};
use parley_types::time::Timestamp;

/// Tags one FAQ may carry.
const MAX_TAGS: usize = 20;

/// Reading speed behind `readTime`, in words per minute.
const WORDS_PER_MINUTE: usize = 200;

/// Minutes to read `content`: words at 200 a minute, rounded up; at least 1.
pub fn read_time(content: &str) -> i32 {
    let words = content.split_whitespace().count();
    words.div_ceil(WORDS_PER_MINUTE).max(1) as i32
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct FaqCollection {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub name: String,
    /// Unique per locale in the organization; derived from `name` when not given.
    pub slug: String,
    pub description: Option<String>,
    pub color: Option<String>,
    pub icon: Option<String>,
    pub display_order: i32,
    pub is_published: bool,
    pub locale: String,
    /// Number of FAQs in the collection.
    pub faq_count: i64,
    /// Sum of the FAQs' `readTime`, in minutes.
    pub total_read_time: i64,
    /// The collection's FAQs, when one collection is read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub faqs: Option<Vec<Faq>>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(FaqCollection);

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({
    "name": "Getting started", "description": "First steps", "color": "#1a73e8",
    "icon": "rocket", "displayOrder": 1, "isPublished": true, "locale": "en"
})))]
pub struct CreateFaqCollection {
    pub name: Name,
    pub slug: Option<Slug>,
    pub description: Option<Text>,
    pub color: Option<Color>,
    pub icon: Option<ShortText>,
    pub display_order: Option<DisplayOrder>,
    pub is_published: Option<bool>,
    pub locale: Option<Locale>,
}

impl CreateFaqCollection {
    /// The collection, and whether its slug was derived (and may take a suffix to be unique).
    pub fn into_collection(self, organization_id: Uuid) -> (FaqCollection, bool) {
        let now = Timestamp::now();
        let derived = self.slug.is_none();
        let slug = self.slug.map_or_else(
            || parley_types::fields::slugify(self.name.as_str()),
            Into::into,
        );
        let c = FaqCollection {
            id: parley_types::ids::new_id(),
            organization_id,
            name: self.name.into(),
            slug,
            description: self.description.map(Into::into),
            color: self.color.map(Into::into),
            icon: self.icon.map(Into::into),
            display_order: self.display_order.map_or(0, DisplayOrder::get),
            is_published: self.is_published.unwrap_or(false),
            locale: self.locale.map_or_else(|| "en".to_owned(), Into::into),
            faq_count: 0,
            total_read_time: 0,
            faqs: None,
            created_at: now,
            updated_at: now,
        };
        (c, derived)
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"isPublished": true})))]
pub struct UpdateFaqCollection {
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub name: Option<Name>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub slug: Option<Slug>,
    #[serde(default, deserialize_with = "nullable")]
    pub description: Option<Option<Text>>,
    #[serde(default, deserialize_with = "nullable")]
    pub color: Option<Option<Color>>,
    #[serde(default, deserialize_with = "nullable")]
    pub icon: Option<Option<ShortText>>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub display_order: Option<DisplayOrder>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub is_published: Option<bool>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub locale: Option<Locale>,
}

impl UpdateFaqCollection {
    pub fn apply(self, c: &mut FaqCollection) {
        if let Some(v) = self.name {
            c.name = v.into();
        }
        if let Some(v) = self.slug {
            c.slug = v.into();
        }
        if let Some(v) = self.description {
            c.description = v.map(Into::into);
        }
        if let Some(v) = self.color {
            c.color = v.map(Into::into);
        }
        if let Some(v) = self.icon {
            c.icon = v.map(Into::into);
        }
        if let Some(v) = self.display_order {
            c.display_order = v.get();
        }
        if let Some(v) = self.is_published {
            c.is_published = v;
        }
        if let Some(v) = self.locale {
            c.locale = v.into();
        }
        c.updated_at = Timestamp::now();
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct FaqCollectionFilter {
    pub locale: Option<ShortText>,
    pub is_published: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct FaqCategory {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub collection_id: Uuid,
    pub name: String,
    pub display_order: i32,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(FaqCategory);

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"name": "Billing", "displayOrder": 2})))]
pub struct CreateFaqCategory {
    /// Unique in the collection, compared without case.
    pub name: Name,
    pub display_order: Option<DisplayOrder>,
}

impl CreateFaqCategory {
    pub fn into_category(
        self,
        organization_id: OrgId,
        collection_id: FaqCollectionId,
    ) -> FaqCategory {
        let now = Timestamp::now();
        FaqCategory {
            id: parley_types::ids::new_id(),
            organization_id: organization_id.uuid(),
            collection_id: collection_id.uuid(),
            name: self.name.into(),
            display_order: self.display_order.map_or(0, DisplayOrder::get),
            created_at: now,
            updated_at: now,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"displayOrder": 3})))]
pub struct UpdateFaqCategory {
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub name: Option<Name>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub display_order: Option<DisplayOrder>,
}

impl UpdateFaqCategory {
    pub fn apply(self, c: &mut FaqCategory) {
        if let Some(v) = self.name {
            c.name = v.into();
        }
        if let Some(v) = self.display_order {
            c.display_order = v.get();
        }
        c.updated_at = Timestamp::now();
    }
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Faq {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub collection_id: Uuid,
    pub category_id: Option<Uuid>,
    pub category: Option<FaqCategory>,
    pub title: String,
    /// Unique per locale in the organization; derived from `title` when not given.
    pub slug: String,
    pub content: String,
    pub description: Option<String>,
    pub tags: Vec<String>,
    pub locale: String,
    pub is_featured: bool,
    pub is_published: bool,
    pub display_order: i32,
    pub views: i64,
    /// Minutes to read `content`, at 200 words a minute.
    pub read_time: i32,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(Faq);

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({
    "title": "How do I reset my password?",
    "content": "Open Settings, then Security, and choose Reset password.",
    "tags": ["account", "security"], "isFeatured": true, "isPublished": true
})))]
pub struct CreateFaq {
    pub title: Name,
    pub content: LongText,
    pub slug: Option<Slug>,
    pub description: Option<Text>,
    /// A category of the same collection.
    pub category_id: Option<Uuid>,
    #[cfg_attr(feature = "openapi", schema(max_items = 20))]
    pub tags: Option<Vec<ShortText>>,
    /// Defaults to the collection's locale.
    pub locale: Option<Locale>,
    pub is_featured: Option<bool>,
    pub is_published: Option<bool>,
    pub display_order: Option<DisplayOrder>,
}

impl CreateFaq {
    /// The FAQ, and whether its slug was derived.
    pub fn into_faq(self, collection: &FaqCollection) -> Result<(Faq, bool), AppError> {
        check_len("tags", self.tags.as_ref().map_or(0, Vec::len), MAX_TAGS)?;
        let now = Timestamp::now();
        let derived = self.slug.is_none();
        let slug = self.slug.map_or_else(
            || parley_types::fields::slugify(self.title.as_str()),
            Into::into,
        );
        let faq = Faq {
            id: parley_types::ids::new_id(),
            organization_id: collection.organization_id,
            collection_id: collection.id,
            category_id: self.category_id,
            category: None,
            read_time: read_time(self.content.as_str()),
            title: self.title.into(),
            slug,
            content: self.content.into(),
            description: self.description.map(Into::into),
            tags: self
                .tags
                .unwrap_or_default()
                .into_iter()
                .map(Into::into)
                .collect(),
            locale: self
                .locale
                .map_or_else(|| collection.locale.clone(), Into::into),
            is_featured: self.is_featured.unwrap_or(false),
            is_published: self.is_published.unwrap_or(false),
            display_order: self.display_order.map_or(0, DisplayOrder::get),
            views: 0,
            created_at: now,
            updated_at: now,
        };
        Ok((faq, derived))
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"isFeatured": false})))]
pub struct UpdateFaq {
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub title: Option<Name>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub content: Option<LongText>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub slug: Option<Slug>,
    #[serde(default, deserialize_with = "nullable")]
    pub description: Option<Option<Text>>,
    #[serde(default, deserialize_with = "nullable")]
    pub category_id: Option<Option<Uuid>>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[cfg_attr(feature = "openapi", schema(max_items = 20))]
    pub tags: Option<Vec<ShortText>>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub locale: Option<Locale>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub is_featured: Option<bool>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub is_published: Option<bool>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub display_order: Option<DisplayOrder>,
}

impl UpdateFaq {
    pub fn apply(self, f: &mut Faq) -> Result<(), AppError> {
        check_len("tags", self.tags.as_ref().map_or(0, Vec::len), MAX_TAGS)?;
        if let Some(v) = self.title {
            f.title = v.into();
        }
        if let Some(v) = self.content {
            f.content = v.into();
            f.read_time = read_time(&f.content);
        }
        if let Some(v) = self.slug {
            f.slug = v.into();
        }
        if let Some(v) = self.description {
            f.description = v.map(Into::into);
        }
        if let Some(v) = self.category_id {
            f.category_id = v;
        }
        if let Some(v) = self.tags {
            f.tags = v.into_iter().map(Into::into).collect();
        }
        if let Some(v) = self.locale {
            f.locale = v.into();
        }
        if let Some(v) = self.is_featured {
            f.is_featured = v;
        }
        if let Some(v) = self.is_published {
            f.is_published = v;
        }
        if let Some(v) = self.display_order {
            f.display_order = v.get();
        }
        f.updated_at = Timestamp::now();
        Ok(())
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct FaqFilter {
    pub category_id: Option<Uuid>,
    pub is_published: Option<bool>,
    pub is_featured: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_time_rounds_up_and_is_at_least_a_minute() {
        assert_eq!(read_time(""), 1);
        assert_eq!(read_time(&"word ".repeat(200)), 1);
        assert_eq!(read_time(&"word ".repeat(201)), 2);
    }
}
