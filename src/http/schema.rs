//! The value schemas of the OpenAPI document that say what the validators
//! enforce: built here from the same limits and catalogs, so that a request
//! valid by the document is one lab accepts and the document cannot drift
//! from the checks. Each function is a `schema_with` of a field.
//!
//! Strings are measured in characters by JSON Schema; where lab counts bytes
//! (paths, URLs, labels, prompts, bodies) the limit is the same number.

use serde_json::{Value, json};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{
    AdditionalProperties, AllOfBuilder, ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema,
    SchemaType, Type,
};

use crate::provider::{self, OptionType, Provider};
use crate::repo::AFK_MAX_CONCURRENT;
use crate::repo::issue_source::SOURCE_KINDS;
use crate::validate::{MAX_LABEL, MAX_PROMPT, MAX_TEXT, MAX_TITLE};

mod knobs;
mod limits;
pub use knobs::*;
pub use limits::*;

/// What `char::is_control` refuses (Unicode Cc), inside a character class.
const CTRL: &str = r"\x00-\x1f\x7f-\x9f";
/// What `str::trim` removes (Unicode White_Space), inside a character class.
const WS: &str = r"\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000";

fn typed(t: Type, nullable: bool) -> SchemaType {
    if nullable {
        SchemaType::from_iter([t, Type::Null])
    } else {
        SchemaType::new(t)
    }
}

fn string(nullable: bool) -> ObjectBuilder {
    ObjectBuilder::new().schema_type(typed(Type::String, nullable))
}

/// A string of one of `values`; `blank` adds `""` (which clears), and a
/// nullable one `null`.
fn one_of_strings(values: &[&str], blank: bool, nullable: bool) -> ObjectBuilder {
    let mut all: Vec<Value> = values.iter().map(|v| json!(v)).collect();
    if blank {
        all.push(json!(""));
    }
    if nullable {
        all.push(Value::Null);
    }
    string(nullable).enum_values(Some(all))
}

fn int(lo: i64, hi: i64, nullable: bool) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(typed(Type::Integer, nullable))
        .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
            utoipa::openapi::KnownFormat::Int64,
        )))
        .minimum(Some(lo))
        .maximum(Some(hi))
}

/// A trimmed value: leading and trailing white space, then `inner`.
fn trimmed(inner: &str) -> String {
    format!("^[{WS}]*{inner}[{WS}]*$")
}

/// A label once trimmed: 1 to 100 printable characters without commas.
fn label_pattern(optional: bool) -> String {
    let edge = format!("[^{WS}{CTRL},]");
    let inner = format!("{edge}(?:[^{CTRL},]{{0,{}}}{edge})?", MAX_LABEL - 2);
    trimmed(&if optional {
        format!("(?:{inner})?")
    } else {
        inner
    })
}

/// A title once trimmed: one line of 1 to 256 characters.
fn title_pattern() -> String {
    let edge = format!("[^{WS}{CTRL}]");
    trimmed(&format!(
        "{edge}(?:[^{CTRL}]{{0,{}}}{edge})?",
        MAX_TITLE - 2
    ))
}

const NO_NUL: &str = r"^[^\x00]*$";

const REPO_NAME_PATTERN: &str = r"^(?:[A-Za-z]|[0-9]+[A-Za-z._-])[A-Za-z0-9._-]*$";

fn repo_path_pattern() -> String {
    format!("^(?:/[^{CTRL}]*)?$")
}

fn repo_url_pattern() -> String {
    let c = format!("[^ {CTRL}]");
    let h = format!("[^:/ {CTRL}]");
    format!("^(?:(?:https|http|ssh|git|file)://{c}+|(?:[^-:/ {CTRL}]{h}*)?@{h}*:{c}+)?$")
}

/// `validate::branch`, less the rules about `..`, `@{`, `//`, `/.` and a
/// trailing `.lock`, `/` or `.` (JSON Schema patterns have no portable way
/// to forbid a substring); the server refuses those with a 400.
fn branch_pattern() -> String {
    let c = format!(r"[^{CTRL}{WS}~^:?*\[\\]");
    format!(r"^(?:[^-./{CTRL}{WS}~^:?*\[\\]{c}*)?$")
}

