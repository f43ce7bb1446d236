// Connects Playwright's Node client (playwright-core, no browser of its
// own) to a running Chromium over CDP and reads a page's title:
//
//   node cdp_title.js CDP_URL PAGE_URL [TOKEN]
//
// CDP_URL is a ws:// URL, or an http:// endpoint whose /json/version
// names the WebSocket; TOKEN, when given, is sent as x-api-key on every
// request of the connection.
//
// Prints one JSON line: {"title": "..."} on success (exit 0), or
// {"error": "..."} when the connection or the page fails (exit 1).
// up_browser_test.go runs it against a2c up --browser's cdp_url.
"use strict";
const { chromium } = require("playwright-core");

async function main() {
  const [cdpURL, pageURL, token] = process.argv.slice(2);
  if (!cdpURL || !pageURL) throw new Error("usage: node cdp_title.js CDP_URL PAGE_URL [TOKEN]");
  const headers = token ? { "x-api-key": token } : undefined;
  const browser = await chromium.connectOverCDP(cdpURL, { timeout: 20000, headers });
  try {
    const context = browser.contexts()[0] || (await browser.newContext());
    const page = await context.newPage();
    await page.goto(pageURL, { timeout: 20000 });
    const title = await page.title();
    await page.close();
    return { title, version: browser.version() };
  } finally {
    // Over CDP, close() disconnects and leaves the browser running.
    await browser.close();
  }
}

main().then(
  (r) => { console.log(JSON.stringify(r)); process.exit(0); },
  (e) => { console.log(JSON.stringify({ error: String(e && e.message || e) })); process.exit(1); },
);
