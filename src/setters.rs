//! The one builder scheme of every config: start from `Default`, then
//! `with_*` setters, each setting one field and returning the config. Configs
//! are `#[non_exhaustive]`, so a field added later breaks no caller.

/// Writes the `with_*` setters of a config: `with_name: field: Type`, each
/// with its doc comment.
#[macro_export]
#[doc(hidden)]
macro_rules! setters {
    ($ty:ty { $($(#[$doc:meta])* $name:ident: $field:ident: $t:ty),* $(,)? }) => {
        impl $ty {
            $(
                $(#[$doc])*
                #[must_use]
                pub fn $name(mut self, $field: $t) -> Self {
                    self.$field = $field;
                    self
                }
            )*
        }
    };
}
