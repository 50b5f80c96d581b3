use parley_types::ids::{ContactId, OrgId};
use sqlx::{PgConnection, PgExecutor, PgPool, Postgres, QueryBuilder};
use uuid::Uuid;

use super::tags::{TagLink, tags_of};
use parley_domain::contacts::{Contact, ContactActivity, ContactFilter, ContactType};
use parley_types::list::{Page, PageRequest, Total};
use parley_types::time::Timestamp;

/// Contacts as the checked statement `SELECT ... FROM <function>` reads them, where the function
/// returns rows of the view `contact_rows` (migration 20261127000024: functions keep their
/// plans; tags and activities are read apart). A function's columns may all be null as sqlx
/// sees them: those that cannot are marked.
macro_rules! contact_rows {
    ($function:literal, $($arg:expr),* $(,)?) => {
        sqlx::query_as!(
            ContactRow,
            r#"SELECT id AS "id!", organization_id AS "organization_id!",
                kind AS "kind!: ContactType", name, email, phone, avatar, country, language,
                position, source AS "source!", external_id, channel_data, company_id,
                company_name, company_domain, widget_guest_id,
                do_not_contact AS "do_not_contact!", is_anonymous AS "is_anonymous!",
                is_potential_client AS "is_potential_client!",
                messaging_a_opted_out AS "messaging_a_opted_out!", messaging_a_opted_out_at,
                created_at AS "created_at!", updated_at AS "updated_at!", timezone
             FROM "# + $function,
            $($arg),*
        )
    };
}

/// Inserts a new contact and its `created` activity in one statement (atomic without a
/// transaction) and fills in its company's name and domain: nothing is read back. A company
/// that is not the organization's is the foreign key's 422.
pub async fn insert_created(
    db: impl PgExecutor<'_>,
    c: &mut Contact,
    created: &ContactActivity,
) -> Result<(), sqlx::Error> {
    let company = sqlx::query!(
        r#"WITH c AS (
               INSERT INTO contacts (id, organization_id, type, name, email, phone, avatar,
                   country, language, position, source, external_id, channel_data, company_id,
                   widget_guest_id, do_not_contact, is_anonymous, is_potential_client,
                   messaging_a_opted_out, messaging_a_opted_out_at, created_at, updated_at,
                   timezone)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
                   $17, $18, $19, $20, $21, $22, $23)
               RETURNING id, organization_id, company_id
           ), activity AS (
               INSERT INTO contact_activities (id, organization_id, contact_id, type, actor_id,
                   actor_name, actor_type, description, metadata, old_value, new_value,
                   created_at, updated_at)
               SELECT $24::uuid, organization_id, id, $25::text, $26::text, $27::text, $28::text,
                   $29::text, $30::text, $31::text, $32::text, $33::timestamptz, $34::timestamptz
               FROM c
           )
           SELECT co.name AS "name?", co.domain
           FROM c LEFT JOIN companies co
               ON co.organization_id = c.organization_id AND co.id = c.company_id"#,
        c.id,
        c.organization_id,
        c.kind.as_str(),
        c.name.as_deref(),
        c.email.as_deref(),
        c.phone.as_deref(),
        c.avatar.as_deref(),
        c.country.as_deref(),
        c.language.as_deref(),
        c.position.as_deref(),
        &c.source,
        c.external_id.as_deref(),
        c.channel_data.as_deref(),
        c.company_id,
        c.widget_guest_id.as_deref(),
        c.do_not_contact,
        c.is_anonymous,
        c.is_potential_client,
        c.messaging_a_opted_out,
        c.messaging_a_opted_out_at,
        c.created_at,
        c.updated_at,
        c.timezone.as_deref(),
        created.id,
        created.kind.as_str(),
        created.actor_id.as_deref(),
        created.actor_name.as_deref(),
        &created.actor_type,
        &created.description,
        created.metadata.as_deref(),
        created.old_value.as_deref(),
        created.new_value.as_deref(),
        created.created_at,
        created.updated_at,
    )
    .fetch_one(db)
    .await?;
    c.company_name = company.name;
    c.company_domain = company.domain;
    c.fill_company();
    Ok(())
}

