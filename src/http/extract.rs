//! Extractors whose rejections are API errors, and the three-state field of
//! a partial update.

use crate::domain::Change;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::{DeserializeOwned, Visitor};
use serde::{Deserialize, Deserializer};

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

/// A struct read from a JSON object and nothing else: serde also reads a
/// struct from an array of its fields (`[]` would be an empty settings
/// change), which no request body of the API is.
pub struct Object<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(ObjectOnly(d)).map(Object)
    }
}

/// For `#[serde(default, deserialize_with)]` on an `Option`: a field that
/// may be left out but, when there, holds a value (`null` is refused, as the
/// document's type says).
pub fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// For `#[serde(deserialize_with)]`: a nested struct, from an object only.
pub fn object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Object::deserialize(d).map(|Object(v)| v)
}

/// For `#[serde(deserialize_with)]`: a map of structs, each from an object.
pub fn objects<'de, D, T>(d: D) -> Result<std::collections::BTreeMap<String, T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    let map = std::collections::BTreeMap::<String, Object<T>>::deserialize(d)?;
    Ok(map.into_iter().map(|(k, Object(v))| (k, v)).collect())
}

/// Reads a struct as a map: an array is refused like any other non-object.
struct ObjectOnly<D>(D);

impl<'de, D: Deserializer<'de>> Deserializer<'de> for ObjectOnly<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(v)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_map(MapsOnly(v))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

/// A struct's visitor that takes a map only, and says it expected a JSON
/// object when it got anything else.
struct MapsOnly<V>(V);

impl<'de, V: Visitor<'de>> Visitor<'de> for MapsOnly<V> {
    type Value = V::Value;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.0.visit_map(map)
    }
}

/// For `#[serde(deserialize_with)]` on a `Field<i64>`: a whole number,
/// written `5` or `5.0` (JSON Schema's `integer` is both), never `5.5`.
pub fn whole_number<'de, D: Deserializer<'de>>(d: D) -> Result<Field<i64>, D::Error> {
    struct Whole;
    impl Visitor<'_> for Whole {
        type Value = Field<i64>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a whole number or null")
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Field<i64>, E> {
            Ok(Field::Null)
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Field<i64>, E> {
            Ok(Field::Value(v))
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Field<i64>, E> {
            i64::try_from(v)
                .map(Field::Value)
                .map_err(|_| E::custom(format!("{v} is too large")))
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Field<i64>, E> {
            // i64::MAX is not an f64: the bounds are -2^63 and 2^63.
            if v.fract() == 0.0
                && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&v)
            {
                Ok(Field::Value(v as i64))
            } else {
                Err(E::custom(format!("{v} is not a whole number in range")))
            }
        }
    }
    d.deserialize_any(Whole)
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

impl Field<serde_json::Map<String, serde_json::Value>> {
    /// Knobs replace-set: absent keeps them, `null` and `{}` clear them.
    pub fn into_knobs(self) -> Option<crate::knob::Input> {
        match self {
            Field::Absent => None,
            Field::Null => Some(crate::knob::Input::Json(Default::default())),
            Field::Value(m) => Some(crate::knob::Input::Json(m)),
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

impl Field<f64> {
    pub fn change(self) -> Change<f64> {
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
