//! The schemas of the limits a settings or repo change may set: the AFK
//! scheduler's, the budgets (issue 14), a repo's check command and how long
//! workspaces are kept, from the validators' own bounds.

use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, SchemaType, Type};

use super::{int, string};
use crate::settings::{
    self, MAX_CONCURRENT, RUN_TIMEOUT_MINUTES, TICK_SECONDS, WORKSPACE_RETENTION_HOURS,
};

pub fn max_concurrent_patch() -> ObjectBuilder {
    let (lo, hi) = MAX_CONCURRENT;
    int(lo, hi, true).description(Some("Most AFK runs live at once, over all repos."))
}

pub fn tick_seconds_patch() -> ObjectBuilder {
    let (lo, hi) = TICK_SECONDS;
    int(lo, hi, true).description(Some("Seconds between scheduler ticks."))
}

pub fn run_timeout_minutes_patch() -> ObjectBuilder {
    let (lo, hi) = RUN_TIMEOUT_MINUTES;
    int(lo, hi, true).description(Some("Minutes an AFK run may take before lab stops it."))
}

pub fn check_command_patch() -> ObjectBuilder {
    string(true)
        .max_length(Some(crate::validate::MAX_CHECK_COMMAND))
        .pattern(Some(r"^[^\x00-\x08\x0b-\x1f\x7f-\x9f]*$".to_owned()))
        .description(Some(
            "A shell command lab runs in an AFK run's workspace, in its sandbox, after each round of \
             its agent once it opened its pull request (exit 0 is green); `null` or `\"\"` removes it.",
        ))
}

pub fn max_rounds_patch() -> ObjectBuilder {
    let (lo, hi) = settings::MAX_ROUNDS;
    int(lo, hi, true).description(Some(
        "Rounds an AFK run may have on its pull request, the first included; `null` resets to 3.",
    ))
}

pub fn max_plan_rounds_patch() -> ObjectBuilder {
    let (lo, hi) = settings::MAX_PLAN_ROUNDS;
    int(lo, hi, true).description(Some(
        "Rounds of plan and plan review an issue may have before its work starts, the first \
         included; `null` resets to 3.",
    ))
}

pub fn max_attempts_patch() -> ObjectBuilder {
    let (lo, hi) = settings::MAX_ATTEMPTS;
    int(lo, hi, true).description(Some(
        "Attempts at one issue, the first included; `null` resets to 2.",
    ))
}

pub fn max_tokens_patch() -> ObjectBuilder {
    let (lo, hi) = settings::MAX_TOKENS;
    int(lo, hi, true).description(Some("Tokens an AFK run may use; `null`: no cap."))
}

pub fn max_cost_usd_patch() -> ObjectBuilder {
    let (lo, hi) = settings::MAX_COST_NANO_USD;
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Number, Type::Null]))
        .minimum(Some(lo as f64 / 1e9))
        .maximum(Some(hi as f64 / 1e9))
        .description(Some("US dollars an AFK run may cost; `null`: no cap."))
}

pub fn memory_per_run_mb_patch() -> ObjectBuilder {
    let (lo, hi) = settings::MEMORY_PER_RUN_MB;
    int(lo, hi, true).description(Some(
        "MiB of available memory an AFK launch needs; it waits while the machine has less (0: no check).",
    ))
}

pub fn workspace_retention_hours_patch() -> ObjectBuilder {
    let (lo, hi) = WORKSPACE_RETENTION_HOURS;
    int(lo, hi, true).description(Some(
        "Hours an ended run's workspace is kept; `null` keeps it until the run is removed.",
    ))
}

pub fn memory_max_mb_patch() -> ObjectBuilder {
    let (lo, hi) = settings::MEMORY_MAX_MB;
    int(lo, hi, true).description(Some(
        "MiB of memory each run may use (its cgroup's memory.max; a run past it is ended \
         `failed`, out of memory); `null`: no cap.",
    ))
}

pub fn pids_max_patch() -> ObjectBuilder {
    let (lo, hi) = settings::PIDS_MAX;
    int(lo, hi, true).description(Some(
        "Processes and threads each run may have at once (pids.max); `null`: no cap.",
    ))
}

pub fn log_max_mb_patch() -> ObjectBuilder {
    let (lo, hi) = settings::LOG_MAX_MB;
    int(lo, hi, true).description(Some(
        "MiB of each run's log lab keeps; past it the oldest output is dropped; `null` resets to 64.",
    ))
}

pub fn repo_memory_max_mb_patch() -> ObjectBuilder {
    let (lo, hi) = settings::MEMORY_MAX_MB;
    int(lo, hi, true).description(Some(
        "MiB of memory each run of this repo may use; `null` inherits the global setting.",
    ))
}

pub fn repo_pids_max_patch() -> ObjectBuilder {
    let (lo, hi) = settings::PIDS_MAX;
    int(lo, hi, true).description(Some(
        "Processes and threads each run of this repo may have; `null` inherits the global setting.",
    ))
}

pub fn carry_cli_keys_patch() -> ArrayBuilder {
    ArrayBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
        .items(
            string(false)
                .pattern(Some(format!(
                    "^[A-Za-z0-9_.-]{{1,{}}}$",
                    settings::CARRY_KEY_LEN
                )))
                .max_length(Some(settings::CARRY_KEY_LEN)),
        )
        .max_items(Some(settings::CARRY_KEYS))
        .description(Some(
            "Top-level keys of the operator's CLI config files each run's own copy gets (the \
             whole list; `[]` or `null` carries none).",
        ))
}
