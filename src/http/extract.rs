//! Extractors whose rejections are API errors, and the three-state field of
//! a partial update.

use crate::domain::Change;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::error::ApiError;

/// A JSON object body; a malformed one, or one that is not an object, is a
/// 400 that says what was wrong.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match axum::Json::<Object<T>>::from_request(req, state).await {
            Ok(axum::Json(Object(v))) => Ok(ApiJson(v)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

/// A value read only from a JSON object. serde lets a struct be read from an
/// array too (its fields in order), so `[]` would pass as an empty patch.
struct Object<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct OnlyMaps<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for OnlyMaps<T> {
            type Value = T;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(OnlyMaps(std::marker::PhantomData))
            .map(Object)
    }
}

fn json_rejection(r: JsonRejection) -> ApiError {
    let status = r.status();
    let code = match status {
        StatusCode::PAYLOAD_TOO_LARGE => "too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        _ => "invalid",
    };
    // A body that parses but does not fit (axum's 422) is as invalid as one
    // that does not parse: lab answers 400 for both.
    let status = if status.is_server_error() || status == StatusCode::UNPROCESSABLE_ENTITY {
        StatusCode::BAD_REQUEST
    } else {
        status
    };
    let message = match &r {
        JsonRejection::MissingJsonContentType(_) => {
            "expected a JSON body with 'Content-Type: application/json'".to_owned()
        }
        _ => format!("request body: {}", r.body_text()),
    };
    ApiError::new(status, code, message)
}

/// Query parameters; unknown or malformed ones are a 400.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(v)| ApiQuery(v))
            .map_err(|r: QueryRejection| ApiError::bad_request(format!("query: {}", r.body_text())))
    }
}

/// Path parameters; undecodable ones are a 400.
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(v)| ApiPath(v))
            .map_err(|r: PathRejection| ApiError::bad_request(format!("path: {}", r.body_text())))
    }
}

/// A field of a partial update: absent (leave it), `null` (clear it), or a
/// value. Use with `#[serde(default)]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Field<T> {
    #[default]
    Absent,
    Null,
    Value(T),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Field<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Option::<T>::deserialize(d)? {
            None => Field::Null,
            Some(v) => Field::Value(v),
        })
    }
}

// The OpenAPI generator serialises `Default` values of request bodies.
impl<T: Serialize> Serialize for Field<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Field::Absent | Field::Null => s.serialize_none(),
            Field::Value(v) => s.serialize_some(v),
        }
    }
}

impl Field<String> {
    /// `null` and `""` both clear.
    pub fn change(self) -> Change<String> {
        match self {
            Field::Absent => Change::Keep,
            Field::Null => Change::Clear,
            Field::Value(v) if v.is_empty() => Change::Clear,
            Field::Value(v) => Change::Set(v),
        }
    }
}

impl Field<i64> {
    pub fn change(self) -> Change<i64> {
        match self {
            Field::Absent => Change::Keep,
            Field::Null => Change::Clear,
            Field::Value(v) => Change::Set(v),
        }
    }
}

impl Field<bool> {
    pub fn change(self) -> Change<bool> {
        match self {
            Field::Absent => Change::Keep,
            Field::Null => Change::Clear,
            Field::Value(v) => Change::Set(v),
        }
    }
}
