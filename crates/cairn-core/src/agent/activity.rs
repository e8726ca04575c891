//! What an agent did in a session (engram §12.4, kept per session instead of per process):
//! tool calls and saves for a gentle save reminder, the last prompt recorded (attached to later
//! saves), and the fingerprint of the last context injected.
//!
//! Kept in the store (`agent_activity`, one row per session id) so a short-lived hook process,
//! an MCP server and the HTTP API of one session see the same counts, across a daemon's idle
//! exit and in direct mode. Each event is one transaction: a primary-key read of the row and
//! its session, then one upsert. Times come from the store's clock.

use rusqlite::Connection;
use serde::{Deserialize, Serialize};
use time::{Duration, OffsetDateTime};

use crate::clock::{format_ts, parse_ts};
use crate::error::{CairnError, Result};
use crate::memory::{NewObservation, SaveOutcome};
use crate::prompts::NewPrompt;
use crate::sessions::{NewSession, session_not_found, validate_session_id};
use crate::store::Store;
use crate::store::activity::{self as activity_rows, read_activity, session_project_of, write_activity};
pub use crate::store::activity::{PendingPrompt, SessionActivity};
use crate::store::prompts::insert_prompt;
use crate::store::sessions::ensure_session;
use crate::text::{MAX_CONTENT_BYTES, fit_content, normalize_project, redact, require};

/// Quiet period before the first reminder, and between reminders.
pub const NUDGE_AFTER: Duration = Duration::minutes(10);
/// Calls that count as "working" even before any save.
const BUSY_CALLS: i64 = 5;
/// A session quiet for this long starts its counts over: the catch-all `manual-save-<project>`
/// session is reused for days, and "nothing saved for 1,400 min" helps nobody.
pub const IDLE_RESTART: Duration = Duration::hours(2);
/// Longest context fingerprint kept (a hash; anything longer is a mistake).
const MAX_FINGERPRINT_BYTES: usize = 128;

/// One thing that happened in a session.
///
/// `event` must be the name as a string: serde's internally tagged enums also take a
/// variant's index (`"event": 0` would be a tool call), which no caller means; see the
/// `Deserialize` impl below.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case", remote = "Self")]
pub enum ActivityEvent {
    /// The agent called a tool. With `remind`, the answer carries the save reminder when one
    /// is due, and counts it as sent.
    ToolCall {
        #[serde(default)]
        remind: bool,
    },
    /// A memory was saved; `saved_session_id` is where it went (default: this session). A
    /// pending prompt of the same project not yet stored there is attached to it, unless
    /// `attach_prompt` is false.
    Save {
        #[serde(default)]
        saved_session_id: Option<String>,
        #[serde(default = "yes")]
        attach_prompt: bool,
    },
    /// The user typed a prompt (redacted before it is kept). `stored_in`: the session it is
    /// already stored in, if any.
    Prompt {
        content: String,
        #[serde(default)]
        stored_in: Option<String>,
    },
    /// A context block was injected; `fingerprint` (a hash of it) lets the next injection
    /// skip an identical block.
    ContextInjected { fingerprint: String },
    /// A reminder was shown by the caller itself (after reading the activity).
    ReminderSent,
}

fn yes() -> bool {
    true
}

/// The event names, for errors.
const EVENT_NAMES: &str = "tool_call, save, prompt, context_injected, reminder_sent";

impl<'de> Deserialize<'de> for ActivityEvent {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        use serde::de::Error;
        let value = serde_json::Value::deserialize(deserializer)?;
        if !value.get("event").is_some_and(serde_json::Value::is_string) {
            return Err(D::Error::custom(format!("`event` must be one of: {EVENT_NAMES}")));
        }
        ActivityEvent::deserialize(value).map_err(D::Error::custom)
    }
}

impl Serialize for ActivityEvent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        ActivityEvent::serialize(self, serializer)
    }
}

/// An event for a session. When the session is unknown, `project` creates it (as a save
/// does); without one an unknown session is `session_not_found`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActivityRecord {
    pub session_id: String,
    #[serde(default)]
    pub project: Option<String>,
    #[serde(flatten)]
    pub event: ActivityEvent,
}

/// The answer to an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ActivityUpdate {
    pub activity: SessionActivity,
    /// The save reminder due now (asked for with `tool_call` + `remind`).
    pub reminder: Option<String>,
    /// The prompt a `save` attached to the saved session.
    pub attached_prompt_id: Option<i64>,
    /// Whether `context_injected` saw a fingerprint other than the previous one.
    pub context_changed: Option<bool>,
}