pub async fn update(db: impl PgExecutor<'_>, c: &Contact) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE contacts SET type = $3, name = $4, email = $5, phone = $6, avatar = $7,
            country = $8, language = $9, position = $10, source = $11, external_id = $12,
            channel_data = $13, company_id = $14, widget_guest_id = $15, do_not_contact = $16,
            is_anonymous = $17, is_potential_client = $18, messaging_a_opted_out = $19,
            messaging_a_opted_out_at = $20, updated_at = $21, timezone = $22
         WHERE organization_id = $1 AND id = $2",
        c.organization_id,
        c.id,
        c.kind.as_str(),
        c.name.as_deref(),
        c.email.as_deref(),
        c.phone.as_deref(),
        c.avatar.as_deref(),
        c.country.as_deref(),
        c.language.as_deref(),
        c.position.as_deref(),
        &c.source,
        c.external_id.as_deref(),
        c.channel_data.as_deref(),
        c.company_id,
        c.widget_guest_id.as_deref(),
        c.do_not_contact,
        c.is_anonymous,
        c.is_potential_client,
        c.messaging_a_opted_out,
        c.messaging_a_opted_out_at,
        c.updated_at,
        c.timezone.as_deref(),
    )
    .execute(db)
    .await
    .map(|_| ())
}

/// Whether the organization has the contact (one statement; nothing of it is read).
pub async fn exists(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: ContactId,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM contacts WHERE organization_id = $1 AND id = $2) AS "exists!""#,
        org.uuid(),
        id.uuid(),
    )
    .fetch_one(db)
    .await
}

/// One contact with its company and tags (not its activities).
pub async fn get(
    conn: &mut PgConnection,
    org: OrgId,
    id: ContactId,
) -> Result<Option<Contact>, sqlx::Error> {
    Ok(read(conn, org, &[id.uuid()]).await?.pop())
}

/// Locks a contact for a change in this transaction.
pub async fn lock(
    conn: &mut PgConnection,
    org: OrgId,
    id: ContactId,
) -> Result<Option<Contact>, sqlx::Error> {
    let found: Option<Uuid> = sqlx::query_scalar!(
        "SELECT id FROM contacts WHERE organization_id = $1 AND id = $2 FOR UPDATE",
        org.uuid(),
        id.uuid(),
    )
    .fetch_optional(&mut *conn)
    .await?;
    match found {
        Some(_) => get(conn, org, id).await,
        None => Ok(None),
    }
}

/// Whether the organization has the contact, its row locked until the transaction ends
/// against changes and deletion (`FOR NO KEY UPDATE`), not against rows that reference it: one
/// change of its topic preferences at a time (two would take the topics' rows in crossed
/// orders), none while it is deleted, and no wait for a receipt whose ledger entry names it
/// while its erasure waits for that receipt's recipients.
pub async fn hold(conn: &mut PgConnection, org: OrgId, id: ContactId) -> Result<bool, sqlx::Error> {
    Ok(sqlx::query!(
        "SELECT id FROM contacts WHERE organization_id = $1 AND id = $2 FOR NO KEY UPDATE",
        org.uuid(),
        id.uuid(),
    )
    .fetch_optional(conn)
    .await?
    .is_some())
}

/// A contact of the organization with this email (without case) or phone, for lead conversion.
pub async fn find_by_email_or_phone(
    conn: &mut PgConnection,
    org: OrgId,
    email: Option<&str>,
    phone: Option<&str>,
) -> Result<Option<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT id FROM contacts WHERE organization_id = $1
           AND ((lower(email) = lower($2)) OR (phone = $3))
         ORDER BY (lower(email) = lower($2)) DESC NULLS LAST, created_at
         LIMIT 1",
        org.uuid(),
        email,
        phone,
    )
    .fetch_optional(conn)
    .await
}

