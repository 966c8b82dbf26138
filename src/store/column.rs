//! Domain values stored as their spelling in a TEXT column (an outcome, an
//! issue state): bound and read as that text, on either backend. A stored
//! spelling lab does not know is a decoding error, never a guess.

use crate::domain::{
    IssueState, NotifyEvent, NotifyKind, Outcome, PlanState, Stage, StopCause, Verdict,
};

macro_rules! text_column {
    ($($t:ty),+) => {$(
        impl<DB: sqlx::Database> sqlx::Type<DB> for $t
        where
            str: sqlx::Type<DB>,
        {
            fn type_info() -> DB::TypeInfo {
                <str as sqlx::Type<DB>>::type_info()
            }
            fn compatible(ty: &DB::TypeInfo) -> bool {
                <str as sqlx::Type<DB>>::compatible(ty)
            }
        }

        impl<'r, DB: sqlx::Database> sqlx::Decode<'r, DB> for $t
        where
            &'r str: sqlx::Decode<'r, DB>,
        {
            fn decode(
                value: <DB as sqlx::Database>::ValueRef<'r>,
            ) -> Result<Self, sqlx::error::BoxDynError> {
                Ok(<&str as sqlx::Decode<'r, DB>>::decode(value)?.parse::<$t>()?)
            }
        }

        impl<'q, DB: sqlx::Database> sqlx::Encode<'q, DB> for $t
        where
            &'q str: sqlx::Encode<'q, DB>,
        {
            fn encode_by_ref(
                &self,
                buf: &mut <DB as sqlx::Database>::ArgumentBuffer,
            ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                <&str as sqlx::Encode<'q, DB>>::encode_by_ref(&self.as_str(), buf)
            }
        }
    )+};
}

text_column!(
    Outcome,
    IssueState,
    StopCause,
    NotifyKind,
    NotifyEvent,
    Stage,
    PlanState,
    Verdict
);