/// A string matching `pattern`, of at most `max` characters.
fn matching(nullable: bool, pattern: impl Into<String>, max: usize, what: &str) -> ObjectBuilder {
    string(nullable)
        .pattern(Some(pattern))
        .max_length(Some(max))
        .description(Some(what))
}

pub fn repo_name() -> ObjectBuilder {
    matching(
        false,
        REPO_NAME_PATTERN,
        64,
        "Letters, digits, '.', '_' and '-', starting with a letter or digit, not only digits.",
    )
}

pub fn repo_path() -> ObjectBuilder {
    matching(
        true,
        repo_path_pattern(),
        4096,
        "Absolute path of a local git repository on the lab server (give this or `url`).",
    )
}

pub fn repo_url() -> ObjectBuilder {
    matching(
        true,
        repo_url_pattern(),
        2048,
        "Clone URL: https://, http://, ssh://, git://, file:// or user@host:path \
         (give this or `path`); lab keeps a mirror.",
    )
}

pub fn branch() -> ObjectBuilder {
    matching(
        true,
        branch_pattern(),
        200,
        "A branch name git accepts (`git check-ref-format --branch`); `main` when cleared.",
    )
}

pub fn provider_id() -> ObjectBuilder {
    one_of_strings(&provider::ids(), false, false)
}

pub fn provider_id_patch() -> ObjectBuilder {
    one_of_strings(&provider::ids(), true, true).description(Some(
        "The repo's provider; the default (claude-code) when cleared.",
    ))
}

/// A plan or review run's provider as shown: `null` when unset.
pub fn provider_id_or_null() -> ObjectBuilder {
    one_of_strings(&provider::ids(), false, true)
}

/// A change to a plan or review run's provider.
pub fn kind_provider_patch() -> ObjectBuilder {
    one_of_strings(&provider::ids(), true, true).description(Some(
        "The provider of this kind's runs; `null` or `\"\"` unsets it (a repo's then follows the \
         global choice, else its own provider).",
    ))
}

pub fn option_type() -> ObjectBuilder {
    one_of_strings(
        &[OptionType::Bool.as_str(), OptionType::Enum.as_str()],
        false,
        false,
    )
}

pub fn source_kind() -> ObjectBuilder {
    one_of_strings(SOURCE_KINDS, false, false)
}

pub fn source_kind_patch() -> ObjectBuilder {
    let mut kinds = SOURCE_KINDS.to_vec();
    kinds.push("forgejo");
    one_of_strings(&kinds, true, true).description(Some(
        "`builtin` (lab's own tracker, the default), `gitea` (also `forgejo`) or `github`; \
         `gitea` and `github` need `forge_url` (GitHub's API by default) and `forge_repo`.",
    ))
}

pub fn forge_url() -> ObjectBuilder {
    string(true)
        .pattern(Some(trimmed(&format!("(?:https?://[^{WS}]+)?"))))
        .description(Some(
            "The forge's http(s) address; GitHub's API by default.",
        ))
}

pub fn forge_repo() -> ObjectBuilder {
    string(true)
        .pattern(Some(trimmed("(?:[A-Za-z0-9._-]+/[A-Za-z0-9._-]+)?")))
        .description(Some("`owner/name` on the forge."))
}

pub fn forge_token() -> ObjectBuilder {
    string(true)
        .pattern(Some(trimmed(r"[\x21-\x7e]{0,512}")))
        .write_only(true)
        .description(Some(
            "A token lab uses on the forge: printable ASCII (never shown back, never given to runs).",
        ))
}

pub fn afk_label_patch() -> ObjectBuilder {
    string(true)
        .pattern(Some(label_pattern(true)))
        .description(Some(
            "The label that makes an issue ready for an AFK run: 1-100 printable characters \
         without commas; `ready-for-agent` when cleared.",
        ))
}

pub fn afk_max_concurrent_patch() -> ObjectBuilder {
    let (lo, hi) = AFK_MAX_CONCURRENT;
    int(lo, hi, true).description(Some("Most live AFK runs of this repo; 1 when cleared."))
}

pub fn label() -> ObjectBuilder {
    string(false).pattern(Some(label_pattern(false)))
}

pub fn labels() -> ArrayBuilder {
    ArrayBuilder::new().items(label())
}

pub fn title() -> ObjectBuilder {
    string(false)
        .pattern(Some(title_pattern()))
        .description(Some("One line of 1 to 256 characters (trimmed)."))
}