fn push_filter(qb: &mut QueryBuilder<Postgres>, org: OrgId, f: &ContactFilter, tag: Option<Uuid>) {
    qb.push(" WHERE c.organization_id = ").push_bind(org);
    if let Some(tag) = tag {
        qb.push(" AND EXISTS (SELECT 1 FROM contact_tags ct WHERE ct.contact_id = c.id AND ct.tag_id = ")
            .push_bind(tag)
            .push(")");
    }
    if let Some(company) = f.company_id {
        qb.push(" AND c.company_id = ").push_bind(company);
    }
    if let Some(source) = &f.source {
        qb.push(" AND c.source = ")
            .push_bind(source.as_str().to_owned());
    }
    if let Some(kind) = f.kind {
        qb.push(" AND c.type = ").push_bind(kind);
    }
    if let Some(email) = &f.email {
        qb.push(" AND lower(c.email) = lower(")
            .push_bind(email.as_str().to_owned())
            .push(")");
    }
}

/// `f.tag` is resolved by the caller into `tag` (a tag id) first.
pub async fn list(
    pool: &PgPool,
    org: OrgId,
    f: &ContactFilter,
    tag: Option<Uuid>,
    page: &PageRequest,
) -> Result<Page<Contact>, sqlx::Error> {
    let unfiltered = tag.is_none()
        && f.company_id.is_none()
        && f.source.is_none()
        && f.kind.is_none()
        && f.email.is_none();
    if unfiltered {
        return unfiltered_page(&mut *pool.acquire().await?, org, page).await;
    }
    super::page_of(
        pool,
        "FROM contacts c",
        "c",
        |qb| push_filter(qb, org, f, tag),
        page,
        |ids| async move { read(&mut *pool.acquire().await?, org, &ids).await },
    )
    .await
}

/// A page of the organization's contacts without a filter: the organization's kept total (nothing
/// counted), the page's rows with their company by one checked statement (no statement for the
/// page's ids first), and their tags. A missing cursor is the list's start: the row comparison
/// then starts past every row, so one statement serves both.
async fn unfiltered_page(
    conn: &mut PgConnection,
    org: OrgId,
    req: &PageRequest,
) -> Result<Page<Contact>, sqlx::Error> {
    let total = super::totals::kept(&mut *conn, org, super::totals::List::Contacts).await?;
    let (after_at, after_id) = match &req.cursor {
        Some(c) => (Some(c.created_at), Some(c.id)),
        None => (None, None),
    };
    let limit = i64::from(req.size) + 1;
    let offset = match req.cursor {
        Some(_) => 0,
        None => i64::from(req.page - 1) * i64::from(req.size),
    };
    let rows = contact_rows!(
        // A function's rows are not promised in the order it returned them without this.
        "contacts_page($1, $2, $3, $4, $5, $6) WITH ORDINALITY ORDER BY ordinality",
        org.uuid(),
        after_at as _,
        after_id,
        req.descending,
        limit,
        offset,
    )
    .fetch_all(&mut *conn)
    .await?;
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let mut tags = tags_of(&mut *conn, TagLink::Contact, &ids).await?;
    let contacts = rows
        .into_iter()
        .map(|r| {
            let mut c = Contact::from(r);
            c.tags = tags.remove(&c.id).unwrap_or_default();
            c
        })
        .collect();
    Ok(Page::new(contacts, req, Total::Kept(total)))
}

/// The id of the organization's tag named `name_or_id` (an id, or a name without case).
pub async fn resolve_tag(
    db: impl PgExecutor<'_>,
    org: OrgId,
    name_or_id: &str,
) -> Result<Option<Uuid>, sqlx::Error> {
    let id = name_or_id.parse::<Uuid>().ok();
    sqlx::query_scalar!(
        "SELECT id FROM tags WHERE organization_id = $1 AND (id = $2 OR lower(name) = lower($3))",
        org.uuid(),
        id,
        name_or_id,
    )
    .fetch_optional(db)
    .await
}

pub async fn delete(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: ContactId,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM contacts WHERE organization_id = $1 AND id = $2",
        org.uuid(),
        id.uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn add_activities(
    conn: &mut PgConnection,
    org: OrgId,
    activities: &[ContactActivity],
) -> Result<(), sqlx::Error> {
    if activities.is_empty() {
        return Ok(());
    }
    let mut qb = QueryBuilder::<Postgres>::new(
        "INSERT INTO contact_activities (id, organization_id, contact_id, type, actor_id,
            actor_name, actor_type, description, metadata, old_value, new_value, created_at,
            updated_at) ",
    );
    qb.push_values(activities, |mut b, a| {
        b.push_bind(a.id)
            .push_bind(org)
            .push_bind(a.contact_id)
            .push_bind(a.kind)
            .push_bind(a.actor_id.clone())
            .push_bind(a.actor_name.clone())
            .push_bind(a.actor_type.clone())
            .push_bind(a.description.clone())
            .push_bind(a.metadata.clone())
            .push_bind(a.old_value.clone())
            .push_bind(a.new_value.clone())
            .push_bind(a.created_at)
            .push_bind(a.updated_at);
    });
    qb.build().execute(conn).await.map(|_| ())
}

