//! Request and response bodies shared by several resources: the API's
//! shapes of domain records. Small domain values that travel as they are
//! (run kind, run state, layer) derive serde themselves; records such as a
//! repo, a run or the settings are converted to a body here or beside their
//! handlers.

use std::collections::BTreeMap;

/// Declares a request body the document describes as another body's schema
/// plus rules the derive cannot state (`$schema` builds them around a
/// reference to `$inner`): `pub struct $name;` with its schema.
macro_rules! refined_body {
    ($(#[$meta:meta])* $name:ident, $inner:ty, $schema:path) => {
        $(#[$meta])*
        pub struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                $schema(
                    utoipa::openapi::Ref::from_schema_name(<$inner as utoipa::ToSchema>::name())
                        .into(),
                )
                .into()
            }
        }

        impl utoipa::ToSchema for $name {
            fn schemas(
                schemas: &mut Vec<(
                    String,
                    utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
                )>,
            ) {
                schemas.push((
                    <$inner as utoipa::ToSchema>::name().into(),
                    <$inner as utoipa::PartialSchema>::schema(),
                ));
                <$inner as utoipa::ToSchema>::schemas(schemas);
            }
        }
    };
}
pub(crate) use refined_body;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::extract::Field;

use crate::domain::{Change, Defaults};
use crate::settings::{DefaultsPatch, KindPatch};
use crate::validate::{Errors, FieldError};

/// One scope's defaults. `null` means inherit.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DefaultsBody {
    pub model_default: Option<String>,
    pub effort_default: Option<String>,
    pub afk_model_default: Option<String>,
    pub afk_effort_default: Option<String>,
    /// Spawn options for AFK runs, by key; a key that is absent inherits.
    pub afk_options: BTreeMap<String, String>,
    /// Plan runs' own; `null` (or an absent option) inherits the AFK ones.
    #[serde(default)]
    pub plan_model_default: Option<String>,
    #[serde(default)]
    pub plan_effort_default: Option<String>,
    #[serde(default)]
    pub plan_options: BTreeMap<String, String>,
    /// Review runs' own; `null` (or an absent option) inherits the AFK ones.
    #[serde(default)]
    pub review_model_default: Option<String>,
    #[serde(default)]
    pub review_effort_default: Option<String>,
    #[serde(default)]
    pub review_options: BTreeMap<String, String>,
}

impl From<Defaults> for DefaultsBody {
    fn from(d: Defaults) -> Self {
        DefaultsBody {
            model_default: d.model_default,
            effort_default: d.effort_default,
            afk_model_default: d.afk_model_default,
            afk_effort_default: d.afk_effort_default,
            afk_options: d.afk_options,
            plan_model_default: d.plan.model_default,
            plan_effort_default: d.plan.effort_default,
            plan_options: d.plan.options,
            review_model_default: d.review.model_default,
            review_effort_default: d.review.effort_default,
            review_options: d.review.options,
        }
    }
}

/// A change to one scope's defaults: fields present are set; `null` or `""`
/// clears (inherit). `afk_options` is merged key by key; a key set to `null`
/// or `""` is cleared. Option values are strings or booleans.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DefaultsPatchBody {
    pub model_default: Field<String>,
    pub effort_default: Field<String>,
    pub afk_model_default: Field<String>,
    pub afk_effort_default: Field<String>,
    pub afk_options: Field<BTreeMap<String, serde_json::Value>>,
    pub plan_model_default: Field<String>,
    pub plan_effort_default: Field<String>,
    pub plan_options: Field<BTreeMap<String, serde_json::Value>>,
    pub review_model_default: Field<String>,
    pub review_effort_default: Field<String>,
    pub review_options: Field<BTreeMap<String, serde_json::Value>>,
}

impl DefaultsPatchBody {
    /// The domain change; option values that are neither string, bool nor
    /// null are recorded in `errs` under `prefix`.
    pub fn into_patch(self, prefix: &str, errs: &mut Errors) -> DefaultsPatch {
        DefaultsPatch {
            model_default: self.model_default.change(),
            effort_default: self.effort_default.change(),
            afk_model_default: self.afk_model_default.change(),
            afk_effort_default: self.afk_effort_default.change(),
            afk_options: options_patch(self.afk_options, &format!("{prefix}afk_options"), errs),
            plan: KindPatch {
                model_default: self.plan_model_default.change(),
                effort_default: self.plan_effort_default.change(),
                options: options_patch(self.plan_options, &format!("{prefix}plan_options"), errs),
            },
            review: KindPatch {
                model_default: self.review_model_default.change(),
                effort_default: self.review_effort_default.change(),
                options: options_patch(
                    self.review_options,
                    &format!("{prefix}review_options"),
                    errs,
                ),
            },
        }
    }
}

/// Options changed key by key; values that are neither string, bool nor
/// null are recorded in `errs` under `field`.
fn options_patch(
    o: Field<BTreeMap<String, serde_json::Value>>,
    field: &str,
    errs: &mut Errors,
) -> BTreeMap<String, Change<String>> {
    if matches!(o, Field::Null) {
        errs.push(FieldError::new(
            field,
            "must be an object of option keys; clear one key with {\"key\": null}",
        ));
    }
    match o {
        Field::Absent | Field::Null => BTreeMap::new(),
        Field::Value(map) => map
            .into_iter()
            .filter_map(|(k, v)| {
                let change = match v {
                    serde_json::Value::Null => Change::Clear,
                    serde_json::Value::Bool(b) => Change::Set(b.to_string()),
                    serde_json::Value::String(s) if s.is_empty() => Change::Clear,
                    serde_json::Value::String(s) => Change::Set(s),
                    other => {
                        errs.push(
                            FieldError::new(
                                format!("{field}.{k}"),
                                "must be a string, a boolean, or null to clear",
                            )
                            .with_value(crate::validate::shown(&other.to_string())),
                        );
                        return None;
                    }
                };
                Some((k, change))
            })
            .collect(),
    }
}
