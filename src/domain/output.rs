//! How a run's terminal output is served.

use super::spelled::spelled;

spelled! {
    /// The form of a run's output (`GET /runs/{id}/output?format=`).
    #[derive(Default)]
    pub enum OutputFormat ("output format") {
        /// Terminal control sequences removed.
        #[default]
        Text = "text",
        /// As the terminal got it.
        Raw = "raw",
    }
}
