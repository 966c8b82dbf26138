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

spelled! {
    /// The form of a run's screen (`GET /runs/{id}/screen?format=`).
    #[derive(Default)]
    pub enum ScreenFormat ("screen format") {
        /// The lines as drawn, without colours.
        #[default]
        Text = "text",
        /// Spans with colour classes and styles, for a `<pre>`.
        Html = "html",
        /// Terminal escapes that redraw the screen on a terminal.
        Ansi = "ansi",
    }
}