impl SessionActivity {
    /// Activity starting now, nothing counted.
    pub fn fresh(session_id: &str, project: &str, now: OffsetDateTime) -> Self {
        let now = format_ts(now);
        Self {
            session_id: session_id.to_owned(),
            project: project.to_owned(),
            started_at: now.clone(),
            updated_at: now,
            tool_calls: 0,
            saves: 0,
            last_save_at: None,
            reminders: 0,
            last_reminder_at: None,
            pending_prompt: None,
            context_fingerprint: None,
        }
    }

    /// Counts start over after [`IDLE_RESTART`] without events (the pending prompt and the
    /// context fingerprint stay: they are about content, not time).
    fn restart_if_idle(&mut self, now: OffsetDateTime) {
        if minutes_since(&self.updated_at, now).is_some_and(|quiet| quiet >= IDLE_RESTART) {
            let fresh = Self::fresh(&self.session_id, &self.project, now);
            *self = Self {
                pending_prompt: self.pending_prompt.take(),
                context_fingerprint: self.context_fingerprint.take(),
                ..fresh
            };
        }
    }

    /// The save reminder due at `now`, if any: the agent has been working (a save, or more
    /// than `BUSY_CALLS` calls) for at least [`NUDGE_AFTER`], nothing was saved for as long,
    /// and no reminder was sent within as long. Worded as a side note so it never displaces the
    /// answer to the user (engram #584).
    pub fn reminder_due(&self, now: OffsetDateTime) -> Option<String> {
        let working = self.saves > 0 || self.tool_calls > BUSY_CALLS;
        let since_start = minutes_since(&self.started_at, now)?;
        let quiet = self.last_save_at.as_deref().map_or(Some(since_start), |t| minutes_since(t, now))?;
        let recently_reminded =
            self.last_reminder_at.as_deref().and_then(|t| minutes_since(t, now)).is_some_and(|d| d < NUDGE_AFTER);
        if since_start < NUDGE_AFTER || !working || quiet < NUDGE_AFTER || recently_reminded {
            return None;
        }
        Some(format!(
            "(side note: nothing saved to memory for {} min. If this work produced a decision, fix or \
             discovery worth keeping, call mem_save after answering the user. No action needed otherwise.)",
            quiet.whole_minutes()
        ))
    }

    fn reminder_sent(&mut self, now: OffsetDateTime) {
        self.reminders += 1;
        self.last_reminder_at = Some(format_ts(now));
    }

    /// The line appended to a session summary.
    pub fn summary_line(&self) -> String {
        let mut line = format!("Session activity: {} tool calls, {} saves.", self.tool_calls, self.saves);
        if self.saves == 0 && self.tool_calls > BUSY_CALLS {
            line.push_str(
                " No memories were saved in this session; save any decision or fix worth keeping with mem_save.",
            );
        }
        line
    }

    /// The pending prompt to attach to a save of `project` that went to `saved_session`: one
    /// of that project not stored there yet.
    fn prompt_for_save(&self, project: &str, saved_session: &str) -> Option<&PendingPrompt> {
        self.pending_prompt.as_ref().filter(|p| p.project == project && p.stored_in.as_deref() != Some(saved_session))
    }
}

fn minutes_since(ts: &str, now: OffsetDateTime) -> Option<Duration> {
    parse_ts(ts).map(|t| now - t)
}

impl Store {
    /// A session's activity: what was recorded, or nothing counted yet for a known session.
    pub fn session_activity(&self, session_id: &str) -> Result<SessionActivity> {
        let project = session_project_of(self.conn(), session_id)?;
        match (read_activity(self.conn(), session_id)?, project) {
            (Some(mut activity), project) => {
                activity.project = project.unwrap_or_default();
                Ok(activity)
            }
            (None, Some(project)) => Ok(SessionActivity::fresh(session_id, &project, self.clock().now())),
            (None, None) => Err(session_not_found(session_id)),
        }
    }

    /// The project a session is registered with, if the session exists and has one.
    pub fn session_project(&self, session_id: &str) -> Result<Option<String>> {
        Ok(session_project_of(self.conn(), session_id)?.filter(|p| !p.is_empty()))
    }

