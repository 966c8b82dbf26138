//! lab's integration tests: one binary, real servers, real databases.

mod support;

mod afk;
mod afk_race;
mod agent_state;
mod api_auth;
mod api_errors;
mod api_pulls;
mod api_repos;
mod api_scope;
mod api_settings;
mod browser;
mod browser_screen;
mod contract;
mod crash_launch;
mod doctor;
mod forges;
mod hostile;
mod labctl;
mod labctl_limits;
mod layers;
mod notifications;
mod notifications_ui;
mod once;
mod openapi_doc;
mod pages_input;
mod readopt;
mod real_cli;
mod runs;
mod runs_end;
mod sandbox;
mod screen;
mod store;
mod store_cache;
mod store_ledger;
mod usage;
