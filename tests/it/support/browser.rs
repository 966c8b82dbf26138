//! Real headless Chromium, driven over WebDriver (chromedriver), for the
//! page tests. Screenshots (and chromedriver's log) go to
//! target/browser-screenshots/<test>/<backend>/.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use thirtyfour::prelude::*;

use super::wait;

pub struct Browser {
    pub driver: WebDriver,
    chromedriver: Child,
    _profile: tempfile::TempDir,
    shots: PathBuf,
    pub base: String,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A Chromium start that failed, and the chromedriver log that says why.
struct StartFailure {
    error: WebDriverError,
    log: PathBuf,
}

/// How many times a Chromium session is tried before the test fails. A
/// fresh Chromium very rarely exits while it starts (seen once in CI, on a
/// freshly installed Chromium, with two starting at once); that is the
/// machine's, not the page's, so it is retried with a fresh profile and a
/// fresh chromedriver, and each failure's log is kept and reported.
const START_ATTEMPTS: u32 = 3;

impl Browser {
    /// Starts chromedriver and a headless Chromium. `test` names the
    /// screenshot folder (which also keeps chromedriver's log).
    pub async fn start(base: &str, test: &str) -> Browser {
        let shots = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("target/browser-screenshots")
            .join(test);
        std::fs::create_dir_all(&shots).unwrap();
        for attempt in 1..=START_ATTEMPTS {
            let _ = std::fs::remove_file(shots.join(format!("chromedriver-{attempt}.log")));
        }
        for attempt in 1..=START_ATTEMPTS {
            match Self::try_start(&shots, attempt).await {
                Ok((driver, chromedriver, profile)) => {
                    return Browser {
                        driver,
                        chromedriver,
                        _profile: profile,
                        shots,
                        base: base.trim_end_matches('/').to_owned(),
                    };
                }
                Err(f) => {
                    let log = std::fs::read_to_string(&f.log).unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(30).collect();
                    eprintln!(
                        "Chromium did not start (attempt {attempt} of {START_ATTEMPTS}): {}\n\
                         chromedriver's log ({}) ends:\n{}",
                        f.error,
                        f.log.display(),
                        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                    );
                }
            }
        }
        panic!("Chromium did not start in {START_ATTEMPTS} attempts (see the logs above)");
    }

    async fn try_start(
        shots: &std::path::Path,
        attempt: u32,
    ) -> Result<(WebDriver, Child, tempfile::TempDir), StartFailure> {
        let port = free_port();
        let log = shots.join(format!("chromedriver-{attempt}.log"));
        let mut chromedriver = Command::new(
            std::env::var("LAB_CHROMEDRIVER").unwrap_or_else(|_| "chromedriver".into()),
        )
        .arg(format!("--port={port}"))
        .arg(format!("--log-path={}", log.display()))
        .arg("--log-level=INFO")
        .arg("--enable-chrome-logs")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver runs (apt-get install chromium chromium-driver)");
        let url = format!("http://127.0.0.1:{port}");
        // Not up in time: the session below fails, and is tried again.
        let _ = wait::within(wait::secs(5), async || {
            reqwest::get(format!("{url}/status")).await.is_ok()
        })
        .await;
        let profile = tempfile::tempdir().unwrap();
        let mut caps = DesiredCapabilities::chrome();
        caps.set_binary(
            &std::env::var("LAB_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()),
        )
        .unwrap();
        for arg in [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--window-size=1280,1000",
        ] {
            caps.add_arg(arg).unwrap();
        }
        caps.add_arg(&format!("--user-data-dir={}", profile.path().display()))
            .unwrap();
        match WebDriver::new(&url, caps).await {
            Ok(driver) => Ok((driver, chromedriver, profile)),
            Err(error) => {
                let _ = chromedriver.kill();
                let _ = chromedriver.wait();
                Err(StartFailure { error, log })
            }
        }
    }

    pub async fn go(&self, path: &str) {
        self.driver
            .goto(format!("{}{path}", self.base))
            .await
            .unwrap();
    }

    pub async fn shot(&self, name: &str) {
        self.driver
            .screenshot(&self.shots.join(format!("{name}.png")))
            .await
            .unwrap();
    }

    /// The page's text (retried while the page is being replaced).
    pub async fn text(&self) -> String {
        wait::until(
            "a readable body on the page",
            wait::millis(2500),
            async || {
                let body = self.driver.find(By::Tag("body")).await.ok()?;
                body.text().await.ok()
            },
        )
        .await
    }

    /// Logs in with the admin token through the login form.
    pub async fn login(&self, token: &str) {
        self.go("/runs").await;
        assert!(
            self.driver
                .current_url()
                .await
                .unwrap()
                .path()
                .starts_with("/login")
        );
        self.shot("login").await;
        self.driver
            .find(By::Id("token"))
            .await
            .unwrap()
            .send_keys(token)
            .await
            .unwrap();
        self.driver
            .find(By::Css("form button[type=submit]"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        self.wait_path("/runs").await;
    }

    pub async fn wait_path(&self, path: &str) {
        wait::until(
            format!("the browser to reach {path}"),
            wait::secs(20),
            async || {
                let at = self.driver.current_url().await.unwrap();
                if at.path() == path { Ok(()) } else { Err(at) }
            },
        )
        .await
    }

    /// Polls until `f` holds for the page's text.
    pub async fn wait_text(&self, what: &str, f: impl Fn(&str) -> bool) -> String {
        // Generous: a loaded CI machine runs four such tests at once.
        wait::until(what, wait::secs(20), async || {
            let text = self.text().await;
            if f(&text) { Ok(text) } else { Err(text) }
        })
        .await
    }

    pub async fn select(&self, name: &str, value: &str) {
        let el = self.driver.find(By::Name(name)).await.unwrap();
        thirtyfour::components::SelectElement::new(&el)
            .await
            .unwrap()
            .select_by_value(value)
            .await
            .unwrap();
    }

    pub async fn selected(&self, name: &str) -> String {
        let el = self.driver.find(By::Name(name)).await.unwrap();
        let sel = thirtyfour::components::SelectElement::new(&el)
            .await
            .unwrap();
        sel.first_selected_option()
            .await
            .unwrap()
            .value()
            .await
            .unwrap()
            .unwrap_or_default()
    }

    pub async fn fill(&self, name: &str, value: &str) {
        let el = self.driver.find(By::Name(name)).await.unwrap();
        el.clear().await.unwrap();
        el.send_keys(value).await.unwrap();
    }

    /// Clicks the button with this text. A live page may move it while the
    /// click is on its way (a section above it filled in), so the click is
    /// tried again on the button where it is now, as a person would.
    pub async fn submit(&self, button_text: &str) {
        let xpath = format!("//button[normalize-space(.)='{button_text}']");
        wait::until(
            format!("a click on '{button_text}'"),
            wait::secs(5).every_ms(100),
            async || {
                let button = self.driver.find(By::XPath(&xpath)).await.unwrap();
                let _ = button.scroll_into_view().await;
                match button.click().await {
                    Ok(()) => Ok(()),
                    Err(e) => match e.as_inner() {
                        thirtyfour::error::WebDriverErrorInner::ElementClickIntercepted(_) => {
                            Err(e.to_string())
                        }
                        _ => panic!("clicking '{button_text}': {e}"),
                    },
                }
            },
        )
        .await
    }

    pub async fn quit(mut self) {
        let d = self.driver.clone();
        let _ = d.quit().await;
        let _ = self.chromedriver.kill();
        let _ = self.chromedriver.wait();
    }
}