    /// Record one event of a session and answer the activity after it.
    pub fn record_activity(&mut self, record: &ActivityRecord) -> Result<ActivityUpdate> {
        let (record, _) = self.redacted(record);
        let record = &record;
        validate_session_id(&record.session_id)?;
        let event = clean_event(&record.event)?;
        let now = self.clock().now();
        // The prompt goes in first, in its own write: storing it twice is harmless (a session
        // keeps identical prompts once), losing it to a failed activity write is not.
        let attached_prompt_id = match &event {
            ActivityEvent::Save { saved_session_id, attach_prompt: true } => {
                self.attach_pending_prompt(record, saved_session_id.as_deref())?
            }
            _ => None,
        };
        self.write(|tx| {
            let mut activity = load_or_start(tx, record, now)?;
            let mut update = ActivityUpdate {
                activity: activity.clone(),
                reminder: None,
                attached_prompt_id,
                context_changed: None,
            };
            apply(&mut activity, &event, now, &mut update);
            write_activity(tx, &activity)?;
            update.activity = activity;
            Ok(update)
        })
    }

    /// A session ended: its next activity starts from zero.
    pub fn clear_activity(&mut self, session_id: &str) -> Result<()> {
        self.write(|tx| activity_rows::delete(tx, session_id))
    }

    /// Save a memory the agent asked for and count it in `activity`'s session, in one
    /// transaction: the memory, the session's pending prompt attached to it and the counters
    /// are written together, so a crash never leaves a saved memory that the session's reminder
    /// does not know. The activity is best effort: a session it cannot count in (unknown, say)
    /// never fails the save.
    pub fn save_counted(
        &mut self,
        new: &NewObservation,
        activity: &SaveActivity,
    ) -> Result<(SaveOutcome, Option<ActivityUpdate>)> {
        let (activity, _) = self.redacted(activity);
        let activity = &activity;
        validate_session_id(&activity.session_id)?;
        let now = self.clock().now();
        let mut counted = None;
        let outcome = self.save_then(new, |tx, outcome| {
            match count_save_in(tx, activity, &outcome.session_id, now) {
                Ok(update) => counted = Some(update),
                Err(e) => tracing::debug!(session = activity.session_id, error = %e, "the save was not counted"),
            }
            Ok(())
        })?;
        Ok((outcome, counted))
    }

    /// Store the session's pending prompt in the session a save went to, when it is of the
    /// save's project and not stored there yet.
    fn attach_pending_prompt(&mut self, record: &ActivityRecord, saved_session: Option<&str>) -> Result<Option<i64>> {
        let now = self.now();
        let saved = saved_session.unwrap_or(&record.session_id);
        self.write(|tx| {
            let Some(activity) = read_activity(tx, &record.session_id)? else { return Ok(None) };
            let project = session_project_of(tx, &record.session_id)?.unwrap_or_default();
            attach_pending_in(tx, &activity, &project, saved, &now)
        })
    }
}

/// Prompts this short (in characters, trimmed) are not stored: "yes", "go on" say nothing later.
pub const MIN_PROMPT_CHARS: usize = 10;
/// Longest prompt stored by `user_prompt`, in characters (pasted logs make poor memories).
pub const MAX_PROMPT_CHARS: usize = 2_000;

/// One user message, as a host plugin reports it (op `user_prompt`): one round trip per prompt.
/// Unknown fields are ignored, as for every op (a newer plugin may send more).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserPrompt {
    pub session_id: String,
    /// Used to create the session when it is unknown.
    #[serde(default)]
    pub project: Option<String>,
    pub content: String,
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub directory: Option<String>,
    /// The host that shows the answer's texts. Given, the answer also carries what the host
    /// injects with the message: the `[MEMORY]` block of a first prompt, the trigger note,
    /// the reminder (with `remind`) and the meter (with `usage`); one round trip per message.
    #[serde(default)]
    pub host: Option<crate::agent::protocol::Host>,
    /// Answer the save reminder due now, on a prompt that is not the first (counted as sent).
    #[serde(default)]
    pub remind: bool,
    /// The window's usage after the last answer, when the host knows it.
    #[serde(default)]
    pub usage: Option<crate::agent::meter::MeterRequest>,
}