pub fn text() -> ObjectBuilder {
    matching(
        false,
        NO_NUL,
        MAX_TEXT,
        "At most 64 KiB of text, without NUL.",
    )
}

pub fn prompt() -> ObjectBuilder {
    matching(
        true,
        NO_NUL,
        MAX_PROMPT,
        "The first message to the agent: at most 120 KiB, without NUL.",
    )
}

/// Spawn options to set or clear, by key: any key of any provider here,
/// since which keys a repo takes depends on its provider.
pub fn afk_options_patch() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(ObjectBuilder::new().schema_type(
            SchemaType::from_iter([Type::String, Type::Boolean, Type::Null]),
        )))
        .description(Some(
            "Merged key by key: a value sets the option (a string, or a boolean for a bool \
             option), `null` or `\"\"` inherits again. Keys and values are those of the \
             provider's options (`GET /providers`).",
        ))
}

/// One provider's defaults patch, with its catalogs.
fn defaults_patch(p: &dyn Provider) -> ObjectBuilder {
    let catalog = |values: &[&str], what: &str| {
        one_of_strings(values, true, true)
            .description(Some(format!("{what}; `null` or `\"\"` inherits.")))
    };
    let options = || {
        let mut options = ObjectBuilder::new().schema_type(Type::Object);
        for o in p.spawn_options() {
            let mut values: Vec<Value> = o.values.iter().map(|v| json!(v)).collect();
            if o.ty == OptionType::Bool {
                values.extend([json!(true), json!(false)]);
            }
            values.extend([json!(""), Value::Null]);
            options = options.property(
                o.key,
                ObjectBuilder::new()
                    .schema_type(SchemaType::AnyValue)
                    .enum_values(Some(values))
                    .description(Some(o.description)),
            );
        }
        options
    };
    let mut out = ObjectBuilder::new()
        .schema_type(Type::Object)
        .property("model_default", catalog(p.models(), "Model of manual runs"))
        .property(
            "effort_default",
            catalog(p.efforts(), "Effort of manual runs"),
        )
        .property(
            "afk_model_default",
            catalog(p.models(), "Model of AFK runs"),
        )
        .property(
            "afk_effort_default",
            catalog(p.efforts(), "Effort of AFK runs"),
        )
        .property(
            "afk_options",
            options()
                .additional_properties(Some(AdditionalProperties::FreeForm(false)))
                .description(Some(
                    "Spawn options of AFK runs, merged key by key; `null` or `\"\"` inherits.",
                )),
        );
    // Plan and review runs' own (ADR 32), inheriting the AFK ones.
    for (kind, what) in [("plan", "plan runs"), ("review", "review runs")] {
        out = out
            .property(
                format!("{kind}_model_default"),
                catalog(p.models(), &format!("Model of {what} (else the AFK one)")),
            )
            .property(
                format!("{kind}_effort_default"),
                catalog(p.efforts(), &format!("Effort of {what} (else the AFK one)")),
            )
            .property(
                format!("{kind}_options"),
                options()
                    .additional_properties(Some(AdditionalProperties::FreeForm(false)))
                    .description(Some(format!(
                        "Spawn options of {what}, merged key by key; `null` or `\"\"` inherits \
                         the AFK one."
                    ))),
            );
    }
    out.additional_properties(Some(AdditionalProperties::FreeForm(false)))
}

/// `providers` of a settings change: each provider's defaults, by id.
pub fn providers_patch() -> ObjectBuilder {
    let mut o = ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        .description(Some(
            "Changes to each provider's global defaults, by provider id.",
        ));
    for p in provider::all() {
        o = o.property(p.id(), defaults_patch(*p));
    }
    o
}

/// `limit` of `GET /runs`.
pub fn run_limit() -> ObjectBuilder {
    int(1, crate::http::runs::MAX_LIST, false)
}

pub fn log_offset() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .minimum(Some(0u64))
        .maximum(Some(u64::MAX))
}

pub fn output_format() -> ObjectBuilder {
    one_of_strings(&["text", "raw"], false, false)
}

pub fn issue_state() -> ObjectBuilder {
    one_of_strings(&["open", "closed", "all"], false, false)
}

