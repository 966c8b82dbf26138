//! `sqlx::migrate!` embeds the `migrations/` folders when lab compiles, and
//! cargo does not watch them by itself: without this, a migration added
//! since the last build would be missing from the binary.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
