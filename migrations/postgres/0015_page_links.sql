-- Links people open are pages (issue 25): a built-in pull request's URL was
-- lab's JSON API (`…/api/v1/repos/{name}/pulls/{n}`, a 401 in a browser);
-- it is now the page (`…/repos/{name}/pulls/{n}`). Claims and queued
-- notifications that carry one of those URLs follow. Forge URLs (pages
-- already) are not in `pulls` and are left alone.
UPDATE afk_claims SET pr_url = REPLACE(pr_url, '/api/v1/repos/', '/repos/')
    WHERE pr_url IN (SELECT url FROM pulls);
UPDATE notify_outbox SET pull_request = REPLACE(pull_request, '/api/v1/repos/', '/repos/')
    WHERE pull_request IN (SELECT url FROM pulls);
UPDATE pulls SET url = REPLACE(url, '/api/v1/repos/', '/repos/')
    WHERE url LIKE '%/api/v1/repos/%/pulls/%';