/// The answer to `user_prompt`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UserPromptOutcome {
    /// The stored prompt (none: too short to keep).
    pub prompt_id: Option<i64>,
    /// Whether this is the session's first `user_prompt` (kept in the store, so a restarted
    /// plugin does not inject its first-message block twice).
    pub first_prompt: bool,
    /// Whether the message asks to remember something ([`crate::text::memory_trigger`]).
    pub memory_trigger: bool,
    /// The memories saved from the rules the message states and the suggestions it turns down
    /// (`triggers.save_rules`: see [`Store::save_stated_rules`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules_saved: Vec<i64>,
    /// With `host`, on a first prompt: the `[MEMORY]` block for it (none when empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// With `host`, when the message asks to remember: the trigger note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<String>,
    /// With `remind`: the save reminder due now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reminder: Option<String>,
    /// With `usage`: the context meter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meter: Option<crate::agent::meter::MeterReading>,
    /// With `host`: what to put in front of the agent with this message, in order (block,
    /// trigger note, reminder, meter line), none empty. Always sent, so a plugin tells this
    /// answer from an older daemon's.
    #[serde(default)]
    pub texts: Vec<String>,
}

impl Store {
    /// A user's message: ensure the session, store the prompt (redacted, trimmed, cut to
    /// [`MAX_PROMPT_CHARS`]; shorter than [`MIN_PROMPT_CHARS`] is not stored), make it the
    /// session's pending prompt, count it, and say whether it was the first and a trigger.
    pub fn user_prompt(&mut self, prompt: &UserPrompt, keyword_patterns: &[String]) -> Result<UserPromptOutcome> {
        let (prompt, _) = self.redacted(prompt);
        let prompt = &prompt;
        validate_session_id(&prompt.session_id)?;
        require("content", &prompt.content)?;
        let content = prompt.content.clone();
        let trimmed = content.trim();
        let memory_trigger = crate::text::memory_trigger(trimmed, keyword_patterns);
        // An unknown session without a project: the one of the directory the host reports.
        let project = match self.session_project(&prompt.session_id)? {
            Some(_) => prompt.project.clone().filter(|p| !p.trim().is_empty()),
            None => crate::agent::project_or_detected(prompt.project.as_deref(), prompt.directory.as_deref())?,
        };
        self.start_session(&NewSession {
            id: prompt.session_id.clone(),
            project,
            directory: prompt.directory.clone(),
            agent: session_agent(prompt),
            ..NewSession::default()
        })?;
        let kept: Option<String> =
            (trimmed.chars().count() > MIN_PROMPT_CHARS).then(|| trimmed.chars().take(MAX_PROMPT_CHARS).collect());
        let prompt_id = match &kept {
            Some(text) => Some(
                self.add_prompt(&NewPrompt {
                    content: text.clone(),
                    session_id: Some(prompt.session_id.clone()),
                    project: None,
                    directory: None,
                })?
                .id,
            ),
            None => None,
        };
        let now = self.clock().now();
        let record = ActivityRecord {
            session_id: prompt.session_id.clone(),
            project: None,
            event: ActivityEvent::Prompt { content: kept.clone().unwrap_or_default(), stored_in: None },
        };
        let first_prompt = self.write(|tx| {
            let mut activity = load_or_start(tx, &record, now)?;
            let seen = activity_rows::user_prompts(tx, &record.session_id)?;
            if let Some(text) = &kept {
                let stored =
                    ActivityEvent::Prompt { content: text.clone(), stored_in: Some(record.session_id.clone()) };
                let mut ignored = ActivityUpdate {
                    activity: activity.clone(),
                    reminder: None,
                    attached_prompt_id: None,
                    context_changed: None,
                };
                apply(&mut activity, &stored, now, &mut ignored);
            }
            write_activity(tx, &activity)?;
            activity_rows::count_user_prompt(tx, &record.session_id)?;
            Ok(seen == 0)
        })?;
        Ok(UserPromptOutcome {
            prompt_id,
            first_prompt,
            memory_trigger,
            rules_saved: Vec::new(),
            context: None,
            trigger: None,
            reminder: None,
            meter: None,
            texts: Vec::new(),
        })
    }

    /// The save reminder due now in a session, counted as sent.
    fn due_reminder(&mut self, session_id: &str) -> Result<Option<String>> {
        let now = self.clock().now();
        let Some(reminder) = self.session_activity(session_id)?.reminder_due(now) else { return Ok(None) };
        self.record_activity(&ActivityRecord {
            session_id: session_id.to_owned(),
            project: None,
            event: ActivityEvent::ReminderSent,
        })?;
        Ok(Some(reminder))
    }
}