/// A contact's history, newest first, at most `limit` entries.
pub async fn activities(
    db: impl PgExecutor<'_>,
    contact: ContactId,
    limit: i64,
) -> Result<Vec<ContactActivity>, sqlx::Error> {
    sqlx::query_as!(
        ContactActivity,
        "SELECT id, contact_id, type AS kind, actor_id, actor_name, actor_type, description,
                metadata, old_value, new_value, created_at, updated_at
         FROM contact_activities WHERE contact_id = $1
         ORDER BY created_at DESC, id DESC LIMIT $2",
        contact.uuid(),
        limit,
    )
    .fetch_all(db)
    .await
}

/// Several contacts with their company and tags, by id.
pub async fn get_many(
    conn: &mut PgConnection,
    org: OrgId,
    ids: &[Uuid],
) -> Result<std::collections::HashMap<Uuid, Contact>, sqlx::Error> {
    if ids.is_empty() {
        return Ok(Default::default());
    }
    let rows = read(conn, org, ids).await?;
    Ok(rows.into_iter().map(|c| (c.id, c)).collect())
}

/// The contacts of `org` among `ids`, in no particular order, with their company and tags.
async fn read(
    conn: &mut PgConnection,
    org: OrgId,
    ids: &[Uuid],
) -> Result<Vec<Contact>, sqlx::Error> {
    let rows = contact_rows!("contacts_by_ids($1, $2)", org.uuid(), ids)
        .fetch_all(&mut *conn)
        .await?;
    let mut tags = tags_of(&mut *conn, TagLink::Contact, ids).await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let mut c = Contact::from(r);
            c.tags = tags.remove(&c.id).unwrap_or_default();
            c
        })
        .collect())
}

/// A contact as [`contact_rows`] reads it.
struct ContactRow {
    id: Uuid,
    organization_id: Uuid,
    kind: ContactType,
    name: Option<String>,
    email: Option<String>,
    phone: Option<String>,
    avatar: Option<String>,
    country: Option<String>,
    language: Option<String>,
    position: Option<String>,
    timezone: Option<String>,
    source: String,
    external_id: Option<String>,
    channel_data: Option<String>,
    company_id: Option<Uuid>,
    company_name: Option<String>,
    company_domain: Option<String>,
    widget_guest_id: Option<String>,
    do_not_contact: bool,
    is_anonymous: bool,
    is_potential_client: bool,
    messaging_a_opted_out: bool,
    messaging_a_opted_out_at: Option<Timestamp>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl From<ContactRow> for Contact {
    fn from(r: ContactRow) -> Self {
        let mut c = Self {
            id: r.id,
            organization_id: r.organization_id,
            kind: r.kind,
            name: r.name,
            email: r.email,
            phone: r.phone,
            avatar: r.avatar,
            country: r.country,
            language: r.language,
            position: r.position,
            timezone: r.timezone,
            source: r.source,
            external_id: r.external_id,
            channel_data: r.channel_data,
            company_id: r.company_id,
            company_name: r.company_name,
            company: Default::default(),
            company_domain: r.company_domain,
            widget_guest_id: r.widget_guest_id,
            do_not_contact: r.do_not_contact,
            is_anonymous: r.is_anonymous,
            is_potential_client: r.is_potential_client,
            messaging_a_opted_out: r.messaging_a_opted_out,
            messaging_a_opted_out_at: r.messaging_a_opted_out_at,
            tags: Default::default(),
            activities: Default::default(),
            created_at: r.created_at,
            updated_at: r.updated_at,
        };
        c.fill_company();
        c
    }
}
