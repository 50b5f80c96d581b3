// The operator page in headless Chromium (run by ops/browser/check, which starts the API and a
// worker): a webhook whose receiver answers 500 makes a dead delivery; the page, given the
// operator token, lists it among the dead work, retries it from its row; the receiver then
// gets the delivery again (answering 200), the dead list no longer has it, and the audit log
// shows the retry. Any error the page throws or logs fails the check. Then the docs page
// (/docs), served under a content security policy: Swagger UI must render the operations with
// no violation reported (a refused script, style, image or call is a console error).
import http from "node:http";
import { chromium } from "playwright-core";

const base = process.env.PARLEY_BASE;
const key = process.env.PARLEY_KEY;
const token = process.env.PARLEY_ADMIN_TOKEN;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function call(method, path, body, bearer = key) {
  const resp = await fetch(base + path, {
    method,
    headers: { Authorization: "Bearer " + bearer, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await resp.json();
  if (!resp.ok) throw new Error(`${method} ${path}: ${resp.status} ${JSON.stringify(json)}`);
  return json.data;
}

async function until(what, check, seconds = 30) {
  for (let i = 0; i < seconds * 4; i++) {
    const value = await check();
    if (value) return value;
    await sleep(250);
  }
  throw new Error("timed out waiting for " + what);
}

// The receiver: refuses until told otherwise.
let answer = 500;
let received = 0;
const receiver = http.createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    received += 1;
    res.writeHead(answer);
    res.end();
  });
});
await new Promise((r) => receiver.listen(0, "127.0.0.1", r));
const hookUrl = `http://127.0.0.1:${receiver.address().port}/hook`;

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, args: ["--no-sandbox"] });
const problems = [];
try {
  const hook = await call("POST", "/api/v1/webhooks", { url: hookUrl, events: ["lead.created"] });
  await call("POST", "/api/v1/leads", { name: "Browser test lead" });
  const dead = await until("the dead delivery", async () => {
    const page = await call("GET", `/admin/v1/dead?queue=webhook-delivery&webhookId=${hook.id}`, undefined, token);
    return page.items[0];
  });
  answer = 200;

  const page = await browser.newPage();
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => { if (m.type() === "error") problems.push("console: " + m.text()); });
  await page.goto(base + "/admin");
  await page.fill("#token", token);
  await page.click("#save-token");
  await page.waitForSelector('#queues-table tbody tr[data-queue="webhook-delivery"]');
  await page.selectOption("#dead-queue", "webhook-delivery");
  await page.fill("#dead-webhook", hook.id);
  await page.click("#dead-load");
  const row = page.locator(`#dead-table tbody tr[data-id="${dead.id}"]`);
  await row.waitFor();
  const text = await row.textContent();
  if (!text.includes("http_500")) throw new Error("the dead delivery's row lacks its reason: " + text);
  await row.locator("button.retry-one").click();
  await page.waitForFunction(() => /retry .*: completed/.test(document.getElementById("status").textContent));
  await until("the retried delivery", () => received >= 2);
  await page.waitForFunction((id) => !document.querySelector(`#dead-table tbody tr[data-id="${id}"]`), dead.id);
  await page.waitForFunction(() => document.querySelector("#audit-table tbody").textContent.includes("retry"));
  if (process.env.PARLEY_SCREENSHOT) await page.screenshot({ path: process.env.PARLEY_SCREENSHOT, fullPage: true });
  if (received !== 2) throw new Error(`the receiver got ${received} requests, not 2`);
  if (problems.length) throw new Error(problems.join("\n"));
  console.log("the operator page listed the dead delivery and retried it: the receiver got it once more");

  const docs = await browser.newPage();
  const docsProblems = [];
  docs.on("pageerror", (e) => docsProblems.push("page error: " + e.message));
  docs.on("console", (m) => { if (m.type() === "error") docsProblems.push("console: " + m.text()); });
  const served = await docs.goto(base + "/docs/");
  const policy = served.headers()["content-security-policy"] || "";
  if (!policy.includes("script-src 'self'")) throw new Error("/docs has no script policy: " + policy);
  await docs.waitForSelector(".opblock-summary-path", { timeout: 30000 });
  const operations = await docs.locator(".opblock-summary-path").count();
  if (operations < 50) throw new Error(`/docs shows ${operations} operations`);
  if (docsProblems.length) throw new Error(docsProblems.join("\n"));
  console.log(`the docs page rendered ${operations} operations under its content security policy`);
} finally {
  await browser.close();
  receiver.close();
}