/// The body of `POST /repos`: a repo change with a name and exactly one of
/// `path` and `url`.
pub fn new_repo(patch: RefOr<Schema>) -> AllOfBuilder {
    let given = |field: &str| {
        ObjectBuilder::new()
            .property(field, string(false).min_length(Some(1)))
            .required(field)
    };
    AllOfBuilder::new()
        .item(patch)
        .item(ObjectBuilder::new().required("name"))
        .item(OneOfBuilder::new().item(given("path")).item(given("url")))
        .description(Some(
            "A new repo: `name` and one of `path` and `url`; the other fields as in a change.",
        ))
}

#[cfg(test)]
mod tests;

pub fn screen_format() -> ObjectBuilder {
    let all: Vec<&str> = crate::domain::ScreenFormat::ALL
        .iter()
        .map(|f| f.as_str())
        .collect();
    one_of_strings(&all, false, false)
}

pub fn screen_history() -> ObjectBuilder {
    int(0, crate::run::screen::SCROLLBACK as i64, false)
}

/// `text` of an input: no control character but line breaks and tabs.
pub fn input_text() -> ObjectBuilder {
    matching(
        false,
        r"^[^\x00-\x08\x0b-\x1f\x7f-\x9f]*$",
        crate::validate::MAX_INPUT,
        "Typed as it is: line breaks and tabs allowed, no other control character \
         (control keys go in `keys`).",
    )
}

/// The body of `POST /runs/{id}/input`: the fields, and something to send
/// (a non-empty `text` or at least one key).
pub fn input_request(body: RefOr<Schema>) -> AllOfBuilder {
    let given_text = ObjectBuilder::new()
        .property("text", string(false).min_length(Some(1)))
        .required("text");
    let given_keys = ObjectBuilder::new()
        .property("keys", ArrayBuilder::new().min_items(Some(1)))
        .required("keys");
    AllOfBuilder::new()
        .item(body)
        .item(
            utoipa::openapi::schema::AnyOfBuilder::new()
                .item(given_text)
                .item(given_keys),
        )
        .description(Some("Text, keys or both: at least one of them not empty."))
}

/// `keys` of an input: names from lab's list.
pub fn input_keys() -> ArrayBuilder {
    let all: Vec<&str> = crate::domain::Key::ALL.iter().map(|k| k.as_str()).collect();
    ArrayBuilder::new()
        .items(one_of_strings(&all, false, false))
        .max_items(Some(crate::service::runs::MAX_KEYS))
}

/// A notification endpoint's URL (a secret: never shown back whole).
pub fn notification_url() -> ObjectBuilder {
    use crate::settings::notifications::MAX_URL;
    matching(
        false,
        format!("^https?://[^{WS}{CTRL}/]+(?:/[^{WS}{CTRL}]*)?$"),
        MAX_URL,
        "An http(s) URL with a host, or the redacted URL lab showed for a stored endpoint \
         (it keeps that endpoint's URL and token).",
    )
}

/// A notification endpoint's token.
pub fn notification_token() -> ObjectBuilder {
    use crate::settings::notifications::MAX_TOKEN;
    string(true)
        .pattern(Some(format!(r"^[\x21-\x7e]{{0,{MAX_TOKEN}}}$")))
        .write_only(true)
        .description(Some(
            "Sent as `Authorization: Bearer …` (webhook and ntfy): never shown back, never given to runs. \
             Absent keeps the stored token of a redacted URL; `null` or `\"\"` removes it.",
        ))
}

/// Text with something other than blanks in it, of at most `max`
/// characters (the server trims it and refuses it blank).
fn not_blank(max: usize, what: &str) -> ObjectBuilder {
    // What `str::trim` keeps, spelled out: `\S` differs between regex
    // engines on U+0085 and the like, so a client's "not blank" was not
    // lab's.
    matching(false, format!("[^{WS}]"), max, what)
}

/// A plan as a planning run submits it: at most 64 KiB, so 16 384
/// characters of any width.
pub fn plan_text() -> ObjectBuilder {
    not_blank(
        crate::domain::MAX_PLAN_BYTES / 4,
        "The plan: not blank, at most 64 KiB.",
    )
}

/// Why a plan is rejected: what the planning run is told.
pub fn plan_reason() -> ObjectBuilder {
    not_blank(
        crate::knob::MAX_TEXT,
        "Why: not blank, at most 2000 characters.",
    )
}
