//! Checks that ids a request refers to are records of the caller's organization, so an unknown
//! id is a 422 naming the field (`tagIds[1]`) rather than a foreign-key failure.

use parley_types::ids::OrgId;
use sqlx::PgConnection;
use uuid::Uuid;

use std::collections::HashSet;

use crate::error::app_error;

use parley_types::error::{AppError, AppResult, FieldError, MAX_DETAILS};

#[derive(Debug, Clone, Copy)]
pub enum RefTable {
    Tags,
    Companies,
    Users,
    Teams,
    Templates,
    Contacts,
    Categories,
    Conversations,
    Files,
    Segments,
    Topics,
}

impl RefTable {
    fn missing_message(self, id: Uuid) -> String {
        match self {
            RefTable::Files => {
                format!(
                    "{id} is not an uploaded file of this organization (complete the upload first)"
                )
            }
            _ => format!("{id} is not a record of this organization"),
        }
    }
}

/// The ids of `ids` that are not records of `table` in organization `org`.
async fn missing(
    conn: &mut PgConnection,
    table: RefTable,
    org: OrgId,
    ids: &[Uuid],
) -> Result<Vec<Uuid>, sqlx::Error> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    // One checked statement per table; a file must also be uploaded and not deleted.
    macro_rules! missing_from {
        ($table:tt $(, $condition:tt)?) => {
            sqlx::query_scalar!(
                r#"SELECT x.id AS "id!" FROM unnest($2::uuid[]) AS x(id)
                   WHERE NOT EXISTS (SELECT 1 FROM "# + $table
                    + " t WHERE t.organization_id = $1 AND t.id = x.id " $(+ $condition)? + ")",
                org.uuid(),
                ids,
            )
            .fetch_all(conn)
            .await
        };
    }
    match table {
        RefTable::Tags => missing_from!("tags"),
        RefTable::Companies => missing_from!("companies"),
        RefTable::Users => missing_from!("users"),
        RefTable::Teams => missing_from!("teams"),
        RefTable::Templates => missing_from!("templates"),
        RefTable::Contacts => missing_from!("contacts"),
        RefTable::Categories => missing_from!("conversation_categories"),
        RefTable::Conversations => missing_from!("conversations"),
        RefTable::Segments => missing_from!("segments"),
        RefTable::Topics => missing_from!("topics"),
        RefTable::Files => {
            missing_from!(
                "files",
                "AND t.status = 'uploaded' AND t.deleted_at IS NULL"
            )
        }
    }
}

/// The ids of an assignment (`userIds`, `teamIds`): at least one, deduplicated, at most `max`,
/// all the organization's rows of `table`; and its `assignedBy`, a user of the organization.
pub async fn check_assignment(
    conn: &mut PgConnection,
    table: RefTable,
    org: OrgId,
    field: &str,
    ids: Vec<Uuid>,
    assigned_by: Option<Uuid>,
    max: usize,
) -> AppResult<Vec<Uuid>> {
    if ids.is_empty() {
        return Err(AppError::validation(field, "required", "at least one id"));
    }
    let ids = parley_types::ids::dedup(ids);
    check_ids(&mut *conn, table, org, field, &ids, max).await?;
    check_id(conn, RefTable::Users, org, "assignedBy", assigned_by).await?;
    Ok(ids)
}

/// The most tags a contact, a lead, a conversation or a ticket carries.
pub const MAX_TAGS: usize = 50;

/// Refuses `tagIds` longer than [`MAX_TAGS`] or naming a tag that is not the organization's, as
/// [`check_ids`] does.
pub async fn check_tag_ids(conn: &mut PgConnection, org: OrgId, ids: &[Uuid]) -> AppResult<()> {
    check_ids(conn, RefTable::Tags, org, "tagIds", ids, MAX_TAGS).await
}

/// Refuses a list field (`tagIds`) with a detail per unknown id (the first
/// [`MAX_DETAILS`](parley_types::error::MAX_DETAILS), then one that counts the rest), and lists
/// longer than `max`. Linear in the list.
pub async fn check_ids(
    conn: &mut PgConnection,
    table: RefTable,
    org: OrgId,
    field: &str,
    ids: &[Uuid],
    max: usize,
) -> AppResult<()> {
    parley_types::fields::check_len(field, ids.len(), max)?;
    if ids.is_empty() {
        return Ok(());
    }
    let missing = missing_set(conn, table, org, ids).await?;
    if missing.is_empty() {
        return Ok(());
    }
    refuse(
        table,
        field,
        ids.iter()
            .enumerate()
            .filter(|(_, id)| missing.contains(id))
            .map(|(i, id)| (format!("{field}[{i}]"), *id)),
    )
}

/// The ids of `ids` that are not records of `table` in the organization, as a set (each
/// check then looks its ids up in it: linear).
async fn missing_set(
    conn: &mut PgConnection,
    table: RefTable,
    org: OrgId,
    ids: &[Uuid],
) -> AppResult<HashSet<Uuid>> {
    Ok(missing(conn, table, org, ids)
        .await
        .map_err(app_error)?
        .into_iter()
        .collect())
}

/// Refuses the ids that objects of a list name (`entries[3].contactId`) and that are not
/// records of `table` in the organization: `ids` holds each object's index and id. As
/// [`check_ids`], linear, with at most [`MAX_DETAILS`](parley_types::error::MAX_DETAILS)
/// details.
pub async fn check_ids_of(
    conn: &mut PgConnection,
    table: RefTable,
    org: OrgId,
    list: &str,
    field: &str,
    ids: &[(usize, Uuid)],
) -> AppResult<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let named: Vec<Uuid> = ids.iter().map(|(_, id)| *id).collect();
    let missing = missing_set(conn, table, org, &named).await?;
    if missing.is_empty() {
        return Ok(());
    }
    refuse(
        table,
        list,
        ids.iter()
            .filter(|(_, id)| missing.contains(id))
            .map(|(i, id)| (format!("{list}[{i}].{field}"), *id)),
    )
}

/// The 422 for `unknown` ids (each with its field's path): a detail each for the first
/// [`MAX_DETAILS`](parley_types::error::MAX_DETAILS), then one on `field` that counts the rest.
fn refuse(
    table: RefTable,
    field: &str,
    mut unknown: impl Iterator<Item = (String, Uuid)>,
) -> AppResult<()> {
    let mut errors: Vec<FieldError> = unknown
        .by_ref()
        .take(MAX_DETAILS)
        .map(|(path, id)| FieldError::new(path, "not_found", table.missing_message(id)))
        .collect();
    let rest = unknown.count();
    if rest > 0 {
        errors.push(FieldError::new(
            field,
            "not_found",
            format!("and {rest} more ids that are not records of this organization"),
        ));
    }
    Err(AppError::Validation(errors))
}

/// Refuses a single id field (`companyId`) that is not a record of the organization.
pub async fn check_id(
    conn: &mut PgConnection,
    table: RefTable,
    org: OrgId,
    field: &str,
    id: Option<Uuid>,
) -> AppResult<()> {
    let Some(id) = id else { return Ok(()) };
    if missing(conn, table, org, &[id])
        .await
        .map_err(app_error)?
        .is_empty()
    {
        Ok(())
    } else {
        Err(AppError::validation(
            field,
            "not_found",
            table.missing_message(id),
        ))
    }
}
