//! Frequency caps: at most N bulk messages per contact per rolling day and week on a
//! channel, shared by every worker through Redis. Each contact has a sorted set of its sends on
//! the channel (member: the recipient id, score: when), trimmed to the week; a job reserves
//! places for all its recipients in one script call, which counts and adds atomically, so
//! workers sending to one contact at once cannot both pass the cap. A recipient reserved twice
//! (a resend after a lost job) keeps its one place; one that ends unsent gives it back.
//!
//! Cost per recipient: a few sorted-set operations in the one call per job, whatever the
//! contact's history (a set holds at most the week's cap, or the day's when only that is set). Keys share their organization's
//! hash tag, so one call works on a Redis Cluster; they expire a week after their last send.
//! Redis is the only record: an emptied Redis forgets the week's sends (docs/jobs.md).

use crate::redis_conn::Redis;
use parley_domain::Channel;
use parley_domain::send_rules::FrequencyCap;
use parley_types::ids::{ContactId, OrgId, RecipientId};
use parley_types::time::Timestamp;

/// KEYS: one per recipient (its contact's set); ARGV: now (ms), the day's cap, the week's cap
/// (0: none), 1 for a dry run (0: reserve), then the recipients' ids. Returns 1 (reserved, or
/// would be) or 0 (capped) per recipient. A set keeps the longest window capped: a week, or a
/// day with only a daily cap. A dry run (a broadcast's preview) counts by the same rule and
/// changes nothing: it neither trims nor adds, so it counts within the windows only.
const RESERVE: &str = r"
local now = tonumber(ARGV[1])
local per_day, per_week = tonumber(ARGV[2]), tonumber(ARGV[3])
local dry = ARGV[4] == '1'
local day, week = now - 86400000, now - 604800000
local keep, ttl = day, 86400000 + 3600000
if per_week > 0 then keep, ttl = week, 604800000 + 3600000 end
local out = {}
for i, key in ipairs(KEYS) do
  local member = ARGV[4 + i]
  if not dry then redis.call('ZREMRANGEBYSCORE', key, '-inf', keep) end
  local ok = 1
  if not redis.call('ZSCORE', key, member) then
    if per_day > 0 and redis.call('ZCOUNT', key, '(' .. day, '+inf') >= per_day then ok = 0 end
    if ok == 1 and per_week > 0 and redis.call('ZCOUNT', key, '(' .. week, '+inf') >= per_week then ok = 0 end
    if ok == 1 and not dry then
      redis.call('ZADD', key, now, member)
      redis.call('PEXPIRE', key, ttl)
    end
  end
  out[i] = ok
end
return out
";

/// Recipients a dry run counts per script call: as a send job's batch, so that one preview
/// holds Redis (shared by every organization) no longer than a job's reservation does.
const DRY_RUN_BATCH: usize = 200;

/// KEYS: sets; ARGV: the members to remove, one per key.
const GIVE_BACK: &str = r"
for i, key in ipairs(KEYS) do redis.call('ZREM', key, ARGV[i]) end
return 0
";

fn key(redis: &Redis, org: OrgId, channel: Channel, contact: ContactId) -> String {
    redis.tagged(
        &format!("fcap:{org}"),
        &format!("{}:{contact}", channel.as_str()),
    )
}

/// Reserves a place under `cap` for each (recipient, contact) at `now`; returns the recipients
/// refused (over the cap).
pub async fn reserve(
    redis: &Redis,
    org: OrgId,
    channel: Channel,
    cap: FrequencyCap,
    recipients: &[(RecipientId, ContactId)],
    now: Timestamp,
) -> Result<Vec<RecipientId>, redis::RedisError> {
    let places: Vec<(String, ContactId)> = recipients
        .iter()
        .map(|(r, c)| (r.to_string(), *c))
        .collect();
    let answers = run(redis, org, channel, cap, &places, now, false).await?;
    Ok(recipients
        .iter()
        .zip(answers)
        .filter(|(_, ok)| *ok == 0)
        .map(|((recipient, _), _)| *recipient)
        .collect())
}

/// [`RESERVE`] for `places` (a member and its contact each): 1 (reserved, or would be) or 0
/// per place.
async fn run(
    redis: &Redis,
    org: OrgId,
    channel: Channel,
    cap: FrequencyCap,
    places: &[(String, ContactId)],
    now: Timestamp,
    dry: bool,
) -> Result<Vec<i64>, redis::RedisError> {
    if places.is_empty() {
        return Ok(Vec::new());
    }
    let reserve = redis::Script::new(RESERVE);
    let mut script = reserve.prepare_invoke();
    for (_, contact) in places {
        script.key(key(redis, org, channel, *contact));
    }
    script
        .arg(now.0.timestamp_millis())
        .arg(cap.per_day.unwrap_or(0))
        .arg(cap.per_week.unwrap_or(0))
        .arg(u8::from(dry));
    for (member, _) in places {
        script.arg(member);
    }
    let mut conn = redis.conn.clone();
    script.invoke_async(&mut conn).await
}

/// The contacts among `contacts` that a send at `at` would find over `cap`, by [`reserve`]'s
/// rule in a dry run ([`DRY_RUN_BATCH`] a call); changes nothing. A broadcast's preview asks
/// it: its contacts have no recipient yet, so each is counted as a new place.
pub async fn over(
    redis: &Redis,
    org: OrgId,
    channel: Channel,
    cap: FrequencyCap,
    contacts: &[ContactId],
    at: Timestamp,
) -> Result<std::collections::HashSet<ContactId>, redis::RedisError> {
    let mut over = std::collections::HashSet::new();
    for batch in contacts.chunks(DRY_RUN_BATCH) {
        let places: Vec<(String, ContactId)> =
            batch.iter().map(|c| (format!("preview:{c}"), *c)).collect();
        let answers = run(redis, org, channel, cap, &places, at, true).await?;
        over.extend(
            batch
                .iter()
                .zip(answers)
                .filter(|(_, ok)| *ok == 0)
                .map(|(c, _)| *c),
        );
    }
    Ok(over)
}

/// Gives back the places of recipients that were reserved and not sent (best effort: a place
/// not given back counts until it leaves the window).
pub async fn give_back(
    redis: &Redis,
    org: OrgId,
    channel: Channel,
    recipients: &[(RecipientId, ContactId)],
) {
    if recipients.is_empty() {
        return;
    }
    let give_back = redis::Script::new(GIVE_BACK);
    let mut script = give_back.prepare_invoke();
    for (recipient, contact) in recipients {
        script.key(key(redis, org, channel, *contact));
        script.arg(recipient.to_string());
    }
    let mut conn = redis.conn.clone();
    if let Err(err) = script.invoke_async::<i64>(&mut conn).await {
        tracing::warn!(%err, places = recipients.len(), "frequency-cap places not given back");
    }
}