impl crate::Core {
    /// Op `user_prompt`: [`Store::user_prompt`], then what the host injects with the message.
    pub fn user_prompt_op(&mut self, prompt: &UserPrompt) -> Result<UserPromptOutcome> {
        let config = &self.settings.plugin_config();
        let mut outcome = self.store.user_prompt(prompt, &config.triggers.keyword_patterns)?;
        if config.triggers.save_rules {
            // The prompt is stored; a rule not saved now is found by the extraction, if on.
            match self.store.save_stated_rules(&prompt.session_id, &prompt.content) {
                Ok(saved) => outcome.rules_saved = saved,
                Err(e) => tracing::warn!(error = %e, "cannot save the rules a prompt states"),
            }
        }
        if prompt.remind && !outcome.first_prompt {
            outcome.reminder = self.store.due_reminder(&prompt.session_id)?;
        }
        if let Some(usage) = &prompt.usage {
            let host = prompt.host.unwrap_or(crate::agent::protocol::Host::ClaudeCode);
            outcome.meter = Some(crate::agent::meter::meter_of(usage, host, config));
        }
        let Some(host) = prompt.host else { return Ok(outcome) };
        if outcome.first_prompt {
            outcome.context = Some(self.prompt_block(prompt, config)?).filter(|c| !c.trim().is_empty());
        }
        if outcome.memory_trigger {
            outcome.trigger = Some(crate::agent::protocol::host_text(host, crate::agent::protocol::Part::Trigger));
        }
        let meter_line = outcome.meter.as_ref().and_then(|m| m.line.clone());
        outcome.texts = [outcome.context.clone(), outcome.trigger.clone(), outcome.reminder.clone(), meter_line]
            .into_iter()
            .flatten()
            .filter(|t| !t.trim().is_empty())
            .collect();
        Ok(outcome)
    }

    /// The `[MEMORY]` block for a first prompt, by the `[inject]` settings.
    fn prompt_block(&self, prompt: &UserPrompt, config: &crate::settings::plugin::PluginConfig) -> Result<String> {
        use crate::context::{ContextLayout, ContextRequest};
        let project =
            self.store.session_project(&prompt.session_id)?.or_else(|| crate::agent::given(prompt.project.clone()));
        // a prompt, not search syntax: a quoted message is a phrase search that finds nothing
        let query: String =
            redact(&prompt.content).0.replace(['"', '*'], " ").split_whitespace().collect::<Vec<_>>().join(" ");
        let inject = &config.inject;
        self.injected_context(ContextRequest {
            project,
            budget_bytes: inject.budget_bytes,
            layout: ContextLayout::MemoryBlock,
            query: Some(query.chars().take(500).collect()).filter(|q: &String| !q.is_empty()),
            max_profile: (!inject.profile).then_some(0),
            // the asking session's own Last Session record is left out until it compacts
            session_id: Some(prompt.session_id.clone()),
            ..ContextRequest::default()
        })
    }
}

/// Redact and bound what the caller typed before anything is kept.
fn clean_event(event: &ActivityEvent) -> Result<ActivityEvent> {
    Ok(match event {
        ActivityEvent::Prompt { content, stored_in } => {
            require("content", content)?;
            let content = fit_content("content", &redact(content).0, MAX_CONTENT_BYTES)?.text;
            if let Some(id) = stored_in {
                validate_session_id(id)?;
            }
            ActivityEvent::Prompt { content, stored_in: stored_in.clone() }
        }
        ActivityEvent::ContextInjected { fingerprint } => {
            // A hash, normally; but whatever an agent sends is kept only redacted.
            let fingerprint = &redact(fingerprint).0;
            require("fingerprint", fingerprint)?;
            if fingerprint.len() > MAX_FINGERPRINT_BYTES || fingerprint.chars().any(char::is_control) {
                return Err(CairnError::invalid(format!(
                    "fingerprint must be at most {MAX_FINGERPRINT_BYTES} bytes with no control characters"
                ))
                .with_hint("send a hash of the injected context"));
            }
            ActivityEvent::ContextInjected { fingerprint: fingerprint.clone() }
        }
        ActivityEvent::Save { saved_session_id: Some(id), .. } => {
            validate_session_id(id)?;
            event.clone()
        }
        other => other.clone(),
    })
}

/// The agent's session a save is counted in ([`Store::save_counted`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SaveActivity {
    /// The session whose activity counts the save (it may differ from the one the memory
    /// goes to).
    pub session_id: String,
    /// Attach the session's pending prompt to the saved session (default: yes).
    #[serde(default = "yes")]
    pub attach_prompt: bool,
}

