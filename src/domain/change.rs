//! A change to one stored field, as a patch asks for it.

/// A change to one field: leave it, clear it (inherit, or the built-in
/// default for fields that cannot inherit), or set it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Change<T> {
    #[default]
    Keep,
    Clear,
    Set(T),
}

impl<T> Change<T> {
    pub fn is_keep(&self) -> bool {
        matches!(self, Change::Keep)
    }
}