/// Count a save in `activity`'s session inside the save's transaction, attaching its pending
/// prompt to `saved_session` first.
fn count_save_in(
    tx: &Connection,
    activity: &SaveActivity,
    saved_session: &str,
    now: OffsetDateTime,
) -> Result<ActivityUpdate> {
    let record = ActivityRecord {
        session_id: activity.session_id.clone(),
        project: None,
        event: ActivityEvent::Save {
            saved_session_id: Some(saved_session.to_owned()),
            attach_prompt: activity.attach_prompt,
        },
    };
    let mut stored = load_or_start(tx, &record, now)?;
    let attached_prompt_id = if activity.attach_prompt {
        attach_pending_in(tx, &stored, &stored.project, saved_session, &format_ts(now))?
    } else {
        None
    };
    let mut update =
        ActivityUpdate { activity: stored.clone(), reminder: None, attached_prompt_id, context_changed: None };
    apply(&mut stored, &record.event, now, &mut update);
    write_activity(tx, &stored)?;
    update.activity = stored;
    Ok(update)
}

/// Store `activity`'s pending prompt in the session a save went to, when it is of `project` (the
/// session's) and not stored there yet; the prompt's id.
fn attach_pending_in(
    tx: &Connection,
    activity: &SessionActivity,
    project: &str,
    saved_session: &str,
    now: &str,
) -> Result<Option<i64>> {
    let Some(prompt) = activity.prompt_for_save(project, saved_session) else { return Ok(None) };
    let new = NewPrompt {
        content: prompt.content.clone(),
        session_id: Some(saved_session.to_owned()),
        project: Some(prompt.project.clone()),
        directory: None,
    };
    insert_prompt(tx, &new, now).map(Some)
}

/// The row to update: the stored one (restarted when idle), or a fresh one for a known session,
/// or for a new session named with a project (created here, as a save would).
fn load_or_start(tx: &Connection, record: &ActivityRecord, now: OffsetDateTime) -> Result<SessionActivity> {
    let id = &record.session_id;
    let project = if let Some(project) = session_project_of(tx, id)? {
        project
    } else {
        let Some(project) = record.project.as_deref().filter(|p| !p.trim().is_empty()) else {
            return Err(
                session_not_found(id).with_hint("open it first (POST /sessions), or send a project to open it with")
            );
        };
        let session = NewSession { id: id.clone(), project: Some(project.to_owned()), ..NewSession::default() };
        ensure_session(tx, &session, &format_ts(now))?;
        normalize_project(project).0
    };
    let mut activity = read_activity(tx, id)?.unwrap_or_else(|| SessionActivity::fresh(id, &project, now));
    activity.project = project;
    activity.restart_if_idle(now);
    Ok(activity)
}

/// Apply an event to the activity, and fill what the answer reports about it.
fn apply(a: &mut SessionActivity, event: &ActivityEvent, now: OffsetDateTime, update: &mut ActivityUpdate) {
    a.updated_at = format_ts(now);
    match event {
        ActivityEvent::ToolCall { remind } => {
            a.tool_calls += 1;
            if *remind {
                update.reminder = a.reminder_due(now);
                if update.reminder.is_some() {
                    a.reminder_sent(now);
                }
            }
        }
        ActivityEvent::Save { saved_session_id, .. } => {
            a.saves += 1;
            a.last_save_at = Some(format_ts(now));
            if update.attached_prompt_id.is_some()
                && let Some(prompt) = a.pending_prompt.as_mut()
            {
                prompt.stored_in = Some(saved_session_id.clone().unwrap_or_else(|| a.session_id.clone()));
            }
        }
        ActivityEvent::Prompt { content, stored_in } => {
            a.pending_prompt = Some(PendingPrompt {
                content: content.clone(),
                project: a.project.clone(),
                stored_in: stored_in.clone(),
            });
        }
        ActivityEvent::ContextInjected { fingerprint } => {
            update.context_changed = Some(a.context_fingerprint.as_deref() != Some(fingerprint.as_str()));
            a.context_fingerprint = Some(fingerprint.clone());
        }
        ActivityEvent::ReminderSent => a.reminder_sent(now),
    }
}
/// The agent a prompt's session is registered under: its host's name when the host is named,
/// as `session_start` and the OpenCode plugin's registration give it, so the session reads the
/// same whichever of them arrives first (OpenCode's own agents, `build` or `plan`, are modes of
/// the host, not the session's agent); else the agent the caller names.
fn session_agent(prompt: &UserPrompt) -> Option<String> {
    match prompt.host {
        Some(host) if host != crate::agent::protocol::Host::Mcp => Some(crate::agent::hooks::agent_of(host).to_owned()),
        _ => prompt.agent.clone(),
    }
}
